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
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/boardreadyops/cloud/pkg/groupcommit"
	"github.com/boardreadyops/cloud/pkg/notify"
	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/telemetry"
)

// Config bounds the dispatcher.
type Config struct {
	WorkerID string
	// Concurrency is the number of deliveries in flight at once, across installations.
	Concurrency int
	// PerInstallation is the number in flight for one installation, across replicas (GitHub asks
	// for 1: serial requests). 0 turns per-installation pacing off.
	PerInstallation int
	// MutationInterval is the least time between the end of one delivery of an installation and
	// the claim of its next (GitHub asks for at least a second between mutating requests).
	MutationInterval time.Duration
	// RateLimitBackoff is the first block of an installation after a rate limit for which GitHub
	// named no time (GitHub: at least a minute); it doubles per repeated limit up to
	// RateLimitMaxBackoff.
	RateLimitBackoff    time.Duration
	RateLimitMaxBackoff time.Duration
	// BatchSize caps one claim.
	BatchSize int
	// Lease of a claimed effect; longer than the slowest request plus its recording.
	Lease time.Duration
	// ClaimFill is how long a backlogged dispatcher waits for a whole batch of free slots
	// before claiming fewer (0: never waits).
	ClaimFill time.Duration
	// PollInterval is how often an idle dispatcher looks for work without a notification.
	PollInterval time.Duration
	// Listen enables LISTEN boardreadyops_outbox.
	Listen bool
	// MaxBackoff caps the retry delay of a failing effect.
	MaxBackoff time.Duration
	// RecoverInterval is how often expired leases are recovered.
	RecoverInterval time.Duration
	// StatsInterval is how often the queue gauges are refreshed.
	StatsInterval time.Duration
	// CheckRunName is used when a payload carries none.
	CheckRunName string
}

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
	waker   *notify.Waker
	budgets budgets
}

// New builds a dispatcher.
func New(cfg Config, pool *pgxpool.Pool, gh GitHub, m *Metrics, tracer trace.Tracer, logger *slog.Logger) *Dispatcher {
	perProcess := cfg.PerInstallation
	if perProcess <= 0 {
		perProcess = cfg.Concurrency // pacing off
	}
	return &Dispatcher{cfg: cfg, pool: pool, store: &outbox.Store{}, github: gh, metrics: m, tracer: tracer, logger: logger,
		limiter: newLimiter(perProcess), completer: groupcommit.New(pool, logger, cfg.Concurrency, 30*time.Second), slots: make(chan struct{}, cfg.Concurrency), waker: notify.NewWaker()}
}

// Run delivers until ctx ends, then waits for the deliveries in flight and returns.
func (d *Dispatcher) Run(ctx context.Context) error {
	var bg sync.WaitGroup
	start := func(f func(context.Context)) {
		bg.Add(1)
		go func() { defer bg.Done(); f(ctx) }()
	}
	if d.cfg.Listen {
		start(d.listen)
	}
	start(d.recoverLoop)
	start(d.statsLoop)
	// Two executors: one commits a batch while the other gathers the next.
	quit := make(chan struct{})
	var executors sync.WaitGroup
	for i := 0; i < 2; i++ {
		executors.Add(1)
		go func() { defer executors.Done(); d.completer.Run(quit) }()
	}
	// Concurrency long-lived workers deliver what the loop claims: a goroutine per effect would
	// grow a fresh stack for every delivery (stack copying was a tenth of the dispatcher's CPU).
	work := make(chan outbox.Effect, d.cfg.Concurrency)
	var workers sync.WaitGroup
	for range d.cfg.Concurrency {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for e := range work {
				d.handle(context.WithoutCancel(ctx), e)
				<-d.slots
			}
		}()
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
func (d *Dispatcher) Wake() { d.waker.Wake() }

// loop claims while there is room and hands each effect to a worker.
//
// It holds one concurrency slot per effect it claims. While the queue is backlogged (the last
// claim, of at least half a batch, got all it asked for) it waits up to Config.ClaimFill for a whole batch of slots before
// claiming, so that a busy dispatcher claims and completes in full batches instead of one small
// transaction per freed slot; otherwise it claims for whatever is free at once.
func (d *Dispatcher) loop(ctx context.Context, work chan<- outbox.Effect) {
	backlog := false
	for ctx.Err() == nil {
		held := d.acquire(ctx, d.cfg.BatchSize, backlog)
		if held == 0 {
			return
		}
		wake := d.waker.C()
		start := time.Now()
		// Shutdown must not cancel a claim in flight: the server could commit it while the client
		// sees a cancellation, stranding the effects until their leases expire.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		batch, err := d.store.ClaimPaced(cctx, d.pool, d.cfg.WorkerID, held, d.cfg.Lease, d.pace())
		cancel()
		d.metrics.claimDuration.Observe(time.Since(start).Seconds())
		for range held - len(batch) {
			<-d.slots
		}
		// Backlogged: a claim of at least half a batch got all it asked for. A small claim coming
		// back full says little (most slots are busy with slow requests, where waiting for a whole
		// batch would only delay the next claim).
		backlog = err == nil && len(batch) == held && 2*held >= d.cfg.BatchSize
		if err == nil && len(batch) > 0 {
			tps := make([]string, 0, len(batch))
			for _, e := range batch {
				if e.Traceparent != nil {
					tps = append(tps, *e.Traceparent)
				}
			}
			telemetry.ClaimSpan(d.tracer, "outbox.claim", start, time.Now(), tps)
		}
		if err != nil || len(batch) == 0 {
			if err != nil && ctx.Err() == nil {
				d.logger.Warn("claim effects failed", "error", err)
			}
			sleep(ctx, d.cfg.PollInterval, wake)
			continue
		}
		for _, e := range batch {
			work <- e // never blocks: it holds a slot for each, and the channel has room for all slots
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

// handle delivers one claimed effect, or defers it when its installation is rate limited or at
// its concurrency limit.
func (d *Dispatcher) handle(ctx context.Context, e outbox.Effect) {
	var tp string
	if e.Traceparent != nil {
		tp = *e.Traceparent
	}
	ctx, span := d.tracer.Start(telemetry.ContextWithTraceparent(ctx, tp), "outbox.deliver", trace.WithAttributes(
		attribute.Int64("boardreadyops.outbox_id", e.ID), attribute.String("boardreadyops.effect_type", e.EffectType),
		attribute.String("boardreadyops.release_run_id", e.ReleaseRunID), attribute.Int64("github.installation_id", e.InstallationID),
		attribute.Int("boardreadyops.attempt", e.Attempts)))
	defer span.End()
	// The whole delivery, request and recording, fits in the lease; shutdown does not cut it short.
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Lease)
	defer cancel()
	d.metrics.inFlight.Inc()
	defer d.metrics.inFlight.Dec()

	var outcome string
	if !d.limiter.acquire(e.InstallationID) {
		outcome = d.outcomeOf(e, d.store.Defer(ctx, d.pool, e.ID, d.cfg.WorkerID, time.Now().Add(200*time.Millisecond),
			"installation concurrency limit"), OutcomeDeferred)
	} else {
		outcome = d.deliver(ctx, e)
		d.limiter.release(e.InstallationID)
	}
	if outcome == OutcomeCompleted {
		d.paceReleased() // with the completion, in its transaction
	} else {
		d.releasePace(ctx, e)
	}
	span.SetAttributes(attribute.String("boardreadyops.outcome", outcome))
	d.metrics.processed.WithLabelValues(e.EffectType, outcome).Inc()
	if outcome == OutcomeCompleted {
		telemetry.Observe(ctx, d.metrics.lag.WithLabelValues(e.EffectType), time.Since(e.CreatedAt).Seconds())
	}
}

func sleep(ctx context.Context, dur time.Duration, wake <-chan struct{}) {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-wake:
	}
}

// backoff is capped exponential with ±20% jitter: 2s, 4s, 8s, ... up to max.
func backoff(attempts int, maxDelay time.Duration) time.Duration {
	b := 2 * time.Second << min(max(attempts-1, 0), 20)
	if b > maxDelay || b <= 0 {
		b = maxDelay
	}
	return time.Duration(float64(b) * (0.8 + 0.4*rand.Float64()))
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
