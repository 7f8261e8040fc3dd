package dispatcher_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/boardreadyops/cloud/pkg/daemon"
	"github.com/boardreadyops/cloud/pkg/githubapp"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
	"github.com/boardreadyops/cloud/pkg/testkit/proccpu"
	"github.com/boardreadyops/cloud/services/outbox-dispatcher/internal/dispatcher"
)

// createReleases creates n release runs (each with its github.check_run.create effect) over 50
// repositories of 5 installations.
func createReleases(b *testing.B, pool *pgxpool.Pool, n int) {
	b.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
		INSERT INTO installations (id, account_login, account_type) SELECT i, 'org-' || i, 'Organization' FROM generate_series(1, 5) i;
		INSERT INTO repositories (id, installation_id, full_name) SELECT r, 1 + r % 5, 'org-' || (1 + r % 5) || '/repo-' || r FROM generate_series(1, 50) r;`); err != nil {
		b.Fatal(err)
	}
	// Each tag at its own commit, as releases are (benchTagCommit is the same rule).
	if _, err := pool.Exec(ctx, `SELECT boardreadyops_release_run_create(1 + g % 50, 1 + (1 + g % 50) % 5, 'refs/tags/v' || g,
		substr(md5(g::text) || md5(g::text || 'x'), 1, 40), 'boardreadyops-release.yml', 'BoardReadyOps release') FROM generate_series(1, $1) g`, n); err != nil {
		b.Fatal(err)
	}
}

// createCompletions creates n github.check_run.complete effects (no follow-up effects), one for
// each of n release runs, as a burst of finished release runs would.
func createCompletions(b *testing.B, pool *pgxpool.Pool, n int) {
	b.Helper()
	createReleases(b, pool, n)
	if _, err := pool.Exec(context.Background(), `
		TRUNCATE control_plane_outbox;
		INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, release_run_id, execution_attempt_id, installation_id)
		SELECT 'github.check_run.complete', 'github.check_run.complete:' || r.id || ':' || a.id,
		       jsonb_build_object('repository_full_name', p.full_name, 'check_run_id', 1, 'conclusion', 'success'), r.id, a.id, r.installation_id
		FROM release_runs r JOIN execution_attempts a ON a.release_run_id = r.id JOIN repositories p ON p.id = r.repository_id
		ORDER BY r.created_at, r.id`); err != nil {
		b.Fatal(err)
	}
	// TRUNCATE, not DELETE: each deleted row would look up its self-references (superseded_by,
	// which has no index) — 26 s per 30,000 rows. Vacuum the new rows now (visibility map,
	// statistics) rather than have autovacuum meet them during the measurement.
	if _, err := pool.Exec(context.Background(), `VACUUM (ANALYZE) control_plane_outbox`); err != nil {
		b.Fatal(err)
	}
}

// serviceGC runs the benchmark under the dispatcher service's garbage-collector policy
// (daemon.Main applies it); GOGC and GOMEMLIMIT in the environment win, as in the service.
func serviceGC() { daemon.DefaultGC().Apply(os.Getenv) }

type benchResult struct {
	effects      int
	seconds      float64
	claimP50ms   float64
	claimP99ms   float64
	completedAll bool
	// CPU seconds during the drain: this process (the dispatcher, and the in-process GitHub when
	// there is one) and the PostgreSQL server (0 when it is not on this machine).
	selfCPU, serverCPU float64
}

// cpuNow reads this process's and the server's CPU seconds.
func cpuNow(postmaster int) (self, server float64) {
	self, _ = proccpu.Process("self", false)
	server, _ = proccpu.Server(postmaster)
	return self, server
}

// drain runs a dispatcher with inFlight deliveries (one installation may use them all), claims
// of batch and a 10 ms claim fill until want effects are completed, and reads its claim latency.
// BENCH_BATCH and BENCH_IN_FLIGHT override the batch and the deliveries in flight of both
// benchmarks, to measure the batch-size lever (hack/bench/compare.sh --env-b 'BENCH_BATCH=64
// BENCH_IN_FLIGHT=256').
func drain(b *testing.B, pool *pgxpool.Pool, gh dispatcher.GitHub, inFlight, batch, want int) benchResult {
	b.Helper()
	batch = envInt(b, "BENCH_BATCH", batch)
	inFlight = envInt(b, "BENCH_IN_FLIGHT", inFlight)
	reg, processed := prometheus.NewRegistry(), prometheus.NewRegistry()
	// Unpaced: the queue machinery as measured before per-installation pacing (issue 21;
	// hack/bench/pacing.sh measures pacing end to end).
	d := newDispatcher(b, pool, dispatcher.Config{
		WorkerID: "bench", Concurrency: inFlight, Unpaced: true, BatchSize: batch, ClaimFill: 10 * time.Millisecond, Lease: time.Minute,
		PollInterval: 10 * time.Millisecond, Listen: false, MaxBackoff: time.Second, RecoverInterval: 5 * time.Second,
		StatsInterval: time.Second, CheckRunName: "BoardReadyOps release", GitHub: gh, Metrics: dispatcher.NewMetrics(splitRegisterer{reg, processed}),
	})
	var backend int
	if err := pool.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		b.Fatal(err)
	}
	postmaster := proccpu.Postmaster(backend)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	perfControl(b, "enable")
	self0, server0 := cpuNow(postmaster)
	start := time.Now()
	go func() { _ = d.Run(ctx); close(done) }()
	// The dispatcher's own counter says when it is done: counting rows in the database while it
	// runs would spend the server's CPU on the measurement. The database is checked once after.
	for completed(b, processed) < want {
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("only %d of %d effects completed", completed(b, processed), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start).Seconds()
	self1, server1 := cpuNow(postmaster)
	perfControl(b, "disable")
	cancel()
	<-done
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM control_plane_outbox WHERE status = 'completed'`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	if n < want {
		b.Fatalf("the dispatcher counted %d completions, the database has %d", want, n)
	}
	p50, p99 := claimQuantiles(b, reg)
	return benchResult{effects: want, seconds: elapsed, claimP50ms: p50, claimP99ms: p99, completedAll: true,
		selfCPU: self1 - self0, serverCPU: server1 - server0}
}

// perfControl writes cmd ("enable", "disable") to the control FIFO of a `perf record --delay=-1
// --control fifo:PATH` when BENCH_PERF_CTL names it, so that a profile holds the drains only and
// not the fixtures' setup: mkfifo ctl; perf record -a --delay=-1 --control fifo:ctl -- env
// BENCH_PERF_CTL=ctl dispatcher.test -test.bench BenchmarkQueueMachinery ….
func perfControl(b *testing.B, cmd string) {
	b.Helper()
	path := os.Getenv("BENCH_PERF_CTL")
	if path == "" {
		return
	}
	if err := os.WriteFile(path, []byte(cmd+"\n"), 0); err != nil {
		b.Fatalf("perf control %s: %v", path, err)
	}
}

// envInt reads a positive integer setting of the benchmark, or def when it is unset.
func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	v, ok := os.LookupEnv(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// splitRegisterer registers the dispatcher's processed-effects counter on a registry of its own
// and everything else on rest: drain polls that counter every 5 ms, and gathering every metric
// that often (histograms included) took a tenth of the benchmark process's CPU.
type splitRegisterer struct{ rest, processed *prometheus.Registry }

func (s splitRegisterer) target(c prometheus.Collector) *prometheus.Registry {
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	target := s.rest
	for d := range ch {
		if strings.Contains(d.String(), `"boardreadyops_outbox_effects_processed_total"`) {
			target = s.processed
		}
	}
	return target
}

func (s splitRegisterer) Register(c prometheus.Collector) error { return s.target(c).Register(c) }
func (s splitRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		s.target(c).MustRegister(c)
	}
}
func (s splitRegisterer) Unregister(c prometheus.Collector) bool { return s.target(c).Unregister(c) }

// completed is the dispatcher's count of completed effects (every type).
func completed(b *testing.B, reg *prometheus.Registry) int {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "boardreadyops_outbox_effects_processed_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == dispatcher.OutcomeCompleted {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return int(n)
}

// claimQuantiles estimates quantiles of the claim latency histogram (upper bucket bounds).
func claimQuantiles(b *testing.B, reg *prometheus.Registry) (p50, p99 float64) {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "boardreadyops_outbox_claim_duration_seconds" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		total := float64(h.GetSampleCount())
		buckets := h.GetBucket()
		sort.Slice(buckets, func(i, j int) bool { return buckets[i].GetUpperBound() < buckets[j].GetUpperBound() })
		q := func(p float64) float64 {
			for _, bk := range buckets {
				if float64(bk.GetCumulativeCount()) >= p*total {
					return bk.GetUpperBound() * 1000
				}
			}
			return -1
		}
		return q(0.5), q(0.99)
	}
	return -1, -1
}

func report(b *testing.B, r benchResult) {
	b.ReportMetric(float64(r.effects)/r.seconds, "effects/s")
	b.ReportMetric(r.claimP50ms, "claim-p50-ms")
	b.ReportMetric(r.claimP99ms, "claim-p99-ms")
	b.ReportMetric(1e6*r.selfCPU/float64(r.effects), "dispatcher-cpu-us/effect")
	b.ReportMetric(1e6*r.serverCPU/float64(r.effects), "postgres-cpu-us/effect")
	b.ReportMetric(0, "ns/op")
	fmt.Printf("%s: %d effects in %.2fs = %.0f effects/s; claim p50 <= %.1f ms, p99 <= %.1f ms; CPU per effect: dispatcher %.1f µs, PostgreSQL %.1f µs\n",
		b.Name(), r.effects, r.seconds, float64(r.effects)/r.seconds, r.claimP50ms, r.claimP99ms,
		1e6*r.selfCPU/float64(r.effects), 1e6*r.serverCPU/float64(r.effects))
}

// BenchmarkQueueMachinery: claim → delivery start → authoritative completion, with an in-process
// no-op GitHub. Run it against a durable server (hack/bench/dispatcher.sh sets TEST_DATABASE_URL).
// 1,024 deliveries in flight, as River at its best runs 1,000 workers, and claims of 128: with a
// GitHub that answers at once a delivery only waits for its group commit, and the one claim loop,
// whose claims follow one another, is what bounds the rate. Claims of 128 halve the claims' fixed
// cost against 64 and keep their p99 within 10 ms on a quiet machine (15–20 ms in its slow
// phases); with eight batches in flight a claim rarely
// waits for free slots (docs/performance.md, "In flight and claim size against River"; the
// figures before it are at 256 and 64).
func BenchmarkQueueMachinery(b *testing.B) {
	const n = 30000
	serviceGC()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		pool := pgtest.NewPool(b)
		createCompletions(b, pool, n)
		b.StartTimer()
		r := drain(b, pool, dispatcher.NoopGitHub{}, 1024, 128, n)
		b.StopTimer()
		report(b, r)
	}
}

// BenchmarkEndToEndSimulator: release runs' check-run creation (list + create) and workflow
// dispatch against the simulator over loopback HTTP: 2 effects per run.
func BenchmarkEndToEndSimulator(b *testing.B) {
	const runs = 10000
	serviceGC()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		pool := pgtest.NewPool(b)
		key, pub, err := githubsim.NewAppKey()
		if err != nil {
			b.Fatal(err)
		}
		sim := githubsim.New(githubsim.Options{AppID: appID, AppPublicKey: pub, AutoRepositories: true, TagCommit: benchTagCommit})
		srv := httptest.NewServer(sim)
		gh, err := githubapp.New(githubapp.Config{AppID: appID, PrivateKey: key, BaseURL: srv.URL, Timeout: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		createReleases(b, pool, runs)
		b.StartTimer()
		r := drain(b, pool, gh, 64, 64, 2*runs)
		b.StopTimer()
		srv.Close()
		sim.Close()
		report(b, r)
	}
}

// benchTagCommit is where createReleases's tag v<g> points: the first 40 hexadecimal digits of
// md5(g) followed by md5(g || 'x').
func benchTagCommit(_, tag string) string {
	g := strings.TrimPrefix(tag, "v")
	a, b := md5.Sum([]byte(g)), md5.Sum([]byte(g+"x"))
	return (hex.EncodeToString(a[:]) + hex.EncodeToString(b[:]))[:40]
}
