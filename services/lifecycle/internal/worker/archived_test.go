package worker_test

import (
	"testing"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
)

// A repository's archived flag follows the deliveries in the order received, whichever commits
// first, and a release tag pushed is released unless the repository was archived by a delivery
// received after the push. GitHub refuses a push to an archived repository, so a push received
// after an archive proves an unarchive between them, whose job may commit later (migration 00085).
// Before it, a push decided before the unarchive was ignored without a word, and an archive
// committed after the unarchive left the repository archived for good.
func TestArchivedAppliesInReceivedOrder(t *testing.T) {
	t.Parallel()
	archived, unarchived := repoEvent("archived", nil), repoEvent("unarchived", nil)
	tests := []struct {
		name         string
		before       []eventdoc.Document // received and committed before docs
		docs         []eventdoc.Document // received in this order, committed in the reverse
		wantArchived bool
		wantRun      bool
	}{
		{"unarchived, then a tag pushed", []eventdoc.Document{archived}, []eventdoc.Document{unarchived, pushTag("v1.0.0", sha)}, false, true},
		{"a tag pushed, then archived", nil, []eventdoc.Document{pushTag("v1.0.0", sha), archived}, true, false},
		{"archived, then unarchived", nil, []eventdoc.Document{archived, unarchived}, false, false},
		{"unarchived, then archived", []eventdoc.Document{archived}, []eventdoc.Document{unarchived, archived}, true, false},
		{"archived before, a tag pushed", []eventdoc.Document{archived}, []eventdoc.Document{pushTag("v1.0.0", sha)}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.deliver(installationEvent("created", eventdoc.RepositoryRef{ID: repoID, FullName: "octo-org/hello-world"}))
			b.drain()
			for _, d := range tt.before {
				b.deliver(d)
				b.drain()
			}
			b.deliverReversed(tt.docs...)
			var isArchived bool
			if err := b.pool.QueryRow(b.ctx, `SELECT archived FROM repositories WHERE id = $1`, repoID).Scan(&isArchived); err != nil {
				t.Fatal(err)
			}
			if isArchived != tt.wantArchived {
				t.Errorf("archived %v, want %v: an older delivery overwrote a newer one", isArchived, tt.wantArchived)
			}
			if runs := b.count(`SELECT count(*) FROM release_runs`); (runs == 1) != tt.wantRun {
				t.Errorf("%d release runs, want a run: %v", runs, tt.wantRun)
			}
		})
	}
}
