package handler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// An installation's deletion lists the installation's repositories while it holds the
// installation's row, and a transfer into the installation received before it, committing
// meanwhile, waits for it: the transfer then sees the deletion, and the repository ends removed,
// as the two received in order leave it. Without the wait the transfer committed between the list
// and the deletion's commit, and the repository stayed present under the deleted installation.
func TestInstallationDeletionWaitsForNoGain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(ctx, `INSERT INTO installations (id, account_login, account_type) VALUES (1, 'a', 'Organization'), (2, 'b', 'Organization');
		INSERT INTO repositories (id, installation_id, full_name, membership_event_at) VALUES (10, 2, 'b/ten', now() - interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	transferAt := time.Now()
	deleteAt := transferAt.Add(time.Second)
	del, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = del.Rollback(ctx) }()
	if _, err := loseInstallationRepositories(ctx, del, 1, &deleteAt); err != nil {
		t.Fatal(err)
	}
	transferred := make(chan error, 1)
	go func() {
		tr, err := pool.Begin(ctx)
		if err != nil {
			transferred <- err
			return
		}
		defer func() { _ = tr.Rollback(ctx) }()
		if _, err := gainRepositories(ctx, tr, 1, []eventdoc.RepositoryRef{{ID: 10, FullName: "a/ten"}}, &transferAt); err != nil {
			transferred <- err
			return
		}
		transferred <- tr.Commit(ctx)
	}()
	select {
	case err := <-transferred:
		t.Fatalf("the transfer committed while the deletion was listing (%v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := del.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-transferred; err != nil {
		t.Fatal(err)
	}
	var removed bool
	var owner int64
	if err := pool.QueryRow(ctx, `SELECT removed_at IS NOT NULL, installation_id FROM repositories WHERE id = 10`).Scan(&removed, &owner); err != nil {
		t.Fatal(err)
	}
	if !removed || owner != 1 {
		t.Fatalf("repository removed %v under installation %d, want removed under 1: the deletion was received after the transfer", removed, owner)
	}
}

// Two batches whose jobs lock the same repositories in the other order, one through a membership
// change and one through an archival or a rename: LockMemberships takes both batches' repositories
// up front, in id order, so the second batch waits for the first at its start, instead of each
// holding one row the other's next job needs (a deadlock).
func TestLockMembershipsCoversEveryRepositoryEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(ctx, `INSERT INTO installations (id, account_login, account_type) VALUES (1, 'a', 'Organization');
		INSERT INTO repositories (id, installation_id, full_name) VALUES (10, 1, 'a/ten'), (20, 1, 'a/twenty')`); err != nil {
		t.Fatal(err)
	}
	inst := &eventdoc.Installation{ID: 1, AccountLogin: "a", AccountType: "Organization"}
	repo := func(action string, id int64) eventdoc.Document {
		return eventdoc.Document{Event: eventdoc.EventRepository, Action: action, InstallationID: 1,
			Repository: &eventdoc.Repository{ID: id, FullName: fmt.Sprintf("a/r%d", id)}}
	}
	first := []eventdoc.Document{repo("archived", 20), {Event: eventdoc.EventInstallationRepositories, Action: "removed",
		InstallationID: 1, Installation: inst, RepositoriesRemoved: []eventdoc.RepositoryRef{{ID: 10, FullName: "a/ten"}}}}
	second := []eventdoc.Document{repo("renamed", 10), repo("archived", 20)}

	x, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = x.Rollback(ctx) }()
	if err := LockMemberships(ctx, x, first); err != nil {
		t.Fatal(err)
	}
	locked := make(chan error, 1)
	go func() {
		y, err := pool.Begin(ctx)
		if err != nil {
			locked <- err
			return
		}
		defer func() { _ = y.Rollback(ctx) }()
		locked <- LockMemberships(ctx, y, second)
	}()
	select {
	case err := <-locked:
		t.Fatalf("the second batch took its locks while the first held repository 10 and 20 (%v): "+
			"its jobs would then lock them in the other order", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := x.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
}

// A repository transferred to another installation, or renamed, takes its release runs and their
// undelivered effects with it (migration 00088), as lifecycle's own login changes it: every run to
// the new installation; every effect available, dead-lettered or awaiting reconciliation to the new
// installation and name; a transfer replays the dead letters GitHub refused under the old
// installation from 15 minutes before the transfer on (it refuses the old installation before its
// event reaches lifecycle), not older ones nor one dead-lettered for another reason. A completed
// effect keeps what it was sent with, and a leased one is left to the dispatcher's refusal
// (boardreadyops_outbox_reject). Before, every effect went out under the old installation, which
// GitHub answers 404 once the repository is another account's.
func TestRunsFollowTheirRepository(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		change   func(ctx context.Context, tx pgx.Tx) error
		wantInst int64
		wantName string
		recent   string // the status of the dead letter of the last minutes
		oldGone  bool   // installation 1 was deleted before the change
	}{
		{"transferred", func(ctx context.Context, tx pgx.Tx) error {
			now := time.Now()
			_, err := gainRepositories(ctx, tx, 2, []eventdoc.RepositoryRef{{ID: 10, FullName: "b/ten"}}, &now)
			return err
		}, 2, "b/ten", "available", false},
		{"transferred from a deleted installation", func(ctx context.Context, tx pgx.Tx) error {
			now := time.Now()
			_, err := gainRepositories(ctx, tx, 2, []eventdoc.RepositoryRef{{ID: 10, FullName: "b/ten"}}, &now)
			return err
		}, 2, "b/ten", "dead_letter", true},
		{"renamed", func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `UPDATE repositories SET full_name = 'a/renamed' WHERE id = 10`)
			return err
		}, 1, "a/renamed", "dead_letter", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := pgtest.NewURL(t)
			super, err := pgxpool.New(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(super.Close)
			// v1 available, v2 refused under installation 1 a minute ago, v3 completed, v4 refused an
			// hour ago, v5 leased, v6 dead-lettered a minute ago for another reason, v7 refused ten
			// minutes ago, replayed by an operator and dead-lettered again a minute ago for another
			// reason; and another repository's run.
			if _, err := super.Exec(ctx, `INSERT INTO installations (id, account_login, account_type) VALUES (1, 'a', 'Organization'), (2, 'b', 'Organization');
				INSERT INTO repositories (id, installation_id, full_name, membership_event_at) VALUES (10, 1, 'a/ten', now() - interval '1 hour'), (20, 1, 'a/twenty', now() - interval '1 hour');
				SELECT boardreadyops_release_run_create(10, 1, 'refs/tags/v' || n, repeat('a', 40), 'release.yml', 'BoardReadyOps release') FROM generate_series(1, 7) n;
				SELECT boardreadyops_release_run_create(20, 1, 'refs/tags/v1', repeat('a', 40), 'release.yml', 'BoardReadyOps release');
				UPDATE control_plane_outbox o SET status = 'dead_letter', last_error = 'HTTP 404', updated_at = now() - interval '1 minute',
					result = jsonb_build_object('refused_under_installation', 1, 'refused_at', now() - interval '1 minute')
					FROM release_runs r WHERE r.id = o.release_run_id AND r.ref = 'refs/tags/v2' AND r.repository_id = 10;
				UPDATE control_plane_outbox o SET status = 'dead_letter', last_error = 'attempts exhausted', updated_at = now() - interval '1 minute',
					result = jsonb_build_object('refused_under_installation', 1, 'refused_at', now() - interval '10 minutes')
					FROM release_runs r WHERE r.id = o.release_run_id AND r.ref = 'refs/tags/v7' AND r.repository_id = 10;
				UPDATE control_plane_outbox o SET status = 'dead_letter', last_error = 'tag moved', updated_at = now() - interval '1 minute'
					FROM release_runs r WHERE r.id = o.release_run_id AND r.ref = 'refs/tags/v6' AND r.repository_id = 10;
				UPDATE control_plane_outbox o SET status = 'completed', completed_at = now() FROM release_runs r
					WHERE r.id = o.release_run_id AND r.ref = 'refs/tags/v3' AND r.repository_id = 10;
				UPDATE control_plane_outbox o SET status = 'dead_letter', last_error = 'HTTP 404', updated_at = now() - interval '1 hour',
					result = jsonb_build_object('refused_under_installation', 1, 'refused_at', now() - interval '1 hour') FROM release_runs r WHERE r.id = o.release_run_id AND r.ref = 'refs/tags/v4' AND r.repository_id = 10;
				UPDATE control_plane_outbox o SET status = 'leased', lease_owner = 'w', lease_expires_at = now() + interval '1 minute'
					FROM release_runs r WHERE r.id = o.release_run_id AND r.ref = 'refs/tags/v5' AND r.repository_id = 10`); err != nil {
				t.Fatal(err)
			}
			if tt.oldGone {
				// Its token is refused for that reason: its dead letters wait for an operator.
				if _, err := super.Exec(ctx, `UPDATE installations SET deleted_at = now() WHERE id = 1`); err != nil {
					t.Fatal(err)
				}
			}
			lifecycle := pgtest.NewLoginPool(t, url, "boardreadyops_lifecycle")
			tx, err := lifecycle.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if err := tt.change(ctx, tx); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			rows, err := super.Query(ctx, `SELECT r.repository_id || ' ' || r.ref || ': run ' || r.installation_id || ', ' || o.status || ' ' ||
					o.installation_id || ' ' || (o.payload ->> 'installation_id') || ' ' || (o.payload ->> 'repository_full_name')
				FROM release_runs r JOIN control_plane_outbox o ON o.release_run_id = r.id ORDER BY 1`)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			want := []string{
				fmt.Sprintf("10 refs/tags/v1: run %d, available %[1]d %[1]d %s", tt.wantInst, tt.wantName),
				fmt.Sprintf("10 refs/tags/v2: run %[1]d, %[2]s %[1]d %[1]d %[3]s", tt.wantInst, tt.recent, tt.wantName),
				fmt.Sprintf("10 refs/tags/v3: run %d, completed 1 1 a/ten", tt.wantInst),
				fmt.Sprintf("10 refs/tags/v4: run %d, dead_letter %[1]d %[1]d %s", tt.wantInst, tt.wantName),
				fmt.Sprintf("10 refs/tags/v5: run %d, leased 1 1 a/ten", tt.wantInst),
				fmt.Sprintf("10 refs/tags/v6: run %d, dead_letter %[1]d %[1]d %s", tt.wantInst, tt.wantName),
				fmt.Sprintf("10 refs/tags/v7: run %d, dead_letter %[1]d %[1]d %s", tt.wantInst, tt.wantName),
				"20 refs/tags/v1: run 1, available 1 1 a/twenty",
			}
			if !slices.Equal(got, want) {
				t.Fatalf("runs and effects:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			var replays int
			if err := super.QueryRow(ctx, `SELECT count(*) FROM control_plane_audit WHERE action = 'outbox.replay' AND operator = 'boardreadyops'`).Scan(&replays); err != nil {
				t.Fatal(err)
			}
			if want := map[string]int{"available": 1, "dead_letter": 0}[tt.recent]; replays != want {
				t.Fatalf("%d replays audited, want %d", replays, want)
			}
		})
	}
}
