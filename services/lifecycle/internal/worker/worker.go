// Package worker runs lifecycle's job loop: claim a batch of control-plane jobs (FOR UPDATE SKIP
// LOCKED, through the SQL functions), apply each in one transaction per batch with a savepoint per
// job, and commit each job's state change, its outbox effects and its completion together.
//
// A failing or panicking job is rolled back to its savepoint and retried with capped exponential
// backoff and jitter (dead-lettered once its attempts are exhausted) without disturbing the
// other jobs of its batch. Workers wake on NOTIFY boardreadyops_jobs and also poll, so they work
// behind a transaction-pooling PgBouncer with LISTEN disabled. Expired leases are recovered.
package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
	"github.com/boardreadyops/cloud/pkg/jobs"
	"github.com/boardreadyops/cloud/pkg/notify"
	"github.com/boardreadyops/cloud/pkg/queuerun"
	"github.com/boardreadyops/cloud/pkg/telemetry"
	"github.com/boardreadyops/cloud/services/lifecycle/internal/handler"
)

// Config is the worker's configuration and what it works with. A zero setting takes the default
// its comment names; New rejects the rest of what it cannot run with.
type Config struct {
	// ID names this process in leases (daemon.WorkerID). Required.
	ID string
	// Concurrency is the number of claim loops (each holds one connection while it works);
	// default 4.
	Concurrency int
	// BatchSize is the number of jobs claimed and committed together, at most 1000; default 100.
	BatchSize int
	// Lease is how long a claimed batch is owned; it must exceed the slowest batch. Default 1m.
	Lease time.Duration
	// PollInterval is how often an idle loop looks for work without a notification; default 1s.
	PollInterval time.Duration
	// Listen enables LISTEN boardreadyops_jobs (disable behind transaction-pooling PgBouncer).
	Listen bool
	// MaxBackoff caps the retry delay of a failing job; default 5m.
	MaxBackoff time.Duration
	// RecoverInterval is how often expired leases are recovered (±10 %); default a quarter of
	// the lease, at least 1s.
	RecoverInterval time.Duration
	// StatsInterval is how often the queue gauges and the stale-run gauge are refreshed (one
	// query each, ±10 %); default 5s.
	StatsInterval time.Duration
	// StaleAfter is the time without a change of state beyond which a release run that has not
	// finished counts as stale (gauge boardreadyops_release_runs_stale); at least 1m, default 1h.
	StaleAfter time.Duration
	// ReadBackAfter is how long a running release run's workflow run may stay quiet (no webhook,
	// no change) before it is read back from GitHub through a github.workflow_run.read effect
	// (boardreadyops_release_run_read_back_quiet, checked every minute); at least 5m, default 30m.
	ReadBackAfter time.Duration

	// Handler applies the jobs. Required.
	Handler Handler
	// Metrics receives the worker's instruments; nil registers them on a registry of their own
	// (nothing exports them).
	Metrics *Metrics
	// Tracer records the claim and job spans; nil records none.
	Tracer trace.Tracer
	// Logger receives the worker's logs; nil discards them.
	Logger *slog.Logger
	// OnEffects is called after a commit that enqueued outbox effects (wakes dispatchers); nil
	// does nothing.
	OnEffects func()
}

// withDefaults returns c with its zero settings defaulted, or why it cannot run.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.ID == "" {
		errs = append(errs, errors.New("worker: Config.ID is required"))
	}
	if c.Handler == nil {
		errs = append(errs, errors.New("worker: Config.Handler is required"))
	}
	if c.Concurrency < 0 || c.BatchSize < 0 {
		errs = append(errs, fmt.Errorf("worker: Config.Concurrency %d, BatchSize %d: must not be negative", c.Concurrency, c.BatchSize))
	}
	if c.StaleAfter != 0 && c.StaleAfter < time.Minute {
		errs = append(errs, fmt.Errorf("worker: Config.StaleAfter %v: at least 1m", c.StaleAfter))
	}
	if c.ReadBackAfter != 0 && c.ReadBackAfter < 5*time.Minute {
		errs = append(errs, fmt.Errorf("worker: Config.ReadBackAfter %v: at least 5m", c.ReadBackAfter))
	}
	if min(c.Lease, c.PollInterval, c.MaxBackoff, c.RecoverInterval, c.StatsInterval) < 0 {
		errs = append(errs, errors.New("worker: Config durations must not be negative"))
	}
	if c.BatchSize > 1000 {
		errs = append(errs, fmt.Errorf("worker: Config.BatchSize %d: at most 1000", c.BatchSize))
	}
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	c.Concurrency = cmp.Or(c.Concurrency, 4)
	c.BatchSize = cmp.Or(c.BatchSize, 100)
	c.Lease = cmp.Or(c.Lease, time.Minute)
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, 5*time.Minute)
	c.RecoverInterval = cmp.Or(c.RecoverInterval, max(c.Lease/4, time.Second))
	c.StatsInterval = cmp.Or(c.StatsInterval, 5*time.Second)
	c.StaleAfter = cmp.Or(c.StaleAfter, time.Hour)
	c.ReadBackAfter = cmp.Or(c.ReadBackAfter, 30*time.Minute)
	if c.Metrics == nil {
		c.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	if c.Tracer == nil {
		c.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.OnEffects == nil {
		c.OnEffects = func() {}
	}
	return c, nil
}

// Handler applies one job inside the batch transaction (*handler.Handlers in production).
type Handler interface {
	Handle(ctx context.Context, tx pgx.Tx, job handler.Job) (handler.Result, error)
}

// Finisher finishes the attempts of a batch's completed workflow runs together, before their
// jobs are handled (*handler.Handlers); with a Handler that is not one, every job is handled alone.
type Finisher interface {
	FinishAttempts(ctx context.Context, tx pgx.Tx, jobs []handler.Job) (map[int64]handler.Finish, error)
}

// Creator decides a batch's tag pushes together, their runs created with one call, before their
// jobs are handled (*handler.Handlers); with a Handler that is not one, every push is handled alone.
type Creator interface {
	CreateRuns(ctx context.Context, tx pgx.Tx, jobs []handler.Job) (map[int64]handler.Result, error)
}

// Worker is lifecycle's job loop.
type Worker struct {
	cfg      Config
	pool     *pgxpool.Pool
	jobs     *jobs.Store
	handlers Handler
	metrics  *Metrics
	tracer   trace.Tracer
	logger   *slog.Logger
	// onEffects is called after a commit that enqueued outbox effects (wakes dispatchers).
	onEffects func()
	run       *queuerun.Runner[jobs.Job]
	backoff   queuerun.Backoff
}

// New builds a worker on pool from cfg.
func New(pool *pgxpool.Pool, cfg Config) (*Worker, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, pool: pool, jobs: &jobs.Store{}, handlers: cfg.Handler, metrics: cfg.Metrics, tracer: cfg.Tracer,
		logger: cfg.Logger, onEffects: cfg.OnEffects,
		backoff: queuerun.Backoff{Base: time.Second, Max: cfg.MaxBackoff, Jitter: 0.2}}
	rc := queuerun.Config[jobs.Job, jobs.Recovered]{PollInterval: cfg.PollInterval, Metrics: cfg.Metrics.queue, Logger: cfg.Logger,
		Listen: cfg.Listen, ListenChannel: notify.Jobs, ListenConn: pool.Config().ConnConfig,
		Claim: queuerun.ClaimConfig[jobs.Job]{SpanName: "lifecycle.claim", Tracer: cfg.Tracer,
			Traceparent: func(j jobs.Job) *string { return j.Traceparent }},
		Recovery: w.recovery(), Stats: w.stats(), Tasks: []queuerun.Task{w.staleRuns(), w.readBackQuiet()}}
	if w.run, err = queuerun.New(rc); err != nil {
		return nil, err
	}
	return w, nil
}

// Run works until ctx ends, then finishes the batches in hand and returns.
func (w *Worker) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { w.run.Background(ctx) })
	for range w.cfg.Concurrency {
		wg.Go(func() { w.loop(ctx) })
	}
	wg.Wait()
	return nil
}

// Wake makes one idle loop look for work now.
func (w *Worker) Wake() { w.run.Wake() }

func (w *Worker) loop(ctx context.Context) {
	woken := false // this loop took a wake-up's ticket (queuerun.Waker) and has not claimed since
	for ctx.Err() == nil {
		wake := w.run.Next() // taken before the claim, so a wake-up during it is not lost
		batch, err := w.run.Claim(ctx, w.claim)
		if err != nil {
			if ctx.Err() == nil {
				w.logger.Warn("claim jobs failed", "error", err)
			}
			if woken {
				w.run.Wake() // the work it was woken for is another loop's while this one backs off
			}
			woken = false
			w.run.Sleep(ctx, nil)
			continue
		}
		woken = false
		if len(batch) == 0 {
			woken = w.run.Sleep(ctx, wake)
			continue
		}
		if len(batch) == w.cfg.BatchSize {
			w.run.Wake() // a whole batch: there may be more, for another loop to claim meanwhile
		}
		// A claimed batch is finished even when shutdown begins: within its lease, not ctx.
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.Lease)
		w.process(bctx, batch)
		cancel()
	}
}

func (w *Worker) claim(ctx context.Context) ([]jobs.Job, error) {
	return w.jobs.Claim(ctx, w.pool, w.cfg.ID, w.cfg.BatchSize, w.cfg.Lease)
}

// ProcessAvailable claims and processes batches until no job is due, and returns how many jobs it
// processed. The loops of Run do the same continuously; tests and one-shot tools use this.
func (w *Worker) ProcessAvailable(ctx context.Context) (int, error) {
	total := 0
	for {
		batch, err := w.claim(ctx)
		if err != nil {
			return total, err
		}
		if len(batch) == 0 {
			return total, nil
		}
		w.process(ctx, batch)
		total += len(batch)
	}
}

// outcome is one job's result, applied to metrics after the batch commits.
type outcome struct {
	job     jobs.Job
	result  string // handler outcome, or deferred / retried / dead_letter
	effects int
	traceID string // the job span's, for the lag exemplar
	// otherCommit: the job's workflow ran another commit than its release run's.
	otherCommit bool
}

func (w *Worker) process(ctx context.Context, batch []jobs.Job) {
	docs, err := w.loadInbox(ctx, batch)
	if err != nil {
		w.logger.Error("load inbox rows failed; the batch returns to the queue when its lease expires", "error", err)
		return
	}
	// New installations and repositories first, in id order and committed at once (deadlocks).
	prepDocs := make([]eventdoc.Document, 0, len(docs))
	for _, r := range docs {
		if r.err == nil {
			prepDocs = append(prepDocs, r.doc)
		}
	}
	if err := handler.Prepare(ctx, w.pool, prepDocs); err != nil {
		w.logger.Warn("recording new repositories before the batch failed; the batch records them itself", "error", err)
	}
	// Fast path: the whole batch in one transaction without savepoints. Failures are rare; when a
	// job fails, the batch is redone with a savepoint per job so the failure stays its own.
	outs, err := w.processTx(ctx, batch, docs, false)
	if errors.Is(err, errJobFailed) {
		outs, err = w.processTx(ctx, batch, docs, true)
	}
	if err != nil {
		// The batch transaction itself failed (connection lost, serialization): fall back to one
		// transaction per job, so a single bad job cannot keep failing the batch.
		w.logger.Warn("batch transaction failed; processing its jobs one by one", "error", err, "jobs", len(batch))
		outs = outs[:0]
		for _, j := range batch {
			o, err := w.processTx(ctx, []jobs.Job{j}, docs, true)
			if err != nil {
				w.logger.Error("job transaction failed; it returns to the queue when its lease expires", "job_id", j.ID, "error", err)
				continue
			}
			outs = append(outs, o...)
		}
	}
	effects := 0
	for _, o := range outs {
		effects += o.effects
		w.metrics.processed.WithLabelValues(kindLabel(o.job.Kind), o.result).Inc()
		if o.result == handler.OutcomeUnmatched {
			w.metrics.unmatched.Inc()
		}
		if o.otherCommit {
			w.metrics.otherCommit.Inc()
		}
		if o.result != resultDeferred && o.result != resultRetried {
			telemetry.ObserveTraceID(w.metrics.lag, time.Since(o.job.CreatedAt).Seconds(), o.traceID)
		}
	}
	if effects > 0 {
		w.metrics.effects.Add(float64(effects))
		w.onEffects()
	}
}

// Results beyond the handler's outcomes.
const (
	resultDeferred   = "deferred"
	resultRetried    = "retried"
	resultDeadLetter = "dead_letter"
)

type inboxRow struct {
	doc        eventdoc.Document
	receivedAt time.Time
	err        error
}

func (w *Worker) loadInbox(ctx context.Context, batch []jobs.Job) (map[int64]inboxRow, error) {
	ids := make([]int64, len(batch))
	for i, j := range batch {
		ids[i] = j.InboxID
	}
	// Planned at every call (an unnamed statement), never from a cached plan: a plan cached while
	// the inbox was a page or two (a new installation, the first minute of a load) is a sequential
	// scan, and a connection would keep it as the inbox grew until autovacuum analyzed the table.
	rows, err := w.pool.Query(ctx, `SELECT id, payload, received_at FROM webhook_inbox WHERE id = ANY($1)`,
		pgx.QueryExecModeExec, ids)
	if err != nil {
		return nil, fmt.Errorf("read inbox rows: %w", err)
	}
	defer rows.Close()
	out := make(map[int64]inboxRow, len(batch))
	for rows.Next() {
		var id int64
		var payload []byte
		var r inboxRow
		if err := rows.Scan(&id, &payload, &r.receivedAt); err != nil {
			return nil, fmt.Errorf("read inbox rows: %w", err)
		}
		if err := json.Unmarshal(payload, &r.doc); err != nil {
			r.err = fmt.Errorf("stored document does not decode: %w", err)
		}
		out[id] = r
	}
	return out, rows.Err()
}

// errJobFailed aborts a batch run without savepoints: one of its jobs failed.
var errJobFailed = errors.New("a job of the batch failed")

func (w *Worker) processTx(ctx context.Context, batch []jobs.Job, docs map[int64]inboxRow, savepoints bool) ([]outcome, error) {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	// The jobs handled ahead of their turn (together) start their spans first: what they enqueue
	// carries their own job's span, as when handled alone. The others start theirs when they are
	// handled.
	jobCtxs, spans := make([]context.Context, len(batch)), make([]trace.Span, len(batch))
	ended := 0 // processJob ends each job's span; a failed batch ends the ones started early
	defer func() {
		for _, span := range spans[ended:] {
			if span != nil {
				span.End()
			}
		}
	}()
	if err := w.lockMemberships(ctx, tx, batch, docs); err != nil {
		return nil, err
	}
	var early map[int64]ahead
	if !savepoints {
		early = w.together(ctx, tx, batch, docs, jobCtxs, spans)
	}
	outs := make([]outcome, 0, len(batch))
	done := make([]int64, 0, len(batch))
	for i, j := range batch {
		if spans[i] == nil {
			jobCtxs[i], spans[i] = w.startJob(ctx, j)
		}
		o, ok, err := w.processJob(jobCtxs[i], spans[i], tx, j, docs[j.InboxID], early[j.ID], savepoints)
		ended = i + 1
		if err != nil {
			return nil, err
		}
		if ok {
			done = append(done, j.ID)
		}
		outs = append(outs, o)
	}
	if err := w.jobs.CompleteBatch(ctx, tx, done, w.cfg.ID); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return outs, nil
}

// lockMemberships takes the locks the batch's membership changes will take, in one order
// (handler.LockMemberships).
func (w *Worker) lockMemberships(ctx context.Context, tx pgx.Tx, batch []jobs.Job, docs map[int64]inboxRow) error {
	var ds []eventdoc.Document
	for _, j := range batch {
		if row := docs[j.InboxID]; row.err == nil {
			ds = append(ds, row.doc)
		}
	}
	return handler.LockMemberships(ctx, tx, ds)
}

// startJob starts a job's span, a child of the traceparent the job carries.
func (w *Worker) startJob(ctx context.Context, j jobs.Job) (context.Context, trace.Span) {
	var traceparent string
	if j.Traceparent != nil {
		traceparent = *j.Traceparent
	}
	return w.tracer.Start(telemetry.ContextWithTraceparent(ctx, traceparent), "lifecycle.job",
		trace.WithAttributes(attribute.Int64("boardreadyops.job_id", j.ID), attribute.String("boardreadyops.job_kind", j.Kind),
			attribute.Int("boardreadyops.attempt", j.Attempts)))
}

// ahead is what a set-based call did for a job before its turn in the batch: the attempt of a
// completed workflow run finished (finished), or a push decided, its run created (created).
type ahead struct {
	finished *handler.Finish
	created  *handler.Result
}

// together handles some of a fast-path batch's jobs ahead of their turn, each kind with one
// set-based call under a savepoint: the completed workflow runs' attempts are finished
// (Finisher), then the pushes are decided and their runs created (Creator). If a call fails, its
// work is rolled back and its jobs are handled alone, as without it. A batch redone with
// savepoints handles each job alone.
//
// Handling a job ahead of the jobs before it in the batch must change nothing they see, so it
// takes only jobs up to the batch's first job that is neither a completed workflow run nor a push:
// a push only creates a run of its own, and a completed workflow run only finishes its own; a
// check-run request, an installation or repository event or another workflow_run event may depend
// on a run not being finished or not existing yet. Among the pushes, the first in the batch's
// order creates a run that two name, as alone. It starts the spans of the jobs it passes
// (jobCtxs, spans), so that what they enqueue carries their own job's span.
func (w *Worker) together(ctx context.Context, tx pgx.Tx, batch []jobs.Job, docs map[int64]inboxRow,
	jobCtxs []context.Context, spans []trace.Span) map[int64]ahead {
	if len(batch) < 2 {
		return nil
	}
	var finishes, pushes []int
	for i, j := range batch {
		row := docs[j.InboxID]
		if row.err != nil || row.receivedAt.IsZero() {
			break
		}
		if handler.FinishesTogether(&row.doc) {
			finishes = append(finishes, i)
		} else if row.doc.Event == eventdoc.EventPush {
			pushes = append(pushes, i)
		} else {
			break
		}
	}
	out := map[int64]ahead{}
	if finisher, ok := w.handlers.(Finisher); ok && len(finishes) >= 2 { // alone: the handler's own call is the same work
		var finished map[int64]handler.Finish
		if w.callAhead(ctx, tx, batch, docs, finishes, jobCtxs, spans, "finishing the batch's attempts together",
			func(sp pgx.Tx, js []handler.Job) (err error) {
				finished, err = finisher.FinishAttempts(ctx, sp, js)
				return err
			}) {
			keepAhead(out, finished, func(a *ahead, f *handler.Finish) { a.finished = f })
		}
	}
	if creator, ok := w.handlers.(Creator); ok && len(pushes) >= 2 {
		var created map[int64]handler.Result
		if w.callAhead(ctx, tx, batch, docs, pushes, jobCtxs, spans, "creating the batch's release runs together",
			func(sp pgx.Tx, js []handler.Job) (err error) {
				created, err = creator.CreateRuns(ctx, sp, js)
				return err
			}) {
			keepAhead(out, created, func(a *ahead, r *handler.Result) { a.created = r })
		}
	}
	return out
}

// keepAhead records each job's result of a call made ahead in out, with set.
func keepAhead[T any](out map[int64]ahead, results map[int64]T, set func(*ahead, *T)) {
	for id, r := range results {
		a := out[id]
		set(&a, &r)
		out[id] = a
	}
}

// callAhead starts the spans of the picked jobs of batch and runs call on them under a savepoint
// of tx. It reports whether call's work stands: false when call failed or panicked (the
// savepoint is rolled back and the jobs are handled alone) or the savepoint could not be
// released (the transaction is unusable: the batch is redone job by job).
func (w *Worker) callAhead(ctx context.Context, tx pgx.Tx, batch []jobs.Job, docs map[int64]inboxRow, picked []int,
	jobCtxs []context.Context, spans []trace.Span, what string, call func(sp pgx.Tx, js []handler.Job) error) bool {
	js := make([]handler.Job, 0, len(picked))
	for _, i := range picked {
		j, row := batch[i], docs[batch[i].InboxID]
		if spans[i] == nil {
			jobCtxs[i], spans[i] = w.startJob(ctx, j)
		}
		js = append(js, handler.Job{ID: j.ID, Worker: w.cfg.ID, Kind: j.Kind, Attempts: j.Attempts, ReceivedAt: row.receivedAt,
			Document: row.doc, Traceparent: telemetry.Traceparent(jobCtxs[i])})
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		w.logger.Warn("savepoint for "+what+" failed; each job is handled alone", "error", err)
		return false
	}
	if err := callRecovered(sp, js, call); err != nil {
		w.logger.Warn(what+" failed; each job is handled alone", "jobs", len(js), "error", err)
		if rerr := sp.Rollback(ctx); rerr != nil {
			w.logger.Warn("rolling back to the savepoint failed; the batch transaction fails and its jobs are handled one by one", "error", rerr)
		}
		return false
	}
	if err := sp.Commit(ctx); err != nil {
		// The transaction is unusable: the next statement fails and the batch is redone job by job.
		w.logger.Warn("releasing the savepoint after "+what+" failed", "error", err)
		return false
	}
	return true
}

// callRecovered runs call, turning a panic into an error: one poison job never takes the process
// down, as in handle.
func callRecovered(sp pgx.Tx, js []handler.Job, call func(sp pgx.Tx, js []handler.Job) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return call(sp, js)
}

// processJob applies one job; ok reports that it is to be completed with the batch. Without
// savepoints a job failure returns errJobFailed (the caller redoes the batch with savepoints); with
// them the failure is rolled back to the job's savepoint and recorded (retry, defer, dead letter).
// Any other error means the batch transaction is unusable. ctx is the job's, with span (startJob),
// which processJob ends.
func (w *Worker) processJob(ctx context.Context, span trace.Span, tx pgx.Tx, j jobs.Job, row inboxRow, early ahead, savepoints bool) (outcome, bool, error) {
	defer span.End()

	if !savepoints {
		res, herr := w.handle(ctx, tx, j, row, early)
		if herr != nil {
			return outcome{}, false, errJobFailed
		}
		span.SetAttributes(attribute.String("boardreadyops.outcome", res.Outcome))
		return outcome{job: j, result: res.Outcome, effects: res.Effects, traceID: telemetry.TraceID(ctx), otherCommit: res.OtherCommit}, true, nil
	}

	sp, err := tx.Begin(ctx)
	if err != nil {
		return outcome{}, false, fmt.Errorf("savepoint: %w", err)
	}
	res, herr := w.handle(ctx, sp, j, row, ahead{})
	if herr == nil {
		if err := sp.Commit(ctx); err != nil {
			return outcome{}, false, fmt.Errorf("release savepoint: %w", err)
		}
		span.SetAttributes(attribute.String("boardreadyops.outcome", res.Outcome))
		return outcome{job: j, result: res.Outcome, effects: res.Effects, traceID: telemetry.TraceID(ctx), otherCommit: res.OtherCommit}, true, nil
	}
	if err := sp.Rollback(ctx); err != nil {
		return outcome{}, false, fmt.Errorf("roll back to savepoint: %w", err)
	}

	var deferErr *handler.DeferError
	if errors.As(herr, &deferErr) {
		if err := w.jobs.Defer(ctx, tx, j.ID, w.cfg.ID, deferErr.Until, deferErr.Reason); err != nil {
			return outcome{}, false, err
		}
		span.SetAttributes(attribute.String("boardreadyops.outcome", resultDeferred))
		return outcome{job: j, result: resultDeferred}, false, nil
	}
	span.RecordError(herr)
	span.SetStatus(codes.Error, "job failed")
	if row.err != nil || errors.Is(herr, errPermanent) {
		if err := w.jobs.DeadLetter(ctx, tx, j.ID, w.cfg.ID, herr.Error()); err != nil {
			return outcome{}, false, err
		}
		w.logger.Error("job dead-lettered", "job_id", j.ID, "kind", j.Kind, "error", herr)
		return outcome{job: j, result: resultDeadLetter, traceID: telemetry.TraceID(ctx)}, false, nil
	}
	status, err := w.jobs.Retry(ctx, tx, j.ID, w.cfg.ID, herr.Error(), time.Now().Add(w.backoff.Delay(j.Attempts)))
	if err != nil {
		return outcome{}, false, err
	}
	if status == jobs.StatusDeadLetter {
		w.logger.Error("job dead-lettered: attempts exhausted", "job_id", j.ID, "kind", j.Kind, "attempts", j.Attempts, "error", herr)
		return outcome{job: j, result: resultDeadLetter}, false, nil
	}
	w.logger.Warn("job failed; retrying", "job_id", j.ID, "kind", j.Kind, "attempt", j.Attempts, "error", herr)
	return outcome{job: j, result: resultRetried}, false, nil
}

var errPermanent = errors.New("permanent job failure")

// handle runs the handler, turning a panic into an error so one poison job never takes the
// process (or its batch) down.
func (w *Worker) handle(ctx context.Context, tx pgx.Tx, j jobs.Job, row inboxRow, early ahead) (res handler.Result, err error) {
	if row.err != nil {
		return handler.Result{}, fmt.Errorf("%w: %w", errPermanent, row.err)
	}
	if row.receivedAt.IsZero() {
		return handler.Result{}, fmt.Errorf("%w: inbox row %d is missing", errPermanent, j.InboxID)
	}
	defer func() {
		if p := recover(); p != nil {
			w.logger.Error("job handler panicked", "job_id", j.ID, "kind", j.Kind, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return w.handlers.Handle(ctx, tx, handler.Job{
		ID: j.ID, Worker: w.cfg.ID, Kind: j.Kind, Attempts: j.Attempts, ReceivedAt: row.receivedAt, Document: row.doc,
		Traceparent: telemetry.Traceparent(ctx), Finished: early.finished, Created: early.created,
	})
}

func kindLabel(kind string) string {
	if eventdoc.Handled(kind) {
		return kind
	}
	return kindOther
}

// kindOther is the kind label of a job whose kind is not a handled event.
const kindOther = "other"
