package worker_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/telemetry"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
	"github.com/boardreadyops/cloud/services/lifecycle/internal/handler"
	"github.com/boardreadyops/cloud/services/lifecycle/internal/worker"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	appID          = 424242
	installationID = 55501
	repoID         = 1296269
	sha            = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
)

var handlerConfig = handler.Config{
	TagPattern: "v*", WorkflowFile: "boardreadyops-release.yml", CheckRunName: "BoardReadyOps release",
	AppID: appID, MatchWindow: 15 * time.Minute,
}

type bundle struct {
	t      *testing.T
	ctx    context.Context
	pool   *pgxpool.Pool
	worker *worker.Worker
	reg    *prometheus.Registry
	now    atomic.Pointer[time.Time]
	seq    atomic.Int64
	// metricsReg, when set, receives the next worker's metrics.
	metricsReg *prometheus.Registry
}

// metricsRegistry rebuilds the worker with its metrics on reg.
func (b *bundle) metricsRegistry(reg *prometheus.Registry) {
	b.metricsReg = reg
	b.withWorker(nil)
}

// hookHandler runs hook before the real handler, to inject failures.
type hookHandler struct {
	h    *handler.Handlers
	hook func(handler.Job)
}

func (x hookHandler) Handle(ctx context.Context, tx pgx.Tx, j handler.Job) (handler.Result, error) {
	x.hook(j)
	return x.h.Handle(ctx, tx, j)
}

func setup(t *testing.T, opts ...func(*worker.Config)) *bundle {
	t.Helper()
	b := &bundle{t: t, ctx: context.Background(), pool: pgtest.NewPool(t), reg: prometheus.NewRegistry()}
	return b.withWorker(nil, opts...)
}

// withWorker (re)builds the worker; hook, when set, runs before each job's handler (to inject
// failures).
func (b *bundle) withWorker(hook func(handler.Job), opts ...func(*worker.Config)) *bundle {
	cfg := worker.Config{
		ID: fmt.Sprintf("test-worker-%d", b.seq.Add(1)), Concurrency: 2, BatchSize: 50, Lease: time.Minute,
		PollInterval: 20 * time.Millisecond, Listen: true, MaxBackoff: time.Second, RecoverInterval: time.Second,
		StatsInterval: 100 * time.Millisecond,
	}
	for _, o := range opts {
		o(&cfg)
	}
	h := handler.New(handlerConfig, slog.New(slog.DiscardHandler), func() time.Time {
		if p := b.now.Load(); p != nil {
			return *p
		}
		return time.Now()
	})
	var hh worker.Handler = h
	if cfg.Handler != nil {
		hh = cfg.Handler // an option's own handler (another configuration)
	}
	if hook != nil {
		hh = hookHandler{h: h, hook: hook}
	}
	reg := b.metricsReg
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	cfg.Handler, cfg.Metrics, cfg.Tracer = hh, worker.NewMetrics(reg), telemetry.NewTracerProvider().Tracer("test")
	w, err := worker.New(b.pool, cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	b.worker = w
	return b
}

// deliver stores a document as ingest does (inbox row + job) and returns the job id.
func (b *bundle) deliver(doc eventdoc.Document) int64 {
	b.t.Helper()
	payload, err := json.Marshal(doc)
	if err != nil {
		b.t.Fatal(err)
	}
	delivery := fmt.Sprintf("delivery-%d-%d", time.Now().UnixNano(), b.seq.Add(1))
	// Each delivery is its own raw body (as GitHub's are: ingest accepts a body once), so the
	// same document can be delivered twice, as a redelivery under a new id would be.
	sum := sha256.Sum256(append([]byte(delivery), payload...))
	var repo *int64
	if doc.Repository != nil {
		repo = &doc.Repository.ID
	}
	var jobID *int64
	err = b.pool.QueryRow(b.ctx, `SELECT job_id FROM boardreadyops_webhook_accept($1, $2, nullif($3, ''), nullif($4, 0), $5, $6, $7, $8)`,
		delivery, doc.Event, doc.Action, doc.InstallationID, repo, payload, sum[:],
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").Scan(&jobID)
	if err != nil || jobID == nil {
		b.t.Fatalf("deliver: %v", err)
	}
	return *jobID
}

// drain processes every due job.
func (b *bundle) drain() int {
	b.t.Helper()
	n, err := b.worker.ProcessAvailable(b.ctx)
	if err != nil {
		b.t.Fatal(err)
	}
	return n
}

func (b *bundle) count(query string, args ...any) int {
	b.t.Helper()
	var n int
	if err := b.pool.QueryRow(b.ctx, query, args...).Scan(&n); err != nil {
		b.t.Fatalf("%s: %v", query, err)
	}
	return n
}

func (b *bundle) jobStatus(id int64) string {
	b.t.Helper()
	var s string
	if err := b.pool.QueryRow(b.ctx, `SELECT status FROM control_plane_jobs WHERE id = $1`, id).Scan(&s); err != nil {
		b.t.Fatal(err)
	}
	return s
}

func repository() *eventdoc.Repository {
	return &eventdoc.Repository{ID: repoID, FullName: "octo-org/hello-world", Name: "hello-world", DefaultBranch: "main",
		OwnerLogin: "octo-org", OwnerType: "Organization"}
}

func pushTag(tag, after string) eventdoc.Document {
	return eventdoc.Document{Event: "push", InstallationID: installationID, Repository: repository(),
		Push: &eventdoc.Push{Ref: "refs/tags/" + tag, Before: "0000000000000000000000000000000000000000", After: after, Created: true}}
}

// repoEvent is a repository delivery of action for the test repository, changed by mutate.
func repoEvent(action string, mutate func(*eventdoc.Document)) eventdoc.Document {
	d := eventdoc.Document{Event: "repository", Action: action, InstallationID: installationID, Repository: repository()}
	if mutate != nil {
		mutate(&d)
	}
	return d
}

func installationEvent(action string, repos ...eventdoc.RepositoryRef) eventdoc.Document {
	return eventdoc.Document{Event: "installation", Action: action, InstallationID: installationID,
		Installation: &eventdoc.Installation{ID: installationID, AccountLogin: "octo-org", AccountType: "Organization", AppID: appID},
		Repositories: repos}
}

func rerequest(runID string, checkRunID int64) eventdoc.Document {
	return eventdoc.Document{Event: "check_run", Action: "rerequested", InstallationID: installationID, Repository: repository(),
		CheckRun: &eventdoc.CheckRun{ID: checkRunID, ExternalID: runID, AppID: appID, HeadSHA: sha, Name: "BoardReadyOps release",
			Status: "completed", Conclusion: "failure", SenderLogin: "octocat", SenderID: 583231, SenderType: "User"}}
}

// requestedAction is the check_run requested_action delivery of the button identifier.
func requestedAction(runID string, checkRunID int64, identifier string) eventdoc.Document {
	d := rerequest(runID, checkRunID)
	d.Action = "requested_action"
	d.CheckRun.RequestedAction = identifier
	return d
}

func workflowRun(action string, id int64, conclusion string) eventdoc.Document {
	return eventdoc.Document{Event: "workflow_run", Action: action, InstallationID: installationID, Repository: repository(),
		WorkflowRun: &eventdoc.WorkflowRun{ID: id, RunAttempt: 1, Status: map[bool]string{true: "completed", false: "in_progress"}[action == "completed"],
			Conclusion: conclusion, Path: ".github/workflows/boardreadyops-release.yml", HeadSHA: sha, Event: "workflow_dispatch",
			HTMLURL: fmt.Sprintf("https://github.com/octo-org/hello-world/actions/runs/%d", id)}}
}

// completeEffects plays the dispatcher's part for the effects lifecycle enqueued: check runs are
// created with checkRunID, dispatches recorded with workflowRunID.
func (b *bundle) completeEffects(checkRunID, workflowRunID int64) {
	b.t.Helper()
	b.playDispatcher(checkRunID, func(string) int64 { return workflowRunID })
}

// playDispatcher is completeEffects with each run's workflow run id from workflowRun(run id).
func (b *bundle) playDispatcher(checkRunID int64, workflowRun func(runID string) int64) {
	b.t.Helper()
	st := &outbox.Store{}
	for round := 0; round < 3; round++ {
		effects, err := st.Claim(b.ctx, b.pool, "fake-dispatcher", 100, time.Minute)
		if err != nil {
			b.t.Fatal(err)
		}
		for _, e := range effects {
			switch e.EffectType {
			case outbox.EffectCheckRunCreate:
				_, err = st.CompleteCheckRunCreate(b.ctx, b.pool, e.ID, "fake-dispatcher", checkRunID)
			case outbox.EffectWorkflowDispatch:
				if _, err = st.StartDelivery(b.ctx, b.pool, e.ID, "fake-dispatcher"); err == nil {
					err = st.CompleteWorkflowDispatch(b.ctx, b.pool, e.ID, "fake-dispatcher", workflowRun(e.ReleaseRunID))
				}
			case outbox.EffectCheckRunComplete:
				err = st.CompleteCheckRunComplete(b.ctx, b.pool, e.ID, "fake-dispatcher")
			}
			if err != nil {
				b.t.Fatalf("complete %s: %v", e.EffectType, err)
			}
		}
	}
}

func (b *bundle) runStatus(runID string) (run, attempt string, attempts int) {
	b.t.Helper()
	err := b.pool.QueryRow(b.ctx, `SELECT r.status, a.status, r.current_attempt FROM release_runs r
		JOIN execution_attempts a ON a.release_run_id = r.id AND a.number = r.current_attempt WHERE r.id = $1`, runID).
		Scan(&run, &attempt, &attempts)
	if err != nil {
		b.t.Fatal(err)
	}
	return run, attempt, attempts
}

// succeededRun is the run of tag v1.0.0 at sha, finished: check run 4001, workflow run 9001
// succeeded, every effect completed.
func (b *bundle) succeededRun() string {
	b.t.Helper()
	b.deliver(pushTag("v1.0.0", sha))
	b.drain()
	run := b.onlyRun()
	b.completeEffects(4001, 9001)
	b.deliver(workflowRun("completed", 9001, "success"))
	b.drain()
	b.completeEffects(0, 0)
	return run
}

func (b *bundle) onlyRun() string {
	b.t.Helper()
	var id string
	if err := b.pool.QueryRow(b.ctx, `SELECT id::text FROM release_runs`).Scan(&id); err != nil {
		b.t.Fatal(err)
	}
	return id
}
