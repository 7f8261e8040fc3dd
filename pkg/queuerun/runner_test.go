package queuerun

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/boardreadyops/cloud/pkg/jobs"
	"github.com/boardreadyops/cloud/pkg/notify"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

func runnerMetrics(tb testing.TB) *Metrics {
	tb.Helper()
	m, err := NewMetrics(prometheus.NewRegistry(), MetricsConfig{
		States: Desc{Name: "boardreadyops_runner_test_jobs", Help: "Jobs by state."}, StateValues: []string{"available", "leased", "retrying", "dead_letter"},
		OldestAvailableAge: Desc{Name: "boardreadyops_runner_test_oldest_available_job_age_seconds", Help: "Oldest due job."},
		StatsRefreshed:     Desc{Name: "boardreadyops_runner_test_stats_refreshed_timestamp_seconds", Help: "Last statistics."},
		ClaimDuration:      Desc{Name: "boardreadyops_runner_test_claim_duration_seconds", Help: "Claim latency."},
		Recovered:          Desc{Name: "boardreadyops_runner_test_leases_recovered_total", Help: "Recovered leases."},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// jobRunnerConfig is a runner of lifecycle's jobs on pool (nil: never reaches a database);
// each statistics query is announced on statsRead.
func jobRunnerConfig(store *jobs.Store, pool *pgxpool.Pool, m *Metrics, statsRead chan<- struct{}) Config[jobs.Job, jobs.Recovered] {
	conn := &pgx.ConnConfig{}
	if pool != nil {
		conn = pool.Config().ConnConfig
	}
	return Config[jobs.Job, jobs.Recovered]{
		PollInterval: time.Hour, Metrics: m,
		Listen: true, ListenChannel: notify.Jobs, ListenConn: conn,
		Claim: ClaimConfig[jobs.Job]{SpanName: "test.claim", Traceparent: func(j jobs.Job) *string { return j.Traceparent }},
		Recovery: Recovery[jobs.Recovered]{Name: "recover job leases", Interval: 10 * time.Second, Message: "recovered expired job lease",
			Recover:  func(ctx context.Context) ([]jobs.Recovered, error) { return store.RecoverLeases(ctx, pool, 1000) },
			Describe: func(r jobs.Recovered) (string, []any) { return r.Status, []any{"job_id", r.ID} }},
		Stats: Stats{Name: "read job queue statistics", Interval: 20 * time.Second,
			Read: func(ctx context.Context) (float64, []int64, error) {
				defer func() { statsRead <- struct{}{} }()
				st, err := store.Stats(ctx, pool)
				return st.OldestAvailableAgeSeconds, []int64{st.Available, st.Leased, st.Retrying, st.DeadLetter}, err
			}},
	}
}

// Background listens, refreshes the statistics at once and recovers leases on its interval,
// waking the loops; once ctx ends nothing of it is left running. Not parallel: the leak check
// sees every goroutine of the test binary.
func TestRunnerBackground(t *testing.T) {
	pool := pgtest.NewPool(t)
	now := time.Now()
	store := &jobs.Store{Clock: func() time.Time { return now }}
	InsertJobs(t, pool, 3, now.Add(-time.Minute))
	if got, err := store.Claim(context.Background(), pool, "died-mid-batch", 1, time.Minute); err != nil || len(got) != 1 {
		t.Fatalf("claim: %d jobs, %v", len(got), err)
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	m := runnerMetrics(t)
	statsRead := make(chan struct{}, 4)
	r, err := New(jobRunnerConfig(store, pool, m, statsRead))
	if err != nil {
		t.Fatal(err)
	}
	timers := newFakeTimers()
	r.upkeep.timer, r.upkeep.rand = timers.timer, func() float64 { return 0.5 }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	connected := r.Next()
	done := make(chan struct{})
	go func() { r.Background(ctx); close(done) }()

	if !r.Sleep(ctx, connected) {
		t.Fatal("no wake-up when the listener connected")
	}
	<-statsRead
	byWait := map[time.Duration]fakeTimer{}
	for range 2 {
		tm := <-timers.started
		byWait[tm.d] = tm
	}
	recovery, ok := byWait[10*time.Second]
	if !ok {
		t.Fatalf("timers %v: none for the recovery interval", byWait)
	}
	// The statistics task starts its next timer once it has set the gauges (Read returns
	// before they are set).
	if _, ok := byWait[20*time.Second]; !ok {
		t.Fatalf("timers %v: none for the statistics interval", byWait)
	}
	if got := testutil.ToFloat64(m.States.WithLabelValues("available")); got != 2 {
		t.Fatalf("available gauge %v after the first statistics, want 2", got)
	}
	if got := testutil.ToFloat64(m.States.WithLabelValues("leased")); got != 1 {
		t.Fatalf("leased gauge %v after the first statistics, want 1", got)
	}

	now = now.Add(2 * time.Minute) // the lease of the dead worker has expired
	woken := r.Next()
	recovery.fire <- now
	if !r.Sleep(ctx, woken) {
		t.Fatal("a recovery that found a lease did not wake the loops")
	}
	if got := testutil.ToFloat64(m.Recovered.WithLabelValues(jobs.StatusAvailable)); got != 1 {
		t.Fatalf("recovered %v leases, want 1", got)
	}
	cancel()
	<-done
}

// A runner's claims are timed into the shared claim histogram unless told otherwise.
func TestRunnerClaimObservesTheClaimHistogram(t *testing.T) {
	t.Parallel()
	m := runnerMetrics(t)
	cfg := jobRunnerConfig(&jobs.Store{}, nil, m, nil)
	cfg.Listen, cfg.ListenConn = false, nil
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := r.Claim(context.Background(), func(context.Context) ([]jobs.Job, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}
	var mm dto.Metric
	if err := m.ClaimDuration.Write(&mm); err != nil {
		t.Fatal(err)
	}
	if n := mm.GetHistogram().GetSampleCount(); n != 3 {
		t.Fatalf("%d claims observed, want 3", n)
	}
}

func TestNewRunnerValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(c *Config[jobs.Job, jobs.Recovered])
	}{
		{"no metrics", func(c *Config[jobs.Job, jobs.Recovered]) { c.Metrics = nil }},
		{"listen without a connection", func(c *Config[jobs.Job, jobs.Recovered]) { c.ListenConn = nil }},
		{"listen without a channel", func(c *Config[jobs.Job, jobs.Recovered]) { c.ListenChannel = "" }},
		{"no poll interval", func(c *Config[jobs.Job, jobs.Recovered]) { c.PollInterval = 0 }},
		{"no recovery", func(c *Config[jobs.Job, jobs.Recovered]) { c.Recovery.Recover = nil }},
		{"no recovery interval", func(c *Config[jobs.Job, jobs.Recovered]) { c.Recovery.Interval = 0 }},
		{"no statistics query", func(c *Config[jobs.Job, jobs.Recovered]) { c.Stats.Read = nil }},
		{"no claim span name", func(c *Config[jobs.Job, jobs.Recovered]) { c.Claim.SpanName = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := jobRunnerConfig(&jobs.Store{}, nil, runnerMetrics(t), nil)
			tt.change(&cfg)
			if _, err := New(cfg); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// InsertJobs stores n inbox rows and their jobs, due at availableAt, as ingest does (exported
// for the package's external tests).
func InsertJobs(tb testing.TB, pool *pgxpool.Pool, n int, availableAt time.Time) {
	tb.Helper()
	for range n {
		_, err := pool.Exec(context.Background(), `
			WITH i AS (
				INSERT INTO webhook_inbox (delivery_id, event, action, payload, payload_sha256)
				VALUES ('queuerun-' || gen_random_uuid(), 'push', NULL, '{}', sha256('x'::bytea)) RETURNING id
			)
			INSERT INTO control_plane_jobs (kind, inbox_id, available_at) SELECT 'push', i.id, $1 FROM i`, availableAt)
		if err != nil {
			tb.Fatal(err)
		}
	}
}
