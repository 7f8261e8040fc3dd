package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/jobs"
	"github.com/boardreadyops/cloud/pkg/sqlstate"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type bundle struct {
	pool  *pgxpool.Pool
	now   atomic.Pointer[time.Time]
	store *jobs.Store
	seq   atomic.Int64
}

func setup(t *testing.T) (context.Context, *bundle) {
	t.Helper()
	b := &bundle{pool: pgtest.NewPool(t)}
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b.now.Store(&start)
	b.store = &jobs.Store{Clock: func() time.Time { return *b.now.Load() }}
	return context.Background(), b
}

func (b *bundle) advance(d time.Duration) { t := b.now.Load().Add(d); b.now.Store(&t) }

// insertJob inserts an inbox row and its job, as ingest does.
func insertJob(t *testing.T, ctx context.Context, b *bundle, maxAttempts int) int64 {
	t.Helper()
	var id int64
	err := b.pool.QueryRow(ctx, `
		WITH i AS (
			INSERT INTO webhook_inbox (delivery_id, event, action, payload, payload_sha256)
			VALUES ($1, 'push', NULL, '{}', sha256('x'::bytea)) RETURNING id
		)
		INSERT INTO control_plane_jobs (kind, inbox_id, max_attempts, available_at)
		SELECT 'push', i.id, $2, $3 FROM i RETURNING id`,
		fmt.Sprintf("delivery-%d", b.seq.Add(1)), maxAttempts, *b.now.Load()).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func claimOne(t *testing.T, ctx context.Context, b *bundle, worker string, id int64) {
	t.Helper()
	got, err := b.store.Claim(ctx, b.pool, worker, 10, time.Minute)
	if err != nil || len(got) != 1 || got[0].ID != id {
		t.Fatalf("claim by %s: %+v %v, want only job %d", worker, got, err, id)
	}
}

func wantStatus(t *testing.T, ctx context.Context, b *bundle, id int64, status string) jobs.Job {
	t.Helper()
	j, err := jobs.Get(ctx, b.pool, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != status {
		t.Fatalf("job %d status %s, want %s", id, j.Status, status)
	}
	return j
}

func TestTransitions(t *testing.T) {
	t.Parallel()
	available := func(t *testing.T, ctx context.Context, b *bundle) int64 { return insertJob(t, ctx, b, 5) }
	leased := func(t *testing.T, ctx context.Context, b *bundle) int64 {
		id := available(t, ctx, b)
		claimOne(t, ctx, b, "w1", id)
		return id
	}
	completed := func(t *testing.T, ctx context.Context, b *bundle) int64 {
		id := leased(t, ctx, b)
		if err := b.store.Complete(ctx, b.pool, id, "w1"); err != nil {
			t.Fatal(err)
		}
		return id
	}
	dead := func(t *testing.T, ctx context.Context, b *bundle) int64 {
		id := leased(t, ctx, b)
		if err := b.store.DeadLetter(ctx, b.pool, id, "w1", "poison"); err != nil {
			t.Fatal(err)
		}
		return id
	}
	complete := func(ctx context.Context, b *bundle, id int64) error { return b.store.Complete(ctx, b.pool, id, "w1") }
	completeOther := func(ctx context.Context, b *bundle, id int64) error { return b.store.Complete(ctx, b.pool, id, "w2") }
	retry := func(ctx context.Context, b *bundle, id int64) error {
		_, err := b.store.Retry(ctx, b.pool, id, "w1", "handler failed", *b.now.Load())
		return err
	}
	deadLetter := func(ctx context.Context, b *bundle, id int64) error {
		return b.store.DeadLetter(ctx, b.pool, id, "w1", "bad")
	}
	release := func(ctx context.Context, b *bundle, id int64) error { return b.store.Release(ctx, b.pool, id, "w1") }
	replay := func(ctx context.Context, b *bundle, id int64) error {
		_, err := b.store.Replay(ctx, b.pool, id, "alice", "handler fixed")
		return err
	}

	tests := []struct {
		name    string
		from    func(*testing.T, context.Context, *bundle) int64
		op      func(context.Context, *bundle, int64) error
		wantErr error
		want    string
	}{
		{"available/complete", available, complete, sqlstate.ErrLeaseNotHeld, jobs.StatusAvailable},
		{"available/retry", available, retry, sqlstate.ErrLeaseNotHeld, jobs.StatusAvailable},
		{"available/release", available, release, sqlstate.ErrLeaseNotHeld, jobs.StatusAvailable},
		{"available/replay", available, replay, sqlstate.ErrIllegalState, jobs.StatusAvailable},
		{"leased/complete", leased, complete, nil, jobs.StatusCompleted},
		{"leased/complete other worker", leased, completeOther, sqlstate.ErrLeaseNotHeld, jobs.StatusLeased},
		{"leased/retry", leased, retry, nil, jobs.StatusAvailable},
		{"leased/dead-letter", leased, deadLetter, nil, jobs.StatusDeadLetter},
		{"leased/release", leased, release, nil, jobs.StatusAvailable},
		{"leased/replay", leased, replay, sqlstate.ErrIllegalState, jobs.StatusLeased},
		{"completed/complete", completed, complete, sqlstate.ErrLeaseNotHeld, jobs.StatusCompleted},
		{"completed/retry", completed, retry, sqlstate.ErrLeaseNotHeld, jobs.StatusCompleted},
		{"completed/replay", completed, replay, sqlstate.ErrIllegalState, jobs.StatusCompleted},
		{"dead-letter/complete", dead, complete, sqlstate.ErrLeaseNotHeld, jobs.StatusDeadLetter},
		{"dead-letter/replay", dead, replay, nil, jobs.StatusAvailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, b := setup(t)
			id := tt.from(t, ctx, b)
			err := tt.op(ctx, b, id)
			if (tt.wantErr == nil && err != nil) || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			wantStatus(t, ctx, b, id, tt.want)
		})
	}
}

func TestStaleWorkerAndRecovery(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	id := insertJob(t, ctx, b, 5)
	claimOne(t, ctx, b, "w-old", id)
	b.advance(59 * time.Second)
	if rec, _ := b.store.RecoverLeases(ctx, b.pool, 10); len(rec) != 0 {
		t.Fatalf("recovered a live lease: %+v", rec)
	}
	b.advance(2 * time.Second)
	rec, err := b.store.RecoverLeases(ctx, b.pool, 10)
	if err != nil || len(rec) != 1 || rec[0].Status != jobs.StatusAvailable || rec[0].PreviousOwner != "w-old" || rec[0].Kind != "push" {
		t.Fatalf("recover: %+v %v", rec, err)
	}
	claimOne(t, ctx, b, "w-new", id)
	if err := b.store.Complete(ctx, b.pool, id, "w-old"); !errors.Is(err, sqlstate.ErrLeaseNotHeld) {
		t.Fatalf("stale completion: %v", err)
	}
	if err := b.store.Complete(ctx, b.pool, id, "w-new"); err != nil {
		t.Fatal(err)
	}
}

func TestAttemptsExhausted(t *testing.T) {
	t.Parallel()
	t.Run("by retries", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		id := insertJob(t, ctx, b, 2)
		for i, want := range []string{jobs.StatusAvailable, jobs.StatusDeadLetter} {
			claimOne(t, ctx, b, "w1", id)
			got, err := b.store.Retry(ctx, b.pool, id, "w1", "handler panicked", *b.now.Load())
			if err != nil || got != want {
				t.Fatalf("retry %d: %s %v, want %s", i, got, err, want)
			}
		}
		j := wantStatus(t, ctx, b, id, jobs.StatusDeadLetter)
		if j.LastError == nil || !strings.Contains(*j.LastError, "attempts exhausted (2 of 2): handler panicked") {
			t.Fatalf("last error %v", j.LastError)
		}
	})
	t.Run("by lease expiry", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		id := insertJob(t, ctx, b, 1)
		claimOne(t, ctx, b, "w1", id)
		b.advance(2 * time.Minute)
		if _, err := b.store.RecoverLeases(ctx, b.pool, 10); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, ctx, b, id, jobs.StatusDeadLetter)
	})
}

func TestReplayAudited(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	id := insertJob(t, ctx, b, 5)
	claimOne(t, ctx, b, "w1", id)
	if err := b.store.DeadLetter(ctx, b.pool, id, "w1", "unknown action"); err != nil {
		t.Fatal(err)
	}
	j, err := b.store.Replay(ctx, b.pool, id, "bob", "handler deployed")
	if err != nil || j.Status != jobs.StatusAvailable || j.Attempts != 0 {
		t.Fatalf("replay: %+v %v", j, err)
	}
	var action, operator string
	if err := b.pool.QueryRow(ctx, `SELECT action, operator FROM control_plane_audit WHERE subject_type = 'job' AND subject_id = $1`, id).Scan(&action, &operator); err != nil {
		t.Fatal(err)
	}
	if action != "job.replay" || operator != "bob" {
		t.Fatalf("audit %s by %s", action, operator)
	}
}

func TestStats(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	leased := insertJob(t, ctx, b, 5)
	claimOne(t, ctx, b, "w1", leased)
	dead := insertJob(t, ctx, b, 5)
	claimOne(t, ctx, b, "w1", dead)
	if err := b.store.DeadLetter(ctx, b.pool, dead, "w1", "x"); err != nil {
		t.Fatal(err)
	}
	insertJob(t, ctx, b, 5)
	b.advance(10 * time.Second)
	st, err := b.store.Stats(ctx, b.pool)
	if err != nil {
		t.Fatal(err)
	}
	want := jobs.Stats{Available: 1, Due: 1, Leased: 1, DeadLetter: 1, OldestAvailableAgeSeconds: 10}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
}

func TestRetentionSweep(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	for i := 0; i < 5; i++ {
		id := insertJob(t, ctx, b, 5)
		claimOne(t, ctx, b, "w1", id)
		if err := b.store.Complete(ctx, b.pool, id, "w1"); err != nil {
			t.Fatal(err)
		}
	}
	pending := insertJob(t, ctx, b, 5)
	sweep := func(older string, batch int) (int64, int64) {
		var o, j int64
		if err := b.pool.QueryRow(ctx, `SELECT * FROM boardreadyops_retention_sweep($1::interval, $2, $3)`,
			older, batch, *b.now.Load()).Scan(&o, &j); err != nil {
			t.Fatal(err)
		}
		return o, j
	}
	if _, j := sweep("7 days", 100); j != 0 {
		t.Fatalf("swept %d fresh jobs", j)
	}
	b.advance(8 * 24 * time.Hour)
	if _, j := sweep("7 days", 3); j != 3 {
		t.Fatalf("first batch swept %d, want 3 (bounded)", j)
	}
	if _, j := sweep("7 days", 3); j != 2 {
		t.Fatalf("second batch swept %d, want 2", j)
	}
	wantStatus(t, ctx, b, pending, jobs.StatusAvailable)
	var inbox int
	_ = b.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox`).Scan(&inbox)
	if inbox != 1 {
		t.Fatalf("%d inbox rows left, want only the pending job's", inbox)
	}
	var err error
	_, err = b.pool.Exec(ctx, `SELECT boardreadyops_retention_sweep('1 hour', 10)`)
	if !errors.Is(sqlstate.Classify(err), sqlstate.ErrInvalidArgument) {
		t.Fatalf("retention shorter than a day: %v", err)
	}
}

func TestConcurrentClaimers(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	const n = 2000
	if _, err := b.pool.Exec(ctx, `
		WITH i AS (
			INSERT INTO webhook_inbox (delivery_id, event, payload, payload_sha256)
			SELECT 'bulk-' || g, 'push', '{}', sha256('x'::bytea) FROM generate_series(1, $1) g RETURNING id
		)
		INSERT INTO control_plane_jobs (kind, inbox_id) SELECT 'push', id FROM i`, n); err != nil {
		t.Fatal(err)
	}
	store := &jobs.Store{}
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	var dup atomic.Int64
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(worker string) {
			defer wg.Done()
			for {
				batch, err := store.Claim(ctx, b.pool, worker, 25, time.Minute)
				if err != nil || len(batch) == 0 {
					return
				}
				mu.Lock()
				for _, j := range batch {
					if seen[j.ID] {
						dup.Add(1)
					}
					seen[j.ID] = true
				}
				mu.Unlock()
			}
		}(fmt.Sprintf("w%d", w))
	}
	wg.Wait()
	if len(seen) != n || dup.Load() != 0 {
		t.Fatalf("claimed %d distinct jobs with %d duplicates, want %d and 0", len(seen), dup.Load(), n)
	}
}

func TestDeferDoesNotSpendAttempts(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	id := insertJob(t, ctx, b, 2)
	for i := 0; i < 5; i++ { // more deferrals than max_attempts
		claimOne(t, ctx, b, "w1", id)
		if err := b.store.Defer(ctx, b.pool, id, "w1", b.now.Load().Add(time.Minute), "waiting for dispatch"); err != nil {
			t.Fatal(err)
		}
		if early, _ := b.store.Claim(ctx, b.pool, "w1", 10, time.Minute); len(early) != 0 {
			t.Fatal("claimed before the defer time")
		}
		b.advance(time.Minute)
	}
	if j := wantStatus(t, ctx, b, id, jobs.StatusAvailable); j.Attempts != 0 {
		t.Fatalf("attempts %d", j.Attempts)
	}
	claimOne(t, ctx, b, "w1", id)
	if err := b.store.Defer(ctx, b.pool, id, "w1", b.now.Load().Add(2*time.Hour), "too far"); !errors.Is(err, sqlstate.ErrInvalidArgument) {
		t.Fatalf("defer 2h: %v", err)
	}
}

func TestCompleteBatch(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	a, c := insertJob(t, ctx, b, 5), insertJob(t, ctx, b, 5)
	got, err := b.store.Claim(ctx, b.pool, "w1", 10, time.Minute)
	if err != nil || len(got) != 2 {
		t.Fatalf("claim: %v %v", got, err)
	}
	if err := b.store.CompleteBatch(ctx, b.pool, []int64{a, c}, "w2"); !errors.Is(err, sqlstate.ErrLeaseNotHeld) {
		t.Fatalf("other worker: %v", err)
	}
	other := insertJob(t, ctx, b, 5) // available, not leased
	if err := b.store.CompleteBatch(ctx, b.pool, []int64{a, other}, "w1"); !errors.Is(err, sqlstate.ErrLeaseNotHeld) {
		t.Fatalf("unleased job in batch: %v", err)
	}
	wantStatus(t, ctx, b, a, jobs.StatusLeased) // nothing completed by the refused calls
	if err := b.store.CompleteBatch(ctx, b.pool, []int64{a, c}, "w1"); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, ctx, b, a, jobs.StatusCompleted)
	wantStatus(t, ctx, b, c, jobs.StatusCompleted)
}

// TestCompleteBatchFindsJobsByPrimaryKey reads the plan PostgreSQL uses for the batch completion
// (auto_explain, generic plan as PL/pgSQL settles on) with hundreds of jobs leased: it must look
// the ids up by primary key, not walk the partial lease index over every leased job.
func TestCompleteBatchFindsJobsByPrimaryKey(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	if _, err := b.pool.Exec(ctx, `
		WITH i AS (
			INSERT INTO webhook_inbox (delivery_id, event, payload, payload_sha256)
			SELECT 'bulk-' || g, 'push', '{}', sha256('x'::bytea) FROM generate_series(1, 5000) g RETURNING id
		)
		INSERT INTO control_plane_jobs (kind, inbox_id, available_at) SELECT 'push', id, $1 FROM i`, *b.now.Load()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, `ANALYZE control_plane_jobs`); err != nil { // statistics from before the leases
		t.Fatal(err)
	}
	if _, err := b.store.Claim(ctx, b.pool, "others", 250, time.Minute); err != nil {
		t.Fatal(err)
	}
	mine, err := b.store.Claim(ctx, b.pool, "w1", 8, time.Minute)
	if err != nil || len(mine) != 8 {
		t.Fatalf("claim: %d %v", len(mine), err)
	}
	ids := make([]int64, len(mine))
	for i, j := range mine {
		ids[i] = j.ID
	}

	plans := pgtest.NewPlans(t, b.pool.Config().ConnString())
	if err := b.store.CompleteBatch(ctx, plans.Conn, ids, "w1"); err != nil {
		t.Fatal(err)
	}
	update, all := plans.Find("Update on control_plane_jobs")
	if !strings.Contains(update, "control_plane_jobs_pkey") || strings.Contains(update, "control_plane_jobs_lease_idx") {
		t.Fatalf("batch completion plan does not look jobs up by primary key:\n%s\n(all plans: %q)", update, all)
	}
	for _, id := range ids {
		wantStatus(t, ctx, b, id, jobs.StatusCompleted)
	}
}
