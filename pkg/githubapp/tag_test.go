package githubapp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/githubapp"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
)

func TestTagCommit(t *testing.T) {
	t.Parallel()
	const moved = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name, tag, expected string
		setup               func(s *githubsim.Simulator)
		want                string
		wantErr             error
		// notModified: GitHub answered 304, which leaves the rate-limit budget as it was.
		notModified bool
	}{
		{"at the expected commit: 304, free", "v1.0.0", sha, nil, sha, nil, true},
		{"expected in upper case", "v1.0.0", "6DCB09B5B57875F334F61AEBED695E2E4193DB5E", nil, sha, nil, false},
		{"no expectation: the commit", "v1.0.0", "", nil, sha, nil, false},
		{"moved: the new commit", "v1.0.0", sha, func(s *githubsim.Simulator) { s.SetTag(repo, "v1.0.0", moved) }, moved, nil, false},
		{"deleted: missing", "v1.0.0", sha, func(s *githubsim.Simulator) { s.DeleteTag(repo, "v1.0.0") }, "", githubapp.ErrTagMissing, false},
		{"never pushed: missing", "v9.9.9", sha, nil, "", githubapp.ErrTagMissing, false},
		{"the repository gone (404) is not a missing tag", "v1.0.0", sha, func(s *githubsim.Simulator) {
			s.AddFault(githubsim.Fault{Operation: githubsim.OpGetTagCommit, Response: &githubsim.Response{Status: 404, Body: `{"message":"Not Found"}`}})
		}, "", nil, false},
		{"a tag with a slash", "release/2026.12", sha, func(s *githubsim.Simulator) { s.SetTag(repo, "release/2026.12", sha) }, sha, nil, true},
		{"an answer that is not a SHA is refused", "v1.0.0", sha, func(s *githubsim.Simulator) {
			s.AddFault(githubsim.Fault{Operation: githubsim.OpGetTagCommit, Response: &githubsim.Response{Status: 200, Body: "<html>"}})
		}, "", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, 5*time.Second)
			e.sim.SetLimits(githubsim.Limits{Budget: 100})
			if tt.setup != nil {
				tt.setup(e.sim)
			}
			got, err := e.client.TagCommit(context.Background(), inst, repo, tt.tag, tt.expected)
			switch {
			case tt.want == "" && tt.wantErr == nil:
				if err == nil || githubapp.ClassOf(err) != githubapp.Rejected || errors.Is(err, githubapp.ErrTagMissing) {
					t.Fatalf("TagCommit = %q, %v; want a rejected error, not a missing tag", got, err)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) || githubapp.ClassOf(err) != githubapp.Rejected {
					t.Fatalf("TagCommit = %q, %v; want %v, rejected", got, err, tt.wantErr)
				}
			case err != nil || got != tt.want:
				t.Fatalf("TagCommit = %q, %v; want %q", got, err, tt.want)
			}
			if n := e.sim.Count(githubsim.OpGetTagCommit, 304); (n == 1) != tt.notModified {
				t.Fatalf("%d answers 304, want notModified %v", n, tt.notModified)
			}
		})
	}
}
