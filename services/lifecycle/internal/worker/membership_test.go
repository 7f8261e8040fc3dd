package worker_test

import (
	"testing"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
)

// membershipEvent is an installation_repositories delivery of action for the test repository.
func membershipEvent(action string) eventdoc.Document {
	d := eventdoc.Document{Event: "installation_repositories", Action: action, InstallationID: installationID,
		Installation: &eventdoc.Installation{ID: installationID, AccountLogin: "octo-org", AccountType: "Organization"}}
	ref := []eventdoc.RepositoryRef{{ID: repoID, FullName: "octo-org/hello-world"}}
	if action == "added" {
		d.RepositoriesAdded = ref
	} else {
		d.RepositoriesRemoved = ref
	}
	return d
}

// Two deliveries that change a repository's membership, received in one order and committed in
// the other (two lifecycle loops, or replicas, each claimed one): the repository is as the
// later-received one left it. Before migration 00078 the older one overwrote it, and a
// repository removed and added back a moment later could stay removed, its release tags ignored.
func TestRepositoryMembershipAppliesInReceivedOrder(t *testing.T) {
	t.Parallel()
	transferredIn := repoEvent("transferred", func(d *eventdoc.Document) { d.Repository.FullName = "octo-org/hello-world" })
	tests := []struct {
		name          string
		first, second eventdoc.Document // in the order received; committed second, first
		removed       bool              // the repository's state after both
	}{
		{"removed, then added back", membershipEvent("removed"), membershipEvent("added"), false},
		{"added, then removed", membershipEvent("added"), membershipEvent("removed"), true},
		{"removed from the installation, then transferred into it", membershipEvent("removed"), transferredIn, false},
		{"transferred in, then deleted", transferredIn, repoEvent("deleted", nil), true},
		{"deleted, then the installation re-created with it", repoEvent("deleted", nil),
			installationEvent("created", eventdoc.RepositoryRef{ID: repoID, FullName: "octo-org/hello-world"}), false},
		{"added, then the installation deleted", membershipEvent("added"), installationEvent("deleted"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.deliver(installationEvent("created", eventdoc.RepositoryRef{ID: repoID, FullName: "octo-org/hello-world"}))
			b.drain()
			first := b.deliver(tt.first)
			// The first-received job waits while the second is received and committed.
			b.exec(`UPDATE control_plane_jobs SET available_at = now() + interval '1 hour' WHERE id = $1`, first)
			second := b.deliver(tt.second)
			b.drain()
			b.exec(`UPDATE control_plane_jobs SET available_at = now() WHERE id = $1`, first)
			b.drain()
			for _, j := range []int64{first, second} {
				if st := b.jobStatus(j); st != "completed" {
					t.Fatalf("job %d %s", j, st)
				}
			}
			if removed := b.count(`SELECT count(*) FROM repositories WHERE id = $1 AND removed_at IS NOT NULL`, repoID) == 1; removed != tt.removed {
				t.Fatalf("repository removed %v, want %v: the older delivery overwrote the newer", removed, tt.removed)
			}
			// A release tag is released only while the repository is present.
			b.deliver(pushTag("v9.0.0", sha))
			b.drain()
			if runs := b.count(`SELECT count(*) FROM release_runs`); (runs == 1) == tt.removed {
				t.Fatalf("%d release runs with the repository removed %v", runs, tt.removed)
			}
		})
	}
}
