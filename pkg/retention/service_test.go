package retention_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/boardreadyops/cloud/pkg/retention"
)

// replica is one running Service with the rows it deleted.
type replica struct {
	svc     *retention.Service
	deleted atomic.Int64
	stop    context.CancelFunc
	done    chan struct{}
	metrics *retention.Metrics
}

func start(t *testing.T, pool *pgxpool.Pool, owner string, store *retention.Store, periods retention.Periods) *replica {
	t.Helper()
	r := &replica{done: make(chan struct{}), metrics: retention.NewMetrics(prometheus.NewRegistry())}
	svc, err := retention.New(pool, retention.Config{Owner: owner, Periods: periods, BatchSize: 1, BatchPause: 5 * time.Millisecond,
		Interval: 10 * time.Millisecond, Lease: time.Second, Store: store, Metrics: r.metrics,
		OnBatch: func(_ string, n int64) { r.deleted.Add(n) }})
	if err != nil {
		t.Fatal(err)
	}
	r.svc = svc
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = func() { cancel(); <-r.done }
	go func() { defer close(r.done); svc.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

// eventually polls cond (a condition, not a duration: the bound only ends a hung test).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestOneReplicaSweepsAndAnotherTakesOver: of two replicas only the lease holder deletes; when it
// stops (releasing the lease) the other takes over; when a holder dies without releasing, the
// other takes over once the lease expires.
func TestOneReplicaSweepsAndAnotherTakesOver(t *testing.T) {
	r, store := newRows(t)
	for range 40 {
		r.job("completed", 8*day)
	}
	a := start(t, r.pool, "replica-a", store, defaults)
	eventually(t, "replica a to lead", a.svc.Leader)
	b := start(t, r.pool, "replica-b", store, defaults)
	eventually(t, "replica a to delete every expired job", func() bool { return a.deleted.Load() == 40 })
	if b.svc.Leader() || b.deleted.Load() != 0 {
		t.Fatalf("replica b leads (%v) or deleted %d rows while a held the lease", b.svc.Leader(), b.deleted.Load())
	}
	if got := testutil.ToFloat64(a.metrics.Deleted.WithLabelValues(retention.TableJobs)); got != 40 {
		t.Errorf("a's deleted_rows_total{table=control_plane_jobs} = %v, want 40", got)
	}
	if testutil.ToFloat64(a.metrics.Leader) != 1 || testutil.ToFloat64(b.metrics.Leader) != 0 {
		t.Errorf("leader gauges a=%v b=%v, want 1 and 0", testutil.ToFloat64(a.metrics.Leader), testutil.ToFloat64(b.metrics.Leader))
	}

	a.stop()
	for range 10 {
		r.job("completed", 8*day)
	}
	eventually(t, "replica b to take over and delete the new rows", func() bool { return b.svc.Leader() && b.deleted.Load() == 10 })
	if a.deleted.Load() != 40 {
		t.Fatalf("the stopped replica deleted %d rows, want its 40", a.deleted.Load())
	}

	// b dies without releasing (its lease row stays); c, whose clock is past b's lease, takes over.
	b.stop()
	if _, err := store.Acquire(context.Background(), r.pool, "replica-b", time.Second); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		r.job("completed", 8*day)
	}
	late := &retention.Store{Clock: func() time.Time { return now.Add(2 * time.Second) }}
	c := start(t, r.pool, "replica-c", late, defaults)
	eventually(t, "replica c to take over the expired lease", func() bool { return c.svc.Leader() && c.deleted.Load() == 5 })
	c.stop()
}

// TestOldestExpiredGauge: every replica, leader or not, exports how long the oldest row past its
// retention has been past it (a job 8 days old under a 7-day period: 1 day, not its own 8 days,
// which the 6-hour alert would read as behind the moment any row expired), and 0 once it is gone.
func TestOldestExpiredGauge(t *testing.T) {
	r, store := newRows(t)
	if _, err := store.Acquire(context.Background(), r.pool, "someone-else", time.Hour); err != nil {
		t.Fatal(err)
	}
	r.job("completed", 8*day)
	a := start(t, r.pool, "follower", store, defaults)
	want := (8*day - 7*day).Seconds()
	eventually(t, "the oldest-expired gauge", func() bool {
		return testutil.ToFloat64(a.metrics.OldestExpired.WithLabelValues(retention.TableJobs)) == want
	})
	if a.svc.Leader() {
		t.Fatal("the follower leads")
	}
	if err := store.Release(context.Background(), r.pool, "someone-else"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the gauge to drop to 0 after the sweep", func() bool {
		return testutil.ToFloat64(a.metrics.OldestExpired.WithLabelValues(retention.TableJobs)) == 0
	})
	a.stop()
}

// TestPassMetrics: a complete pass sets the last-pass duration and counts as completed; a pass
// the database refuses (an audit period under the function's one-year floor) counts as failed
// and leaves the duration of the last complete pass alone.
func TestPassMetrics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		periods   retention.Periods
		counted   string
		lastPass  bool
		uncounted string
	}{
		{"complete pass", defaults, retention.PassCompleted, true, retention.PassFailed},
		{"refused pass", retention.Periods{Jobs: 7 * day, Audit: time.Hour}, retention.PassFailed, false, retention.PassCompleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, store := newRows(t)
			r.job("completed", 8*day)
			a := start(t, r.pool, "only", store, tt.periods)
			passes := a.metrics.Passes
			eventually(t, tt.counted+" passes counted", func() bool { return testutil.ToFloat64(passes.WithLabelValues(tt.counted)) >= 2 })
			a.stop()
			if n := testutil.ToFloat64(passes.WithLabelValues(tt.uncounted)); n != 0 {
				t.Errorf("%s passes = %v, want 0", tt.uncounted, n)
			}
			if got := testutil.ToFloat64(a.metrics.LastPass) > 0; got != tt.lastPass {
				t.Errorf("last pass duration set = %v, want %v", got, tt.lastPass)
			}
			// The jobs class runs before the audit class: the refused pass still deleted the job.
			if a.deleted.Load() != 1 {
				t.Errorf("deleted %d rows, want 1", a.deleted.Load())
			}
		})
	}
}

// TestPassCutShortOrLost: a pass stopped by shutdown counts neither as completed nor as failed;
// a pass whose lease another replica takes part way counts as failed. Each deletes one row (one
// row a batch) before it ends.
func TestPassCutShortOrLost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		onBatch func(r *rows, cancel context.CancelFunc)
		failed  float64
	}{
		{"shutdown during a pass", func(_ *rows, cancel context.CancelFunc) { cancel() }, 0},
		{"lease taken during a pass", func(r *rows, _ context.CancelFunc) {
			r.exec(`UPDATE retention_leases SET owner = 'thief', expires_at = $1`, now.Add(time.Hour))
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, store := newRows(t)
			for range 3 {
				r.job("completed", 8*day)
			}
			metrics := retention.NewMetrics(prometheus.NewRegistry())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var batches atomic.Int64
			svc, err := retention.New(r.pool, retention.Config{Owner: "only", Periods: defaults, BatchSize: 1,
				BatchPause: 5 * time.Millisecond, Interval: time.Hour, Lease: time.Minute, Store: store, Metrics: metrics,
				OnBatch: func(string, int64) {
					if batches.Add(1) == 1 {
						tt.onBatch(r, cancel)
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { defer close(done); svc.Run(ctx) }()
			eventually(t, "the pass to end", func() bool {
				return ctx.Err() != nil || testutil.ToFloat64(metrics.Passes.WithLabelValues(retention.PassFailed)) > 0
			})
			cancel()
			<-done
			if got := testutil.ToFloat64(metrics.Passes.WithLabelValues(retention.PassFailed)); got != tt.failed {
				t.Errorf("failed passes = %v, want %v", got, tt.failed)
			}
			if got := testutil.ToFloat64(metrics.Passes.WithLabelValues(retention.PassCompleted)); got != 0 {
				t.Errorf("completed passes = %v, want 0", got)
			}
			if testutil.ToFloat64(metrics.LastPass) != 0 || batches.Load() != 1 {
				t.Errorf("last pass %v s after %d batches, want 0 s after 1", testutil.ToFloat64(metrics.LastPass), batches.Load())
			}
		})
	}
}

// TestSweepNeverMakesAClaimWait measures lock waits, not time.
//
// First, one batch of every table class is held open in a transaction (the longest any lock of
// the sweep is held): claims, completions and new deliveries on other connections, with
// lock_timeout = 100 ms, all succeed — a wait on any lock the batch holds would never end and
// fail with SQLSTATE 55P03.
//
// Then the service sweeps 6,000 rows in batches while claimers claim and complete; a sampler
// reads pg_stat_activity for a claimer waiting on a lock held by the sweeper's connections
// (pg_blocking_pids) and finds none.
func TestSweepNeverMakesAClaimWait(t *testing.T) {
	ctx := context.Background()
	r, _ := newRows(t)
	dbStore := &retention.Store{} // the database clock: the fixtures are days old by it
	r.exec(`WITH i AS (
			INSERT INTO webhook_inbox (delivery_id, event, payload, payload_sha256, received_at)
			SELECT 'bulk-' || g, 'push', '{}', sha256('x'::bytea), now() - interval '30 days' FROM generate_series(1, 8000) g RETURNING id
		)
		INSERT INTO control_plane_jobs (kind, inbox_id, status, completed_at)
		SELECT 'push', id, CASE WHEN id % 4 = 0 THEN 'available' ELSE 'completed' END,
		       CASE WHEN id % 4 <> 0 THEN now() - interval '30 days' END FROM i`)
	r.exec(`INSERT INTO installations (id, account_login, account_type) VALUES (1, 'octo-org', 'Organization')`)
	r.exec(`INSERT INTO repositories (id, installation_id, full_name) VALUES (1, 1, 'octo-org/repo')`)
	r.exec(`INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status, completed_at)
		SELECT 1, 1, 'refs/tags/v' || g, lpad(to_hex(g), 40, '0'), 'boardreadyops-release.yml',
		       CASE WHEN g % 2 = 0 THEN 'running' ELSE 'succeeded' END, CASE WHEN g % 2 = 1 THEN now() - interval '200 days' END
		FROM generate_series(1, 4000) g`)
	r.exec(`INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, status, completed_at, release_run_id, installation_id)
		SELECT 'github.check_run.create', 'github.check_run.create:' || id, '{}',
		       CASE WHEN completed_at IS NULL THEN 'available' ELSE 'completed' END, completed_at, id, 1 FROM release_runs`)
	r.exec(`ANALYZE`)
	periods := retention.Periods{Jobs: day, Effects: day, ReleaseRuns: day}

	claimer := pgxpoolWith(t, r.pool, "claimer")
	claimAll := func(label string) {
		t.Helper()
		conn, err := claimer.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		for _, sql := range []string{`SET lock_timeout = '100ms'`,
			`SELECT boardreadyops_job_complete(id, 'w') FROM boardreadyops_job_claim('w', 10, '1 minute')`,
			`SELECT count(*) FROM boardreadyops_outbox_claim('d', 10, '1 minute')`,
			`SELECT * FROM boardreadyops_webhook_accept('d-new-` + label + `', 'ping', NULL, NULL, NULL, '{}', sha256('` + label + `'::bytea), NULL)`} {
			if _, err := conn.Exec(ctx, sql); err != nil {
				var pgErr *pgconn.PgError
				if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
					t.Fatalf("%s: %s waited for a lock the sweep holds: %v", label, sql, err)
				}
				t.Fatalf("%s: %s: %v", label, sql, err)
			}
		}
	}

	if _, err := dbStore.Acquire(ctx, r.pool, "held", time.Minute); err != nil {
		t.Fatal(err)
	}
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{retention.TableJobs, retention.TableEffects, retention.TableReleaseRuns} {
		if n, err := dbStore.Delete(ctx, tx, table, "held", periods.Of(table), 1000); err != nil || n == 0 {
			t.Fatalf("held batch of %s: %d rows, %v", table, n, err)
		}
	}
	claimAll("held")
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dbStore.Release(ctx, r.pool, "held"); err != nil {
		t.Fatal(err)
	}

	sweeper := pgxpoolWith(t, r.pool, "sweeper")
	svc, err := retention.New(sweeper, retention.Config{Owner: "sweeper", Periods: periods, BatchSize: 200, Interval: time.Hour,
		Lease: 10 * time.Second, Store: dbStore})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(sctx) }()

	var waits, samples atomic.Int64
	var wg sync.WaitGroup
	swept := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-swept:
				return
			default:
			}
			var n int64
			if err := r.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity a
				WHERE a.application_name = 'claimer' AND a.wait_event_type = 'Lock'
				  AND EXISTS (SELECT 1 FROM unnest(pg_blocking_pids(a.pid)) b JOIN pg_stat_activity s ON s.pid = b
				              WHERE s.application_name = 'sweeper')`).Scan(&n); err == nil {
				waits.Add(n)
				samples.Add(1)
			}
		}
	})
	for i := 0; ; i++ {
		claimAll("loop-" + string(rune('a'+i%26)) + time.Now().Format("150405.000000"))
		var left int64
		r.scan(&left, `SELECT count(*) FROM control_plane_jobs WHERE status = 'completed' AND completed_at < now() - interval '1 day'`)
		if left == 0 {
			break
		}
	}
	close(swept)
	wg.Wait()
	stop()
	<-done
	if waits.Load() != 0 {
		t.Fatalf("claimers waited on the sweeper's locks in %d of %d samples", waits.Load(), samples.Load())
	}
	t.Logf("no claim waited on the sweep in %d samples", samples.Load())
}

// pgxpoolWith opens a pool on like's database under application_name name.
func pgxpoolWith(t *testing.T, like *pgxpool.Pool, name string) *pgxpool.Pool {
	t.Helper()
	cfg := like.Config().Copy()
	cfg.ConnConfig.RuntimeParams["application_name"] = name
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestPassVisitsEveryClassWhenOneNeverDrains: jobs expire faster than they are deleted (each
// batch of them brings a new expired one), yet the pass moves on to the other classes after its
// budget, completes, and counts as completed; the next pass starts without waiting an interval.
func TestPassVisitsEveryClassWhenOneNeverDrains(t *testing.T) {
	t.Parallel()
	r, store := newRows(t)
	r.job("completed", 8*day)
	digest := r.digest(40 * day)
	metrics := retention.NewMetrics(prometheus.NewRegistry())
	var digestsDeleted, jobBatches atomic.Int64
	svc, err := retention.New(r.pool, retention.Config{Owner: "only", Periods: defaults, BatchSize: 1,
		Interval: time.Hour, Lease: time.Minute, ClassBudget: 200 * time.Millisecond, Store: store, Metrics: metrics,
		OnBatch: func(table string, n int64) {
			switch table {
			case retention.TableJobs:
				jobBatches.Add(1)
				r.job("completed", 8*day) // arrival keeps up with deletion: the class never drains
			case retention.TableDigests:
				digestsDeleted.Add(n)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(ctx) }()
	defer func() { cancel(); <-done }()
	eventually(t, "two completed passes and the digest deleted", func() bool {
		return testutil.ToFloat64(metrics.Passes.WithLabelValues(retention.PassCompleted)) >= 2 && digestsDeleted.Load() == 1
	})
	if r.exists("webhook_body_digests", "delivery_id", digest) {
		t.Fatal("the expired digest is still there")
	}
	if jobBatches.Load() < 2 {
		t.Fatalf("%d job batches", jobBatches.Load())
	}
}
