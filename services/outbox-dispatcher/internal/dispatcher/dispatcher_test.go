package dispatcher_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/boardreadyops/cloud/pkg/githubapp"
	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/telemetry"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
	"github.com/boardreadyops/cloud/services/outbox-dispatcher/internal/dispatcher"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const appID = 424242

type env struct {
	t      *testing.T
	ctx    context.Context
	url    string // the test database, as the superuser
	apiURL string // the simulator
	key    []byte // the App's private key
	pool   *pgxpool.Pool
	sim    *githubsim.Simulator
	gh     *githubapp.Client
	reg    *prometheus.Registry
	n      int
	// first is the first dispatcher built: the budgets the shared client observes go to it.
	first atomic.Pointer[dispatcher.Dispatcher]
}

func setup(t *testing.T) *env {
	t.Helper()
	key, pub, err := githubsim.NewAppKey()
	if err != nil {
		t.Fatal(err)
	}
	sim := githubsim.New(githubsim.Options{AppID: appID, AppPublicKey: pub, AutoRepositories: true,
		TagCommit: githubsim.TagsAt(pushedSHA)})
	t.Cleanup(sim.Close)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	e := &env{t: t, ctx: context.Background(), url: pgtest.NewURL(t), apiURL: srv.URL, key: key, sim: sim, reg: prometheus.NewRegistry()}
	if e.pool, err = pgxpool.New(e.ctx, e.url); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.pool.Close)
	e.gh, err = githubapp.New(githubapp.Config{AppID: appID, PrivateKey: key, BaseURL: srv.URL, Timeout: time.Second,
		ObserveRate: func(id int64, r githubapp.Rate) {
			if d := e.first.Load(); d != nil {
				d.ObserveRate(id, r)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) dispatcher(lease time.Duration) *dispatcher.Dispatcher {
	return e.dispatcherWith(lease, func(*dispatcher.Config) {})
}

// dispatcherWith builds a dispatcher whose config edit changes.
func (e *env) dispatcherWith(lease time.Duration, edit func(*dispatcher.Config)) *dispatcher.Dispatcher {
	return e.build(lease, edit, e.pool, e.gh)
}

// replica builds a dispatcher as a deployment runs one: its own connections, as a login of the
// boardreadyops_dispatcher role, and its own GitHub client (reporting budgets to it).
func (e *env) replica(lease time.Duration, edit func(*dispatcher.Config)) *dispatcher.Dispatcher {
	e.t.Helper()
	var d atomic.Pointer[dispatcher.Dispatcher]
	gh, err := githubapp.New(githubapp.Config{AppID: appID, PrivateKey: e.key, BaseURL: e.apiURL, Timeout: time.Second,
		ObserveRate: func(id int64, r githubapp.Rate) { d.Load().ObserveRate(id, r) }})
	if err != nil {
		e.t.Fatal(err)
	}
	d.Store(e.build(lease, edit, pgtest.NewLoginPool(e.t, e.url, "boardreadyops_dispatcher"), gh))
	return d.Load()
}

func (e *env) build(lease time.Duration, edit func(*dispatcher.Config), pool *pgxpool.Pool, gh *githubapp.Client) *dispatcher.Dispatcher {
	e.n++
	reg := prometheus.NewRegistry()
	if e.n == 1 {
		reg = e.reg // the first dispatcher's metrics are inspected by the tests
	}
	cfg := dispatcher.Config{
		WorkerID: fmt.Sprintf("dispatcher-%d", e.n), Concurrency: 16, PerInstallation: 8, BatchSize: 16, Lease: lease,
		PollInterval: 20 * time.Millisecond, Listen: true, MaxBackoff: time.Second, RecoverInterval: 100 * time.Millisecond,
		StatsInterval: 50 * time.Millisecond, CheckRunName: "BoardReadyOps release",
		RateLimitBackoff: time.Minute, RateLimitMaxBackoff: 16 * time.Minute,
		GitHub: gh, Metrics: dispatcher.NewMetrics(reg),
	}
	edit(&cfg)
	d := newDispatcher(e.t, pool, cfg)
	e.first.CompareAndSwap(nil, d)
	return d
}

// newDispatcher builds a dispatcher from cfg with no logs and, unless cfg names one, the tracer of
// a service without an exporter (telemetry.Setup), as the benchmarks measure it.
func newDispatcher(tb testing.TB, pool *pgxpool.Pool, cfg dispatcher.Config) *dispatcher.Dispatcher {
	tb.Helper()
	if cfg.Tracer == nil {
		cfg.Tracer = telemetry.IDs.Tracer("test")
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	d, err := dispatcher.New(pool, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// run runs a dispatcher until cond holds (or fails the test after a while).
func (e *env) runUntil(d *dispatcher.Dispatcher, cond func() bool) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			cancel()
			<-done
			e.t.Fatal("condition not reached")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
}

// pushedSHA is the commit every test release run is created for, and where the simulator's tags
// point unless a test moves them.
const pushedSHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"

// release creates a release run (and its check_run.create effect) for installation inst in repo.
func (e *env) release(inst int64, repo, tag string) string {
	e.t.Helper()
	var repoID int64
	err := e.pool.QueryRow(e.ctx, `
		WITH i AS (INSERT INTO installations (id, account_login, account_type) VALUES ($1, 'octo-org', 'Organization') ON CONFLICT DO NOTHING)
		INSERT INTO repositories (id, installation_id, full_name) VALUES (abs(hashtext($2))::bigint + 1, $1, $2)
		ON CONFLICT (id) DO UPDATE SET full_name = EXCLUDED.full_name RETURNING id`, inst, repo).Scan(&repoID)
	if err != nil {
		e.t.Fatal(err)
	}
	var run string
	err = e.pool.QueryRow(e.ctx, `SELECT boardreadyops_release_run_create($1, $2, $3, $4, 'boardreadyops-release.yml', 'BoardReadyOps release')::text`,
		repoID, inst, "refs/tags/"+tag, pushedSHA).Scan(&run)
	if err != nil {
		e.t.Fatal(err)
	}
	return run
}

// checkRuns are the check runs on GitHub that carry the release run's identity
// (boardreadyops_release_run_external_id, the string the dispatcher writes).
func (e *env) checkRuns(run string) []githubsim.CheckRun {
	e.t.Helper()
	var ext string
	if err := e.pool.QueryRow(e.ctx, `SELECT boardreadyops_release_run_external_id(repository_id, ref) FROM release_runs WHERE id = $1`, run).Scan(&ext); err != nil {
		e.t.Fatal(err)
	}
	return e.sim.CheckRuns(ext)
}

func (e *env) count(q string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(e.ctx, q, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (e *env) statuses() map[string]int {
	e.t.Helper()
	rows, err := e.pool.Query(e.ctx, `SELECT effect_type || '/' || status, count(*) FROM control_plane_outbox GROUP BY 1`)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		_ = rows.Scan(&k, &n)
		out[k] = n
	}
	return out
}

func TestEveryEffectHappyPath(t *testing.T) {
	t.Parallel()
	e := setup(t)
	run := e.release(55501, "octo-org/hello-world", "v1.0.0")
	d := e.dispatcher(10 * time.Second)
	e.runUntil(d, func() bool {
		return e.count(`SELECT count(*) FROM release_runs WHERE status = 'running'`) == 1
	})
	var attempt string
	var wfRun, checkRun int64
	if err := e.pool.QueryRow(e.ctx, `SELECT a.id::text, a.workflow_run_id, r.check_run_id FROM execution_attempts a
		JOIN release_runs r ON r.id = a.release_run_id WHERE r.id = $1`, run).Scan(&attempt, &wfRun, &checkRun); err != nil {
		t.Fatal(err)
	}
	if crs := e.checkRuns(run); len(crs) != 1 || crs[0].ID != checkRun || crs[0].Name != "BoardReadyOps release" {
		t.Fatalf("check runs %+v", crs)
	}
	if e.sim.Dispatches(attempt) != 1 {
		t.Fatalf("%d dispatches", e.sim.Dispatches(attempt))
	}
	// The dispatch's completion updated the check run: running, linked to the workflow run.
	e.runUntil(d, func() bool { return e.statuses()["github.check_run.complete/completed"] == 1 })
	c := e.checkRuns(run)[0]
	wantURL := fmt.Sprintf("https://github.com/octo-org/hello-world/actions/runs/%d", wfRun)
	if c.Status != "in_progress" || c.DetailsURL != wantURL || c.Output.Title == nil || !strings.Contains(*c.Output.Title, "v1.0.0") {
		t.Fatalf("check run after the dispatch %+v", c)
	}
	// The run finishes: lifecycle would enqueue the completion (the same function).
	if _, err := e.pool.Exec(e.ctx, `UPDATE execution_attempts SET status = 'succeeded', conclusion = 'success', completed_at = now() WHERE id = $1`, attempt); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `UPDATE release_runs SET status = 'succeeded', completed_at = now() WHERE id = $1`, run); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `SELECT boardreadyops_release_run_enqueue_check_run($1, 'succeeded', NULL, NULL)`, run); err != nil {
		t.Fatal(err)
	}
	e.runUntil(d, func() bool { return e.statuses()["github.check_run.complete/completed"] == 2 })
	if c := e.checkRuns(run)[0]; c.Status != "completed" || *c.Conclusion != "success" || c.DetailsURL != wantURL ||
		!strings.Contains(*c.Output.Title, "v1.0.0") || c.Output.Text == nil || !strings.Contains(*c.Output.Text, wantURL) {
		t.Fatalf("check run %+v", c)
	}
}

func TestCheckRunCreationReplayReusesTheCheckRun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// GitHub creates the check run, but the response is lost.
	e.sim.AddFault(githubsim.Fault{Operation: githubsim.OpCreateCheckRun, DropAfterProcessing: true, Times: 1})
	run := e.release(55501, "octo-org/hello-world", "v1.0.0")
	e.runUntil(e.dispatcher(10*time.Second), func() bool {
		return e.statuses()["github.check_run.create/completed"] == 1
	})
	if n := len(e.checkRuns(run)); n != 1 {
		t.Fatalf("%d check runs for the release run, want exactly 1", n)
	}
}

func TestMaybeDeliveredDispatchNeedsReconciliationAndIsNeverSentTwice(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.sim.AddFault(githubsim.Fault{Operation: githubsim.OpDispatchWorkflow, DropAfterProcessing: true})
	e.release(55501, "octo-org/hello-world", "v1.0.0")
	d := e.dispatcher(10 * time.Second)
	e.runUntil(d, func() bool { return e.statuses()["github.workflow.dispatch/reconciliation_required"] == 1 })
	// More time does not send it again.
	ctx, cancel := context.WithTimeout(e.ctx, 500*time.Millisecond)
	_ = d.Run(ctx)
	cancel()
	if n := e.sim.DispatchTotal(); n != 1 {
		t.Fatalf("%d dispatches reached GitHub, want exactly 1", n)
	}
}

func TestRejectedRequestsAreDeadLettered(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		workflow githubsim.Workflow
		file     string
		want     string
	}{
		{"workflow file missing (404)", githubsim.ReleaseWorkflow(), "other.yml", "HTTP 404"},
		{"no workflow_dispatch trigger (422)", githubsim.Workflow{Dispatchable: false}, "boardreadyops-release.yml", "HTTP 422"},
		{"inputs do not match (422)", githubsim.Workflow{Dispatchable: true, Inputs: []string{"version"}}, "boardreadyops-release.yml", "HTTP 422"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			e.sim.AddInstallation(55501, "octo-org")
			e.sim.AddRepository(55501, 1, "octo-org/hello-world", map[string]githubsim.Workflow{tt.file: tt.workflow})
			e.release(55501, "octo-org/hello-world", "v1.0.0")
			e.runUntil(e.dispatcher(10*time.Second), func() bool { return e.statuses()["github.workflow.dispatch/dead_letter"] == 1 })
			var lastError string
			_ = e.pool.QueryRow(e.ctx, `SELECT last_error FROM control_plane_outbox WHERE status = 'dead_letter'`).Scan(&lastError)
			if !strings.Contains(lastError, tt.want) || !strings.Contains(lastError, "rejected") {
				t.Fatalf("last error %q", lastError)
			}
		})
	}
}

// A worker that died after delivery_started_at: its lease expires; a dispatch goes to
// reconciliation_required and is never sent, a check-run creation goes back to the queue and is
// delivered once.
func TestDeadWorkerAfterDeliveryStarted(t *testing.T) {
	t.Parallel()
	store := &outbox.Store{}
	dieAfterStart := func(e *env, effectType string) {
		t.Helper()
		claimed, err := store.Claim(e.ctx, e.pool, "dead-worker", 10, time.Second)
		if err != nil || len(claimed) != 1 || claimed[0].EffectType != effectType {
			t.Fatalf("claim: %+v %v", claimed, err)
		}
		if _, err := store.StartDelivery(e.ctx, e.pool, claimed[0].ID, "dead-worker"); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("check run creation is delivered again, once", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		run := e.release(55501, "octo-org/a", "v1.0.0")
		dieAfterStart(e, outbox.EffectCheckRunCreate)
		e.runUntil(e.dispatcher(10*time.Second), func() bool { return e.statuses()["github.check_run.create/completed"] == 1 })
		if n := len(e.checkRuns(run)); n != 1 {
			t.Fatalf("%d check runs", n)
		}
	})
	t.Run("workflow dispatch requires reconciliation", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		e.release(55501, "octo-org/a", "v1.0.0")
		// The check run exists (recorded by an earlier worker); the dispatch is due.
		c, err := store.Claim(e.ctx, e.pool, "setup", 10, time.Minute)
		if err != nil || len(c) != 1 {
			t.Fatal(err)
		}
		if _, err := store.CompleteCheckRunCreate(e.ctx, e.pool, c[0].ID, "setup", 77); err != nil {
			t.Fatal(err)
		}
		dieAfterStart(e, outbox.EffectWorkflowDispatch)
		e.runUntil(e.dispatcher(10*time.Second), func() bool {
			return e.statuses()["github.workflow.dispatch/reconciliation_required"] == 1
		})
		if n := e.sim.DispatchTotal(); n != 0 {
			t.Fatalf("a started dispatch was sent again after its worker died (%d)", n)
		}
	})
}

// One installation is rate limited: its effects are deferred without spending attempts, while
// another installation's effects keep flowing.
func TestRateLimitedInstallationDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.sim.AddFault(githubsim.Fault{InstallationID: 1001, Operation: githubsim.OpCreateCheckRun, SecondaryRateLimit: true, RetryAfter: 60 * time.Second})
	for i := 0; i < 10; i++ {
		e.release(1001, "limited/repo", fmt.Sprintf("v1.%d.0", i))
		e.release(2002, "free/repo", fmt.Sprintf("v1.%d.0", i))
	}
	e.runUntil(e.dispatcher(10*time.Second), func() bool {
		return e.count(`SELECT count(*) FROM release_runs WHERE installation_id = 2002 AND status = 'running'`) == 10 &&
			e.count(`SELECT count(*) FROM control_plane_outbox WHERE installation_id = 1001 AND status = 'available' AND available_at > now() + interval '30 seconds'`) == 10
	})
	if n := e.count(`SELECT count(*) FROM control_plane_outbox WHERE installation_id = 1001 AND attempts > 0`); n != 0 {
		t.Fatalf("%d deferred effects spent attempts", n)
	}
	// The limited installation was asked at most a few times: later effects were deferred locally.
	if n := e.sim.Count(githubsim.OpCreateCheckRun, 403); n > 8 {
		t.Fatalf("%d rate-limited requests: the block was not honoured", n)
	}
}

// Three dispatchers on one database deliver 5,000 effects (2,500 check runs and 2,500 dispatches)
// with no duplicate and nothing left behind.
func TestThreeDispatchersNoDuplicates(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const runs = 2500
	if _, err := e.pool.Exec(e.ctx, `
		INSERT INTO installations (id, account_login, account_type) SELECT i, 'org-' || i, 'Organization' FROM generate_series(1, 5) i;
		INSERT INTO repositories (id, installation_id, full_name) SELECT r, 1 + r % 5, 'org-' || (1 + r % 5) || '/repo-' || r FROM generate_series(1, 50) r;`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `SELECT boardreadyops_release_run_create(1 + g % 50, 1 + (1 + g % 50) % 5, 'refs/tags/v' || g,
		'6dcb09b5b57875f334f61aebed695e2e4193db5e', 'boardreadyops-release.yml', 'BoardReadyOps release') FROM generate_series(1, $1) g`, runs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		d := e.dispatcher(30 * time.Second)
		wg.Add(1)
		go func() { defer wg.Done(); _ = d.Run(ctx) }()
	}
	deadline := time.Now().Add(120 * time.Second)
	for e.count(`SELECT count(*) FROM control_plane_outbox WHERE status = 'completed'`) < 3*runs {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("not delivered in time: %v", e.statuses())
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	// Three effects a run: the creation, the dispatch and the check run's update to running.
	if st := e.statuses(); len(st) != 3 || st["github.check_run.create/completed"] != runs || st["github.workflow.dispatch/completed"] != runs ||
		st["github.check_run.complete/completed"] != runs {
		t.Fatalf("outbox %v", st)
	}
	if n := e.sim.CheckRunCount(); n != runs {
		t.Fatalf("%d check runs on GitHub, want %d", n, runs)
	}
	if n := e.sim.DispatchTotal(); n != runs {
		t.Fatalf("%d dispatches on GitHub, want %d", n, runs)
	}
	if n := e.count(`SELECT count(*) FROM (SELECT execution_attempt_id FROM control_plane_outbox WHERE effect_type = 'github.workflow.dispatch'
		GROUP BY 1 HAVING count(*) > 1) x`); n != 0 {
		t.Fatalf("%d attempts with more than one dispatch", n)
	}
}

// Metrics carry labels from closed sets only.
func TestMetricLabelsAreClosedSets(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.sim.AddFault(githubsim.Fault{Operation: githubsim.OpDispatchWorkflow, ServerErrorRate: 1})
	e.release(55501, "octo-org/hello-world", "v1.0.0")
	d := e.dispatcher(10 * time.Second)
	e.runUntil(d, func() bool { return e.statuses()["github.workflow.dispatch/reconciliation_required"] == 1 })
	allowed := map[string]map[string]bool{
		"state": {"available": true, "leased": true, "retrying": true, "dead_letter": true, "reconciliation_required": true,
			"completed": true}, // leases_recovered_total: a check-run update a newer one replaced
		"effect_type": {"github.check_run.create": true, "github.workflow.dispatch": true, "github.check_run.complete": true, "github.workflow_run.read": true,
			"github.collaborator_permission.read": true},
		"outcome":      {"completed": true, "retried": true, "deferred": true, "dead_letter": true, "reconciliation_required": true, "lease_lost": true, "store_failed": true},
		"operation":    {"list_check_runs": true, "create_check_run": true, "update_check_run": true, "dispatch_workflow": true, "list_workflow_runs": true, "get_workflow_run": true, "get_collaborator_permission": true, "get_tag_commit": true},
		"status_class": {"2xx": true, "3xx": true, "4xx": true, "5xx": true, "rate_limited": true, "error": true},
	}
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "boardreadyops_") || mf.GetHelp() == "" {
			t.Errorf("metric %s: bad name or no help", mf.GetName())
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				seen++
				if !allowed[l.GetName()][l.GetValue()] {
					t.Errorf("metric %s has label %s=%q outside its closed set", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no labelled series gathered")
	}
}
