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
	const other = 55502 // the installation on the account the repository is transferred to
	transferredIn := repoEvent("transferred", func(d *eventdoc.Document) { d.Repository.FullName = "octo-org/hello-world" })
	transferredAway := repoEvent("transferred", func(d *eventdoc.Document) {
		d.InstallationID, d.Repository.FullName, d.Repository.OwnerLogin = other, "new-owner/hello-world", "new-owner"
	})
	staleRename := repoEvent("renamed", func(d *eventdoc.Document) { d.Repository.FullName = "octo-org/hello-old" })
	tests := []struct {
		name          string
		first, second eventdoc.Document // in the order received; committed second, first
		removed       bool              // the repository's state after both
		owner         int64             // its installation after both
		// unrecorded: the repository is not recorded before the two deliveries.
		unrecorded bool
	}{
		{"removed, then added back", membershipEvent("removed"), membershipEvent("added"), false, installationID, false},
		{"added, then removed", membershipEvent("added"), membershipEvent("removed"), true, installationID, false},
		{"added, then removed, first seen in them", membershipEvent("added"), membershipEvent("removed"), true, installationID, true},
		{"removed from the installation, then transferred into it", membershipEvent("removed"), transferredIn, false, installationID, false},
		{"transferred in, then deleted", transferredIn, repoEvent("deleted", nil), true, installationID, false},
		{"deleted, then the installation re-created with it", repoEvent("deleted", nil),
			installationEvent("created", eventdoc.RepositoryRef{ID: repoID, FullName: "octo-org/hello-world"}), false, installationID, false},
		{"added, then the installation deleted", membershipEvent("added"), installationEvent("deleted"), true, installationID, false},
		// A transfer to another account's installation, then the old installation lets go of it:
		// received in order, the removal finds it owned by the other and changes nothing.
		{"transferred away, then removed by the old installation", transferredAway, membershipEvent("removed"), false, other, false},
		{"transferred away, then the old installation deleted", transferredAway, installationEvent("deleted"), false, other, false},
		{"renamed under the old installation, then transferred away", staleRename, transferredAway, false, other, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			if tt.unrecorded {
				b.deliver(installationEvent("created"))
			} else {
				b.deliver(installationEvent("created", eventdoc.RepositoryRef{ID: repoID, FullName: "octo-org/hello-world"}))
			}
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
			var removed bool
			var owner int64
			if err := b.pool.QueryRow(b.ctx, `SELECT removed_at IS NOT NULL, installation_id FROM repositories WHERE id = $1`, repoID).
				Scan(&removed, &owner); err != nil {
				t.Fatal(err)
			}
			if removed != tt.removed || owner != tt.owner {
				t.Fatalf("repository removed %v under installation %d, want %v under %d: the older delivery overwrote the newer",
					removed, owner, tt.removed, tt.owner)
			}
			// A release tag is released only while the repository is present, by its installation.
			push := pushTag("v9.0.0", sha)
			push.InstallationID = tt.owner
			b.deliver(push)
			b.drain()
			if runs := b.count(`SELECT count(*) FROM release_runs`); (runs == 1) == tt.removed {
				t.Fatalf("%d release runs with the repository removed %v", runs, tt.removed)
			}
		})
	}
}
