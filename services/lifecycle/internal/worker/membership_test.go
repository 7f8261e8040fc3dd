package worker_test

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
	"github.com/boardreadyops/cloud/services/lifecycle/internal/handler"
	"github.com/boardreadyops/cloud/services/lifecycle/internal/worker"
)

// membershipEvent is an installation_repositories delivery of action for the test repository.
func membershipEvent(action string) eventdoc.Document {
	d := eventdoc.Document{Event: "installation_repositories", Action: action, InstallationID: installationID,
		Installation: &eventdoc.Installation{ID: installationID, AccountLogin: "octo-org", AccountType: "Organization"}}
	ref := []eventdoc.RepositoryRef{{ID: repoID, FullName: "octo-org/hello-world"}}
	if action == "added" {
		d.RepositoriesAdded = ref
	} else {
		d.RepositoriesRemoved = []eventdoc.RepositoryRef{ref[0], ref[0]} // GitHub does not repeat one; a repeat changes nothing
	}
	return d
}

// addedTo and removedFrom are installation_repositories deliveries of another installation.
func addedTo(installation int64, fullName string) eventdoc.Document {
	d := membershipEvent("added")
	d.InstallationID, d.Installation.ID = installation, installation
	d.RepositoriesAdded[0].FullName = fullName
	return d
}

func removedFrom(installation int64, fullName string) eventdoc.Document {
	d := membershipEvent("removed")
	d.InstallationID, d.Installation.ID = installation, installation
	d.RepositoriesRemoved = []eventdoc.RepositoryRef{{ID: repoID, FullName: fullName}}
	return d
}

// otherInstallation is the installation on the account the repository is transferred to.
const otherInstallation = 55502

func transferredTo(installation int64, fullName string) eventdoc.Document {
	return repoEvent("transferred", func(d *eventdoc.Document) {
		d.InstallationID, d.Repository.FullName = installation, fullName
		d.Repository.OwnerLogin, _, _ = strings.Cut(fullName, "/")
	})
}

func renamedTo(installation int64, fullName string) eventdoc.Document {
	return repoEvent("renamed", func(d *eventdoc.Document) { d.InstallationID, d.Repository.FullName = installation, fullName })
}

// repositoryState is whether the test repository is removed, its installation and its name.
type repositoryState struct {
	removed  bool
	owner    int64
	fullName string
}

func (b *bundle) repositoryState() repositoryState {
	b.t.Helper()
	var s repositoryState
	err := b.pool.QueryRow(b.ctx, `SELECT removed_at IS NOT NULL, installation_id, full_name FROM repositories WHERE id = $1`, repoID).
		Scan(&s.removed, &s.owner, &s.fullName)
	if errors.Is(err, pgx.ErrNoRows) {
		return repositoryState{removed: true}
	}
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

// deliverReversed delivers docs in order, and commits them in the reverse order: each earlier-received
// job waits while the later ones are received and committed (two lifecycle loops, or replicas,
// each claimed one).
func (b *bundle) deliverReversed(docs ...eventdoc.Document) {
	b.t.Helper()
	jobs := make([]int64, len(docs))
	for i, d := range docs {
		jobs[i] = b.deliver(d)
		b.exec(`UPDATE control_plane_jobs SET available_at = now() + interval '1 hour' WHERE id = $1`, jobs[i])
	}
	for i := len(jobs) - 1; i >= 0; i-- {
		b.exec(`UPDATE control_plane_jobs SET available_at = now() WHERE id = $1`, jobs[i])
		b.drain()
		if st := b.jobStatus(jobs[i]); st != "completed" {
			b.t.Fatalf("job %d %s", jobs[i], st)
		}
	}
}

// Deliveries that change a repository's membership or name, received in one order and committed in
// that order or the reverse: the repository is as the deliveries received in order leave it. Before
// migration 00078 the older overwrote the newer, and a repository removed and added back a moment
// later could stay removed, its release tags ignored.
func TestRepositoryMembershipAppliesInReceivedOrder(t *testing.T) {
	t.Parallel()
	present := func(owner int64, name string) repositoryState { return repositoryState{false, owner, name} }
	removed := func(owner int64, name string) repositoryState { return repositoryState{true, owner, name} }
	const here, away = "octo-org/hello-world", "new-owner/hello-world"
	absent := repositoryState{removed: true} // never recorded, or recorded removed
	tests := []struct {
		name string
		docs []eventdoc.Document // in the order received; committed in the reverse
		want repositoryState
		// unrecorded: the repository is not recorded before the deliveries.
		unrecorded bool
	}{
		{"removed, then added back", []eventdoc.Document{membershipEvent("removed"), membershipEvent("added")}, present(installationID, here), false},
		{"added, then removed", []eventdoc.Document{membershipEvent("added"), membershipEvent("removed")}, removed(installationID, here), false},
		{"added, then removed, first seen in them", []eventdoc.Document{membershipEvent("added"), membershipEvent("removed")},
			removed(installationID, here), true},
		{"removed from the installation, then transferred into it", []eventdoc.Document{membershipEvent("removed"), transferredTo(installationID, here)},
			present(installationID, here), false},
		{"transferred in, then deleted", []eventdoc.Document{transferredTo(installationID, here), repoEvent("deleted", nil)}, removed(installationID, here), false},
		{"deleted, then the installation re-created with it", []eventdoc.Document{repoEvent("deleted", nil),
			installationEvent("created", eventdoc.RepositoryRef{ID: repoID, FullName: here})}, present(installationID, here), false},
		{"added, then the installation deleted", []eventdoc.Document{membershipEvent("added"), installationEvent("deleted")}, removed(installationID, here), false},
		// The installation's own order ignores the older created; its repositories are ordered
		// apart, and recorded.
		{"the installation created with it, suspended, unsuspended", []eventdoc.Document{
			installationEvent("created", eventdoc.RepositoryRef{ID: repoID, FullName: here}), installationEvent("suspend"),
			installationEvent("unsuspend")}, present(installationID, here), true},
		{"the installation created with it, then deleted", []eventdoc.Document{
			installationEvent("created", eventdoc.RepositoryRef{ID: repoID, FullName: here}), installationEvent("deleted")},
			removed(installationID, here), false},
		{"the installation created with it, then deleted, first seen in them", []eventdoc.Document{
			installationEvent("created", eventdoc.RepositoryRef{ID: repoID, FullName: here}), installationEvent("deleted")},
			absent, true},
		// Names are ordered whoever owns the repository.
		{"renamed under the old installation, then transferred away", []eventdoc.Document{renamedTo(installationID, "octo-org/hello-old"),
			transferredTo(otherInstallation, away)}, present(otherInstallation, away), false},
		{"transferred away, then renamed by the new owner", []eventdoc.Document{transferredTo(otherInstallation, away),
			renamedTo(otherInstallation, "new-owner/hello-new")}, present(otherInstallation, "new-owner/hello-new"), false},
		// An installation's deletion takes every repository it got before, also one recorded later
		// from an older delivery, and none it got after.
		{"the installation created with it, deleted, created without it", []eventdoc.Document{
			installationEvent("created", eventdoc.RepositoryRef{ID: repoID, FullName: here}), installationEvent("deleted"),
			installationEvent("created")}, absent, true},
		{"a push, then the installation deleted, first seen in them", []eventdoc.Document{pushTag("v0.9.0", sha),
			installationEvent("deleted")}, absent, true},
		// A push (or another event) that records a repository first says nothing of the order of
		// membership changes: committed late, it does not outrank them.
		{"transferred away, then a late push from the old installation, first seen in them", []eventdoc.Document{
			transferredTo(otherInstallation, away), pushTag("v0.9.0", sha)}, present(otherInstallation, away), true},
		{"removed, then a late push, first seen in them", []eventdoc.Document{membershipEvent("removed"), pushTag("v0.9.0", sha)},
			absent, true},
		{"added, removed, then a late push, first seen in them", []eventdoc.Document{membershipEvent("added"), membershipEvent("removed"),
			pushTag("v0.9.0", sha)}, absent, true},
		// A transfer to another account's installation, then the old installation's removal: the
		// removal speaks only of the old installation, whichever commits first (00081).
		{"transferred away, then removed by the old installation", []eventdoc.Document{transferredTo(otherInstallation, away),
			membershipEvent("removed")}, present(otherInstallation, away), false},
		{"transferred away, removed by the new installation, then by the old", []eventdoc.Document{transferredTo(otherInstallation, away),
			removedFrom(otherInstallation, away), membershipEvent("removed")}, removed(otherInstallation, away), false},
		{"removed by the old installation, then added to the new", []eventdoc.Document{membershipEvent("removed"),
			addedTo(otherInstallation, away)}, present(otherInstallation, away), false},
		// Transferred away, back, then removed: the first transfer, committed last, is older than
		// the transfer back and does not bring the repository to the other installation.
		{"transferred away and back, then removed", []eventdoc.Document{transferredTo(otherInstallation, away),
			transferredTo(installationID, here), membershipEvent("removed")}, removed(installationID, here), false},
	}
	for _, tt := range tests {
		for _, order := range []string{"committed in reverse", "committed in order"} {
			t.Run(tt.name+", "+order, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				if tt.unrecorded {
					b.deliver(installationEvent("created"))
				} else {
					b.deliver(installationEvent("created", eventdoc.RepositoryRef{ID: repoID, FullName: here}))
				}
				b.drain()
				if order == "committed in order" {
					for _, d := range tt.docs {
						b.deliver(d)
						b.drain()
					}
				} else {
					b.deliverReversed(tt.docs...)
				}
				got := b.repositoryState()
				if tt.want == absent && got.removed {
					got = absent
				}
				if got != tt.want {
					t.Fatalf("repository %+v, want %+v: an older delivery overwrote a newer one", got, tt.want)
				}
				// A release tag is released only while the repository is present, by its installation.
				push := pushTag("v9.0.0", sha)
				push.InstallationID = cmp.Or(tt.want.owner, installationID)
				b.deliver(push)
				b.drain()
				if runs := b.count(`SELECT count(*) FROM release_runs WHERE ref = 'refs/tags/v9.0.0'`); (runs == 1) == tt.want.removed {
					t.Fatalf("%d release runs with the repository removed %v", runs, tt.want.removed)
				}
			})
		}
	}
}

// Membership changes of two installations over overlapping repositories, some recorded and some
// new, with transfers, renames and archivals, applied by six loops at once in batches of two: every writer locks the
// installation's row first, then the repositories in id order, new rows with the recorded ones,
// so none deadlocks (PostgreSQL counts deadlocks per database). Before, a removal inserted its new
// rows before it locked the recorded ones, and an addition of the same repositories deadlocked
// with it; and a transfer took a share lock on its installation, which a later event of the same
// batch upgraded, deadlocking with another batch doing the same.
func TestMembershipChangesDoNotDeadlock(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *worker.Config) { c.BatchSize = 2 })
	b.deliver(installationEvent("created", eventdoc.RepositoryRef{ID: 1, FullName: "octo-org/r1"}))
	b.drain()
	for i := range 100 {
		refs := []eventdoc.RepositoryRef{{ID: 1, FullName: "octo-org/r1"}, {ID: int64(100 + i), FullName: fmt.Sprintf("octo-org/r%d", 100+i)},
			{ID: int64(101 + i), FullName: fmt.Sprintf("octo-org/r%d", 101+i)}}
		for _, inst := range []int64{installationID, otherInstallation} {
			for _, action := range []string{"added", "removed"} {
				d := membershipEvent(action)
				d.InstallationID, d.Installation.ID = inst, inst
				d.RepositoriesAdded, d.RepositoriesRemoved = nil, nil
				if action == "added" {
					d.RepositoriesAdded = refs
				} else {
					d.RepositoriesRemoved = refs
				}
				b.deliver(d)
			}
			b.deliver(repoEvent("transferred", func(d *eventdoc.Document) {
				d.InstallationID = inst
				d.Repository.ID, d.Repository.FullName = int64(100+i), fmt.Sprintf("octo-org/r%d", 100+i)
			}))
			// Events that lock a repository without changing its membership.
			b.deliver(repoEvent(map[bool]string{true: "archived", false: "renamed"}[i%2 == 0], func(d *eventdoc.Document) {
				d.InstallationID = inst
				d.Repository.ID, d.Repository.FullName = int64(101+i), fmt.Sprintf("octo-org/r%d", 101+i)
			}))
		}
	}
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.worker.ProcessAvailable(b.ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	b.drain() // a job whose batch failed is back after its backoff: none should be
	if n := b.count(`SELECT count(*) FROM control_plane_jobs WHERE status <> 'completed'`); n != 0 {
		t.Errorf("%d jobs not completed", n)
	}
	// The statistics of a backend that hit a deadlock reach the database within a second of its
	// transaction's end.
	time.Sleep(1500 * time.Millisecond)
	if n := b.count(`SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`); n != 0 {
		t.Fatalf("%d deadlocks", n)
	}
}

// Prepare records a new repository a batch lists as the batch's last list of it leaves it, so
// that a push reading it before the batch commits sees what the batch will leave.
func TestPrepareRecordsWhatTheBatchLeaves(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		docs    []eventdoc.Document
		removed bool
	}{
		{[]eventdoc.Document{membershipEvent("removed"), membershipEvent("added")}, false},
		{[]eventdoc.Document{membershipEvent("added"), membershipEvent("removed")}, true},
		{[]eventdoc.Document{membershipEvent("removed"), installationEvent("created", eventdoc.RepositoryRef{ID: repoID, FullName: "octo-org/hello-world"})}, false},
	} {
		b := setup(t)
		if err := handler.Prepare(b.ctx, b.pool, tt.docs); err != nil {
			t.Fatal(err)
		}
		if n := b.count(`SELECT count(*) FROM repositories WHERE id = $1 AND (removed_at IS NOT NULL) = $2`, repoID, tt.removed); n != 1 {
			t.Errorf("%s then %s: the repository not recorded removed %v", tt.docs[0].Action, tt.docs[1].Action, tt.removed)
		}
	}
}
