package dispatcher

import (
	"slices"
	"testing"

	"github.com/boardreadyops/cloud/pkg/checkrun"
	"github.com/boardreadyops/cloud/pkg/outbox"
)

// The check-run creation's identity comes from the payload's repository id and ref; the run id
// (the payload's external_id, else the effect's run) is the earlier form it also accepts.
func TestCheckRunExternalID(t *testing.T) {
	t.Parallel()
	const run = "3f0c5b8e-2a1d-4e6f-9b7a-1c2d3e4f5a6b"
	v2 := checkrun.ExternalID(1296269, "refs/tags/v1.0.0")
	tests := []struct {
		name    string
		effect  outbox.Effect
		p       payload
		want    string
		earlier []string
	}{
		{"payload of 00006 and later", outbox.Effect{ReleaseRunID: run},
			payload{RepositoryID: 1296269, Ref: "refs/tags/v1.0.0", ExternalID: run}, v2, []string{run}},
		{"run id from the effect", outbox.Effect{ReleaseRunID: run},
			payload{RepositoryID: 1296269, Ref: "refs/tags/v1.0.0"}, v2, []string{run}},
		{"no run id at all", outbox.Effect{}, payload{RepositoryID: 1296269, Ref: "refs/tags/v1.0.0"}, v2, nil},
		{"no repository id: the earlier form", outbox.Effect{ReleaseRunID: run}, payload{Ref: "refs/tags/v1.0.0", ExternalID: run}, run, nil},
		{"no ref: the earlier form", outbox.Effect{ReleaseRunID: run}, payload{RepositoryID: 1296269}, run, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, earlier := checkRunExternalID(tt.effect, tt.p)
			if got != tt.want || !slices.Equal(earlier, tt.earlier) {
				t.Fatalf("got %q %v, want %q %v", got, earlier, tt.want, tt.earlier)
			}
		})
	}
}
