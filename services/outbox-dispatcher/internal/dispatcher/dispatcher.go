// Package dispatcher delivers outbox effects to GitHub: it claims due effects (FOR UPDATE SKIP
// LOCKED, through the SQL functions), records delivery_started_at durably before each request,
// performs the request and commits the matching transition — completion, retry, deferral,
// dead letter or reconciliation, by the failure's class.
//
// Concurrency is bounded overall and per installation, and one installation's mutations are
// paced, across replicas, through the claim (docs/dispatcher.md, "Rate limits and pacing"). A
// rate-limited installation is blocked in PostgreSQL for every replica, its effects deferred
// without spending attempts and without holding up other installations. Expired leases are
// recovered periodically; queue gauges come from one query per interval.
package dispatcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/boardreadyops/cloud/pkg/groupcommit"
	"github.com/boardreadyops/cloud/pkg/notify"
	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/queuerun"
	"github.com/boardreadyops/cloud/pkg/telemetry"
)

// Config is the dispatcher's configuration and what it works with. A zero setting takes the
// default its comment names; New rejects the rest of what it cannot run with.
type Config struct {
	// WorkerID names this process in leases (daemon.WorkerID). Required.
	WorkerID string
	// Concurrency is the number of deliveries in flight at once, across installations; default 32.
	Concurrency int
	// PerInstallation is the number in flight for one installation, across replicas, at most
	// Concurrency; default 1 (GitHub asks for serial requests).
	PerInstallation int
	// Unpaced turns per-installation pacing off (rate-limit blocks are still honoured).
	Unpaced bool
	// MutationInterval is the least time between the end of one delivery of an installation and
	// the claim of its next (GitHub asks for at least a second between mutating requests); zero
	// for none.
	MutationInterval time.Duration
	// RateLimitBackoff is the first block of an installation after a rate limit for which GitHub
	// named no time (GitHub: at least a minute); it doubles per repeated limit up to
	// RateLimitMaxBackoff. Defaults 1m and 16m.
	RateLimitBackoff    time.Duration
	RateLimitMaxBackoff time.Duration
	// BatchSize caps one claim; default 32. A batch larger than Concurrency is lowered to it.
	BatchSize int
	// Lease of a claimed effect; longer than the slowest request plus its recording. Default 1m.
	Lease time.Duration
	// ClaimFill is how long a backlogged dispatcher waits for a whole batch of free slots
	// before claiming fewer (0: never waits).
	ClaimFill time.Duration
	// PollInterval is how often an idle dispatcher looks for work without a notification;
	// default 1s.
	PollInterval time.Duration
	// Listen enables LISTEN boardreadyops_outbox.
	Listen bool
	// MaxBackoff caps the retry delay of a failing effect; default 10m.
	MaxBackoff time.Duration
	// RecoverInterval is how often expired leases are recovered (±10 %); default a quarter of
	// the lease, from 1s to 15s.
	RecoverInterval time.Duration
	// StatsInterval is how often the queue gauges are refreshed (±10 %); default 5s.
	StatsInterval time.Duration
	// CheckRunName is used when a payload carries none; default "BoardReadyOps release".
	CheckRunName string

	// GitHub performs the requests. Required.
	GitHub GitHub
	// Metrics receives the dispatcher's instruments; nil registers them on a registry of their
	// own (nothing exports them).
	Metrics *Metrics
	// Tracer records the claim and delivery spans; nil records none.
	Tracer trace.Tracer
	// Logger receives the dispatcher's logs; nil discards them.
	Logger *slog.Logger
}

// withDefaults returns c with its zero settings defaulted, or why it cannot run.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.WorkerID == "" {
		errs = append(errs, errors.New("dispatcher: Config.WorkerID is required"))
	}
	if c.GitHub == nil {
		errs = append(errs, errors.New("dispatcher: Config.GitHub is required"))
	}
	if min(c.Concurrency, c.PerInstallation, c.BatchSize) < 0 {
		errs = append(errs, fmt.Errorf("dispatcher: Config.Concurrency %d, PerInstallation %d, BatchSize %d: must not be negative",
			c.Concurrency, c.PerInstallation, c.BatchSize))
	}
	if min(c.Lease, c.ClaimFill, c.PollInterval, c.MaxBackoff, c.RecoverInterval, c.StatsInterval,
		c.MutationInterval, c.RateLimitBackoff, c.RateLimitMaxBackoff) < 0 {
		errs = append(errs, errors.New("dispatcher: Config durations must not be negative"))
	}
	c.Concurrency = cmp.Or(c.Concurrency, 32)
	if c.PerInstallation > c.Concurrency {
		errs = append(errs, fmt.Errorf("dispatcher: Config.PerInstallation %d: at most the concurrency (%d)", c.PerInstallation, c.Concurrency))
	}
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	c.PerInstallation = cmp.Or(c.PerInstallation, 1)
	if c.Unpaced {
		c.PerInstallation = c.Concurrency // the in-process bound only
	}
	c.RateLimitBackoff = cmp.Or(c.RateLimitBackoff, time.Minute)
	c.RateLimitMaxBackoff = max(cmp.Or(c.RateLimitMaxBackoff, 16*time.Minute), c.RateLimitBackoff)
	c.BatchSize = min(cmp.Or(c.BatchSize, 32), c.Concurrency)
	c.Lease = cmp.Or(c.Lease, time.Minute)
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, 10*time.Minute)
	c.RecoverInterval = cmp.Or(c.RecoverInterval, max(min(c.Lease/4, 15*time.Second), time.Second))
	c.StatsInterval = cmp.Or(c.StatsInterval, 5*time.Second)
	c.CheckRunName = cmp.Or(c.CheckRunName, "BoardReadyOps release")
	if c.Metrics == nil {
		c.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	if c.Tracer == nil {
		c.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// commitOverlap is how long the dispatcher's second group-commit executor waits for the first's
// batch before committing beside it: a few batches' time, far below a lease.
const commitOverlap = 50 * time.Millisecond

// Dispatcher delivers outbox effects.
type Dispatcher struct {
	cfg       Config
	pool      *pgxpool.Pool
	store     *outbox.Store
	github    GitHub
	metrics   *Metrics
	tracer    trace.Tracer
	logger    *slog.Logger
	limiter   *limiter
	completer *groupcommit.Committer

	slots   chan struct{}
	run     *queuerun.Runner[outbox.Effect]
	backoff queuerun.Backoff
	budgets budgets
}

// New builds a dispatcher on pool from cfg.
func New(pool *pgxpool.Pool, cfg Config) (*Dispatcher, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Dispatcher{cfg: cfg, pool: pool, store: &outbox.Store{}, github: cfg.GitHub, metrics: cfg.Metrics, tracer: cfg.Tracer,
		logger: cfg.Logger, limiter: newLimiter(cfg.PerInstallation), completer: groupcommit.New(pool, cfg.Logger, cfg.Concurrency, 30*time.Second).Overlap(commitOverlap),
		slots: make(chan struct{}, cfg.Concurrency), backoff: queuerun.Backoff{Base: 2 * time.Second, Max: cfg.MaxBackoff, Jitter: 0.2}}
	rc := queuerun.Config[outbox.Effect, outbox.Recovered]{PollInterval: cfg.PollInterval, Metrics: cfg.Metrics.queue, Logger: cfg.Logger,
		Listen: cfg.Listen, ListenChannel: notify.Outbox, ListenConn: pool.Config().ConnConfig,
		Claim: queuerun.ClaimConfig[outbox.Effect]{SpanName: "outbox.claim", Tracer: cfg.Tracer,
			Traceparent: func(e outbox.Effect) *string { return e.Traceparent }},
		Recovery: d.recovery(), Stats: d.stats()}
	if d.run, err = queuerun.New(rc); err != nil {
		return nil, err
	}
	return d, nil
}

// Run delivers until ctx ends, then waits for the deliveries in flight and returns.
func (d *Dispatcher) Run(ctx context.Context) error {
	var bg sync.WaitGroup
	bg.Go(func() { d.run.Background(ctx) })
	// Two executors taking turns (groupcommit.Overlap): what queues while one commits is its next
	// batch — two committing at once split the group commits of a claimed batch in two or three and
	// cost PostgreSQL about a fifth more per effect (docs/performance.md, "One group commit at a
	// time") — and a batch that takes longer than the overlap (a statement waiting for a lock) does
	// not hold up every delivery: the other executor commits beside it.
	quit := make(chan struct{})
	var executors sync.WaitGroup
	for range 2 {
		executors.Go(func() { d.completer.Run(quit) })
	}
	// Concurrency long-lived workers deliver what the loop claims: a goroutine per effect would
	// grow a fresh stack for every delivery (stack copying was a tenth of the dispatcher's CPU).
	work := make(chan claimed, d.cfg.Concurrency)
	var workers sync.WaitGroup
	deliveries := context.WithoutCancel(ctx) // shutdown does not cut a delivery short
	for range d.cfg.Concurrency {
		workers.Go(func() {
			for c := range work {
				d.handle(deliveries, c.Effect, c.deadline)
				<-d.slots
			}
		})
	}
	d.loop(ctx, work)
	close(work)
	workers.Wait()
	close(quit)
	executors.Wait()
	bg.Wait()
	return nil
}

// Wake makes an idle dispatcher look for work now.
func (d *Dispatcher) Wake() { d.run.Wake() }

// loop claims while there is room and hands each effect to a worker.
//
// It holds one concurrency slot per effect it claims. While the queue is backlogged (the last
// claim, of at least half a batch, got all it asked for) it waits up to Config.ClaimFill for a whole batch of slots before
// claiming, so that a busy dispatcher claims and completes in full batches instead of one small
// transaction per freed slot; otherwise it claims for whatever is free at once.
func (d *Dispatcher) loop(ctx context.Context, work chan<- claimed) {
	backlog := false
	for ctx.Err() == nil {
		held := d.acquire(ctx, d.cfg.BatchSize, backlog)
		if held == 0 {
			return
		}
		wake := d.run.Next()
		// The leases run from the claim statement's start on the database's clock, which is no
		// earlier than this: a delivery ends by then, measured here, before its lease can expire.
		deadline := time.Now().Add(d.cfg.Lease)
		batch, err := d.run.Claim(ctx, func(ctx context.Context) ([]outbox.Effect, error) {
			return d.store.ClaimPaced(ctx, d.pool, d.cfg.WorkerID, held, d.cfg.Lease, d.pace())
		})
		for range held - len(batch) {
			<-d.slots
		}
		// Backlogged: a claim of at least half a batch got all it asked for. A small claim coming
		// back full says little (most slots are busy with slow requests, where waiting for a whole
		// batch would only delay the next claim).
		backlog = err == nil && len(batch) == held && 2*held >= d.cfg.BatchSize
		if err != nil || len(batch) == 0 {
			if err != nil && ctx.Err() == nil {
				d.logger.Warn("claim effects failed", "error", err)
			}
			d.run.Sleep(ctx, wake)
			continue
		}
		for _, e := range batch {
			work <- claimed{e, deadline} // never blocks: it holds a slot for each, and the channel has room for all slots
		}
	}
}

// acquire takes between 1 and want concurrency slots: it waits for the first; then, when fill is
// set, up to Config.ClaimFill for the rest, else only those free now. 0 means ctx ended (and no
// slot is held).
func (d *Dispatcher) acquire(ctx context.Context, want int, fill bool) int {
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	held := 1
	if fill && d.cfg.ClaimFill > 0 && held < want {
		t := time.NewTimer(d.cfg.ClaimFill)
		defer t.Stop()
		for held < want {
			select {
			case d.slots <- struct{}{}:
				held++
			case <-t.C:
				return held + d.takeFree(want-held)
			case <-ctx.Done():
				// Shutting down: claim nothing more.
				for range held {
					<-d.slots
				}
				return 0
			}
		}
		return held
	}
	return held + d.takeFree(want-held)
}

// takeFree takes up to n slots that are free now, without waiting.
func (d *Dispatcher) takeFree(n int) int {
	for i := 0; i < n; i++ {
		select {
		case d.slots <- struct{}{}:
		default:
			return i
		}
	}
	return n
}

// claimed is an effect handed to a worker, with the time its delivery must end by.
type claimed struct {
	outbox.Effect
	deadline time.Time
}

// handle delivers one claimed effect by deadline, or defers it when its installation is rate
// limited or at its concurrency limit.
func (d *Dispatcher) handle(ctx context.Context, e outbox.Effect, deadline time.Time) {
	var tp string
	if e.Traceparent != nil {
		tp = *e.Traceparent
	}
	ctx, span := d.tracer.Start(telemetry.ContextWithTraceparent(ctx, tp), "outbox.deliver")
	defer span.End()
	// Attributes only for a span that records them (an exporter is configured): the tracer's Start
	// with them, for telemetry.IDs' spans that record nothing, was 6.8 % of the dispatcher's CPU.
	recording := span.IsRecording()
	if recording {
		span.SetAttributes(attribute.Int64("boardreadyops.outbox_id", e.ID), attribute.String("boardreadyops.effect_type", e.EffectType),
			attribute.String("boardreadyops.release_run_id", e.ReleaseRunID), attribute.Int64("github.installation_id", e.InstallationID),
			attribute.Int("boardreadyops.attempt", e.Attempts))
	}
	// The whole delivery, request and recording, ends before the lease can expire, counted from
	// before the claim (a claim that waited for a lock started its leases then): a request still out
	// when lease recovery gives the effect to another worker could be made twice (a second check
	// run). Shutdown does not cut it short.
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	d.metrics.inFlight.Inc()
	defer d.metrics.inFlight.Dec()

	var outcome string
	var p payload // decoded for a delivery, not for a deferral
	if time.Until(deadline) < d.cfg.Lease/2 {
		// The claim took half the lease (it waited for a lock): too little is left for a request
		// and its recording. Given back unsent, without spending an attempt, in time of its own
		// (the claim may have taken the whole lease).
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Lease/2)
		outcome = d.outcomeOf(e, d.store.Release(rctx, d.pool, e.ID, d.cfg.WorkerID), OutcomeDeferred)
		rcancel()
	} else if !d.limiter.acquire(e.InstallationID) {
		outcome = d.outcomeOf(e, d.store.Defer(ctx, d.pool, e.ID, d.cfg.WorkerID, time.Now().Add(200*time.Millisecond),
			"installation concurrency limit"), OutcomeDeferred)
	} else {
		var perr error
		p, perr = decodePayload(e.Payload)
		outcome = d.deliver(ctx, e, p, perr)
		d.limiter.release(e.InstallationID)
	}
	if outcome == OutcomeCompleted {
		d.paceReleased() // with the completion, in its transaction
	} else {
		d.releasePace(ctx, e)
	}
	if recording {
		span.SetAttributes(attribute.String("boardreadyops.outcome", outcome))
	}
	d.metrics.processed.WithLabelValues(e.EffectType, outcome).Inc()
	if outcome == OutcomeCompleted {
		telemetry.Observe(ctx, d.metrics.lag.WithLabelValues(e.EffectType), time.Since(e.CreatedAt).Seconds())
		d.metrics.observeSLO(ctx, e, p, time.Now())
	}
}

// limiter counts one process's deliveries in flight per installation. The claim bounds them
// across replicas; this holds the bound within the process even when a lease expired and an
// installation's count in PostgreSQL was reset before its delivery ended.
type limiter struct {
	per    int
	mu     sync.Mutex
	active map[int64]int
}

func newLimiter(per int) *limiter {
	return &limiter{per: per, active: map[int64]int{}}
}

func (l *limiter) acquire(id int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.active[id] >= l.per {
		return false
	}
	l.active[id]++
	return true
}

func (l *limiter) release(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.active[id]--; l.active[id] <= 0 {
		delete(l.active, id)
	}
}
