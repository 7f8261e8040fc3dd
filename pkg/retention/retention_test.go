package retention_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/retention"
	"github.com/boardreadyops/cloud/pkg/sqlstate"
)

// probe is one row a case built and whether retention must delete it.
type probe struct {
	table, idColumn string
	id              any
	deleted         bool
}

const (
	create   = "github.check_run.create"
	dispatch = "github.workflow.dispatch"
	complete = "github.check_run.complete"
)

// expiryCase builds rows and says which of them a sweep at periods must delete.
type expiryCase struct {
	name    string
	periods retention.Periods
	build   func(r *rows) []probe
}

var defaults = retention.Periods{Jobs: 7 * day, Digests: 30 * day, Effects: 7 * day, ReleaseRuns: 90 * day}

// TestDeletesExactlyWhatIsExpired builds every table in every state, on both sides of its
// period, and checks that a sweep with the default periods (audit: never, then a year) deletes
// exactly the terminal rows past their period and nothing else.
func TestDeletesExactlyWhatIsExpired(t *testing.T) {
	t.Parallel()
	old, recent := 8*day, 6*day
	tests := []expiryCase{
		{"completed job past its period goes with its inbox row", defaults, func(r *rows) []probe {
			id := r.job("completed", old)
			return []probe{{"webhook_inbox", "id", id, true}, {"control_plane_jobs", "inbox_id", id, true}}
		}},
		{"completed job within its period stays", defaults, func(r *rows) []probe {
			return []probe{{"control_plane_jobs", "inbox_id", r.job("completed", recent), false}}
		}},
		{"dead-letter job stays", defaults, func(r *rows) []probe {
			id := r.job("dead_letter", 400*day)
			return []probe{{"control_plane_jobs", "inbox_id", id, false}, {"webhook_inbox", "id", id, false}}
		}},
		{"available job stays", defaults, func(r *rows) []probe {
			return []probe{{"control_plane_jobs", "inbox_id", r.job("available", 400*day), false}}
		}},
		{"leased job stays", defaults, func(r *rows) []probe {
			return []probe{{"control_plane_jobs", "inbox_id", r.job("leased", 400*day), false}}
		}},
		{"digest past its period whose delivery left the inbox goes", defaults, func(r *rows) []probe {
			return []probe{{"webhook_body_digests", "delivery_id", r.digest(31 * day), true}}
		}},
		{"digest within its period stays", defaults, func(r *rows) []probe {
			return []probe{{"webhook_body_digests", "delivery_id", r.digest(29 * day), false}}
		}},
		{"digest of a delivery still in the inbox stays whatever its age", defaults, func(r *rows) []probe {
			id := r.job("dead_letter", 400*day)
			return []probe{{"webhook_body_digests", "delivery_id", r.digestOf(id, 400*day), false}, {"webhook_inbox", "id", id, false}}
		}},
		{"digest of a delivery whose job is within its period stays", defaults, func(r *rows) []probe {
			// received 31 days ago, its job completed (after retries) 6 days ago: the inbox keeps it.
			id := r.job("completed", recent)
			return []probe{{"webhook_body_digests", "delivery_id", r.digestOf(id, 31*day), false}, {"webhook_inbox", "id", id, false}}
		}},
		{"digest goes in the pass that takes its delivery out of the inbox", defaults, func(r *rows) []probe {
			id := r.job("completed", 31*day)
			return []probe{{"webhook_body_digests", "delivery_id", r.digestOf(id, 31*day), true}, {"webhook_inbox", "id", id, true}}
		}},
		{"digest of a swept delivery within its period stays", defaults, func(r *rows) []probe {
			id := r.job("completed", old)
			return []probe{{"webhook_body_digests", "delivery_id", r.digestOf(id, old), false}, {"webhook_inbox", "id", id, true}}
		}},
		{"digests stay when their period is never", retention.Periods{Jobs: 7 * day}, func(r *rows) []probe {
			return []probe{{"webhook_body_digests", "delivery_id", r.digest(4000 * day), false}}
		}},
		{"completed effect of a finished run past its period goes", defaults, func(r *rows) []probe {
			run, att := r.run("succeeded", 10*day)
			return []probe{{"control_plane_outbox", "id", r.effect(run, att, dispatch, "completed", old), true},
				{"release_runs", "id", run, false}, {"execution_attempts", "id", att, false}}
		}},
		{"completed effect within its period stays", defaults, func(r *rows) []probe {
			run, att := r.run("failed", 10*day)
			return []probe{{"control_plane_outbox", "id", r.effect(run, att, dispatch, "completed", recent), false}}
		}},
		{"completed effect of a running release stays", defaults, func(r *rows) []probe {
			run, att := r.run("running", 0)
			return []probe{{"control_plane_outbox", "id", r.effect(run, att, create, "completed", 400*day), false}}
		}},
		{"available and leased effects stay", defaults, func(r *rows) []probe {
			run, att := r.run("dispatching", 0)
			return []probe{{"control_plane_outbox", "id", r.effect(run, att, create, "available", 400*day), false},
				{"control_plane_outbox", "id", r.effect(run, att, dispatch, "leased", 400*day), false}}
		}},
		{"finished run past its period goes with its attempts, workflow run and effects", defaults, func(r *rows) []probe {
			run, att := r.run("cancelled", 91*day)
			a := r.effect(run, att, create, "completed", 91*day)
			b := r.effect(run, att, dispatch, "completed", 3*day) // newer than its own period: goes with the run
			return []probe{{"release_runs", "id", run, true}, {"execution_attempts", "id", att, true},
				{"execution_attempt_workflow_runs", "execution_attempt_id", r.workflowRun(att), true},
				{"control_plane_outbox", "id", a, true}, {"control_plane_outbox", "id", b, true}}
		}},
		{"finished run within its period stays", defaults, func(r *rows) []probe {
			run, att := r.run("succeeded", 89*day)
			return []probe{{"release_runs", "id", run, false}, {"execution_attempts", "id", att, false},
				{"execution_attempt_workflow_runs", "execution_attempt_id", r.workflowRun(att), false}}
		}},
		{"running run stays whatever its age", defaults, func(r *rows) []probe {
			run, att := r.run("running", 400*day)
			return []probe{{"release_runs", "id", run, false}, {"execution_attempts", "id", att, false}}
		}},
		{"finished run with a dead-letter effect stays, with everything it refers to", defaults, func(r *rows) []probe {
			run, att := r.run("failed", 400*day)
			done := r.effect(run, att, create, "completed", 400*day)
			return []probe{{"release_runs", "id", run, false}, {"execution_attempts", "id", att, false},
				{"control_plane_outbox", "id", r.effect(run, att, dispatch, "dead_letter", 400*day), false},
				// its completed effect is past the effect period and the run is finished: it goes.
				{"control_plane_outbox", "id", done, true}}
		}},
		{"finished run with a reconciliation_required effect stays", defaults, func(r *rows) []probe {
			run, att := r.run("failed", 400*day)
			return []probe{{"release_runs", "id", run, false}, {"execution_attempts", "id", att, false},
				{"control_plane_outbox", "id", r.effect(run, att, dispatch, "reconciliation_required", 400*day), false}}
		}},
		{"audit rows stay by default", defaults, func(r *rows) []probe {
			return []probe{{"control_plane_audit", "id", r.audit(4000 * day), false}}
		}},
		{"audit rows past a configured period go", retention.Periods{Audit: 365 * day}, func(r *rows) []probe {
			return []probe{{"control_plane_audit", "id", r.audit(366 * day), true}, {"control_plane_audit", "id", r.audit(364 * day), false}}
		}},
		{"a completed effect superseding another goes, the other keeps a NULL superseded_by", defaults, func(r *rows) []probe {
			run, att := r.run("succeeded", 10*day)
			oldEffect := r.effect(run, att, complete, "completed", old)
			newEffect := r.effect(run, att, dispatch, "completed", old)
			r.exec(`UPDATE control_plane_outbox SET superseded_by = $1 WHERE id = $2`, newEffect, oldEffect)
			return []probe{{"control_plane_outbox", "id", newEffect, true}, {"control_plane_outbox", "id", oldEffect, true}}
		}},
	}
	// Every state a run can be in before it finishes keeps the run and all it refers to, however
	// long ago it was created, and its completed effects however old (the row rules give an
	// unfinished run no completed_at, so these cases pin the outcome, while the effects' check
	// of the run's state is what the outbox probe exercises). A finished run keeps them while one
	// of its effects is still open (a check run's update not yet delivered), though its own
	// completed effects past their period go.
	for _, status := range []string{"requested", "check_pending", "dispatching", "running", "blocked"} {
		tests = append(tests, expiryCase{status + " run stays whatever its age, with its attempt, workflow run and completed effects", defaults, func(r *rows) []probe {
			run, att := r.run(status, 0)
			r.exec(`UPDATE release_runs SET created_at = $2, updated_at = $2 WHERE id = $1`, run, now.Add(-400*day))
			return []probe{{"release_runs", "id", run, false}, {"execution_attempts", "id", att, false},
				{"execution_attempt_workflow_runs", "execution_attempt_id", r.workflowRun(att), false},
				{"control_plane_outbox", "id", r.effect(run, att, create, "completed", 400*day), false}}
		}})
	}
	for _, open := range []string{"available", "leased"} {
		tests = append(tests, expiryCase{"finished run with an open (" + open + ") effect stays, with everything it refers to", defaults, func(r *rows) []probe {
			run, att := r.run("succeeded", 400*day)
			done := r.effect(run, att, create, "completed", 400*day)
			return []probe{{"release_runs", "id", run, false}, {"execution_attempts", "id", att, false},
				{"execution_attempt_workflow_runs", "execution_attempt_id", r.workflowRun(att), false},
				{"control_plane_outbox", "id", r.effect(run, att, complete, open, 400*day), false},
				{"control_plane_outbox", "id", done, true}}
		}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, s := newRows(t)
			probes := tt.build(r)
			// Noise in every other state, so that "nothing else" is tested against a full table.
			noise := r.digestOf(r.job("dead_letter", 400*day), 400*day)
			recentDigest := r.digest(day)
			nr, na := r.run("running", 400*day)
			r.effect(nr, na, create, "completed", 400*day)
			sweep(t, r, s, tt.periods)
			for _, p := range probes {
				if gone := !r.exists(p.table, p.idColumn, p.id); gone != p.deleted {
					t.Errorf("%s %v: deleted %v, want %v", p.table, p.id, gone, p.deleted)
				}
			}
			var running int
			r.scan(&running, `SELECT count(*) FROM control_plane_outbox WHERE release_run_id = $1`, nr)
			if running != 1 {
				t.Errorf("the running run's completed effect was deleted")
			}
			if !r.exists("webhook_body_digests", "delivery_id", noise) || !r.exists("webhook_body_digests", "delivery_id", recentDigest) {
				t.Errorf("the dead letter's or the recent digest was deleted")
			}
		})
	}
}

// TestDeadLettersSurviveAnyRetention: with every period at its minimum (one second; a year for
// audit rows) and the rows eleven years old, dead letters, reconciliation_required effects and their runs are still there.
func TestDeadLettersSurviveAnyRetention(t *testing.T) {
	t.Parallel()
	r, s := newRows(t)
	job := r.job("dead_letter", 4000*day)
	run, att := r.run("failed", 4000*day)
	dead := r.effect(run, att, create, "dead_letter", 4000*day)
	run2, att2 := r.run("succeeded", 4000*day)
	recon := r.effect(run2, att2, dispatch, "reconciliation_required", 4000*day)
	digest := r.digestOf(job, 4000*day)
	got := sweep(t, r, s, retention.Periods{Jobs: time.Second, Digests: time.Second, Effects: time.Second, ReleaseRuns: time.Second, Audit: retention.MinAudit})
	for table, n := range got {
		if n != 0 {
			t.Errorf("deleted %d %s rows, want none", n, table)
		}
	}
	for _, p := range []probe{{"control_plane_jobs", "inbox_id", job, false}, {"webhook_inbox", "id", job, false},
		{"control_plane_outbox", "id", dead, false}, {"control_plane_outbox", "id", recon, false},
		{"release_runs", "id", run, false}, {"release_runs", "id", run2, false},
		{"execution_attempts", "id", att, false}, {"execution_attempts", "id", att2, false},
		{"webhook_body_digests", "delivery_id", digest, false}} {
		if !r.exists(p.table, p.idColumn, p.id) {
			t.Errorf("%s %v was deleted", p.table, p.id)
		}
	}
}

func TestStatusReportsWhatWouldGo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, s := newRows(t)
	r.job("completed", 10*day)
	r.job("completed", 9*day)
	r.job("completed", day)
	run, att := r.run("succeeded", 100*day)
	r.effect(run, att, create, "completed", 100*day)
	r.digest(40 * day)
	r.digest(31 * day)
	r.digest(29 * day)
	r.digestOf(r.job("dead_letter", 50*day), 50*day) // past the period, but its delivery is in the inbox
	st, err := s.Status(ctx, r.pool, defaults, true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		expired int64
		oldest  time.Duration
		never   bool
	}{
		retention.TableJobs: {2, 10 * day, false}, retention.TableDigests: {2, 40 * day, false}, retention.TableEffects: {1, 100 * day, false},
		retention.TableReleaseRuns: {1, 100 * day, false}, retention.TableAudit: {0, 0, true},
	}
	if len(st) != len(want) {
		t.Fatalf("status has %d rows: %+v", len(st), st)
	}
	for i, got := range st {
		if got.Table != retention.Tables[i] {
			t.Errorf("status row %d is %s, want %s (Tables order)", i, got.Table, retention.Tables[i])
		}
		if got.Table == retention.TableDigests && (got.OldestAt == nil || !got.OldestAt.Equal(now.Add(-50*day))) {
			t.Errorf("digests: oldest %v, want the dead letter's, 50 days ago (the oldest digest at all)", got.OldestAt)
		}
		w := want[got.Table]
		if w.never {
			if got.Retention != nil || got.Expired != nil || got.OldestExpiredAt != nil {
				t.Errorf("%s: %+v, want never", got.Table, got)
			}
			continue
		}
		if got.Expired == nil || *got.Expired != w.expired || got.OldestExpiredAt == nil || !got.OldestExpiredAt.Equal(now.Add(-w.oldest)) {
			t.Errorf("%s: %+v, want %d expired, oldest %v ago", got.Table, got, w.expired, w.oldest)
		}
	}
}

func TestDeleteNeedsTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, s := newRows(t)
	r.job("completed", 10*day)
	if _, err := s.Delete(ctx, r.pool, retention.TableJobs, "nobody", 7*day, 10); !errors.Is(err, sqlstate.ErrLeaseNotHeld) {
		t.Fatalf("delete without the lease: %v, want ErrLeaseNotHeld", err)
	}
	if l, err := s.Acquire(ctx, r.pool, "a", time.Minute); err != nil || !l.Acquired {
		t.Fatalf("a: %+v %v", l, err)
	}
	if l, err := s.Acquire(ctx, r.pool, "b", time.Minute); err != nil || l.Acquired || l.Holder != "a" {
		t.Fatalf("b while a holds it: %+v %v, want refused naming a", l, err)
	}
	if _, err := s.Delete(ctx, r.pool, retention.TableJobs, "b", 7*day, 10); !errors.Is(err, sqlstate.ErrLeaseNotHeld) {
		t.Fatalf("b deletes while a holds the lease: %v", err)
	}
	// a's lease expires (the clock moves past it): b takes over and a may no longer delete.
	later := &retention.Store{Clock: func() time.Time { return now.Add(2 * time.Minute) }}
	if l, err := later.Acquire(ctx, r.pool, "b", time.Minute); err != nil || !l.Acquired {
		t.Fatalf("b after a's lease expired: %+v %v", l, err)
	}
	if _, err := later.Delete(ctx, r.pool, retention.TableJobs, "a", 7*day, 10); !errors.Is(err, sqlstate.ErrLeaseNotHeld) {
		t.Fatalf("a deletes after losing the lease: %v", err)
	}
	if n, err := later.Delete(ctx, r.pool, retention.TableJobs, "b", 7*day, 10); err != nil || n != 1 {
		t.Fatalf("b deletes: %d %v", n, err)
	}
}

// TestAuditKeepsAYear: whoever holds the lease (a lifecycle or admin login may call the function),
// audit rows younger than 365 days cannot be deleted, and no other statement deletes any.
func TestAuditKeepsAYear(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, s := newRows(t)
	id := r.audit(400 * day)
	if _, err := s.Acquire(ctx, r.pool, "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, r.pool, retention.TableAudit, "a", 364*day, 10); !errors.Is(err, sqlstate.ErrInvalidArgument) {
		t.Fatalf("audit period of 364 days: %v, want ErrInvalidArgument", err)
	}
	// The setting the function uses does not open the table to anyone else.
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT set_config('boardreadyops.audit_retention', 'on', true)`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM control_plane_audit`); err == nil {
		t.Fatal("a DELETE outside the retention function went through")
	}
	_ = tx.Rollback(ctx)
	if n, err := s.Delete(ctx, r.pool, retention.TableAudit, "a", 365*day, 10); err != nil || n != 1 || r.exists("control_plane_audit", "id", id) {
		t.Fatalf("audit period of 365 days: deleted %d, %v", n, err)
	}
}

// The previous release's binaries call boardreadyops_retention_status with six arguments (no
// digests period): the call still resolves, and reports the digests as never deleted.
func TestStatusKeepsThePreviousReleasesCall(t *testing.T) {
	t.Parallel()
	r, _ := newRows(t)
	r.digest(400 * day)
	rows, err := r.pool.Query(context.Background(), `SELECT table_name, retention, expired, oldest_expired_at, oldest_at
		FROM boardreadyops_retention_status($1, $2, $3, $4, $5, $6)`, 7*day, 7*day, 90*day, nil, true, now)
	if err != nil {
		t.Fatal(err)
	}
	st, err := pgx.CollectRows(rows, pgx.RowToStructByName[retention.TableStatus])
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range st {
		if got.Table == retention.TableDigests {
			if got.Retention != nil || got.Expired != nil || got.OldestExpiredAt != nil || got.OldestAt == nil {
				t.Errorf("digests through the six-argument call: %+v, want never, with the oldest digest", got)
			}
			return
		}
	}
	t.Errorf("no digests row in %+v", st)
}

// Overdue is the time since the oldest expired row crossed its period, never its own age.
func TestTableStatusOverdue(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	week := 7 * 24 * time.Hour
	at := func(d time.Duration) *time.Time { v := now.Add(-d); return &v }
	tests := []struct {
		name string
		st   retention.TableStatus
		want time.Duration
	}{
		{"nothing expired", retention.TableStatus{Retention: &week}, 0},
		{"kept forever", retention.TableStatus{OldestExpiredAt: at(8 * 24 * time.Hour)}, 0},
		{"a day past a week", retention.TableStatus{Retention: &week, OldestExpiredAt: at(8 * 24 * time.Hour)}, 24 * time.Hour},
		{"just expired", retention.TableStatus{Retention: &week, OldestExpiredAt: at(week + time.Minute)}, time.Minute},
		{"clock behind the database", retention.TableStatus{Retention: &week, OldestExpiredAt: at(week - time.Minute)}, 0},
	}
	for _, tt := range tests {
		if got := tt.st.Overdue(now); got != tt.want {
			t.Errorf("%s: overdue %v, want %v", tt.name, got, tt.want)
		}
	}
}
