package queuerun

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Config describes one queue to its runner. T is the queue's claimed row, R its recovered row.
type Config[T, R any] struct {
	// PollInterval is how often an idle loop looks for work without a wake-up; it must be
	// positive.
	PollInterval time.Duration
	// Listen enables LISTEN on ListenChannel (notify.Jobs, notify.Outbox), whose notifications
	// wake the loops; without it (behind a transaction-pooling PgBouncer) they run on the poll
	// interval alone.
	Listen        bool
	ListenChannel string
	// ListenConn configures LISTEN's dedicated connection (the pool's ConnConfig); required with
	// Listen.
	ListenConn *pgx.ConnConfig
	// Claim describes the queue's claim; a nil Claim.Duration observes into
	// Metrics.ClaimDuration.
	Claim ClaimConfig[T]
	// Recovery is the queue's lease recovery, run in the background.
	Recovery Recovery[R]
	// Stats is the queue's statistics query, run in the background.
	Stats Stats
	// Tasks are further upkeep duties of the service, run in the background beside recovery and
	// statistics (lifecycle's stale-run gauge); none by default.
	Tasks []Task
	// Metrics receives the shared instruments. Required.
	Metrics *Metrics
	// Logger receives upkeep failures, recovered leases and LISTEN reconnects; nil discards
	// them.
	Logger *slog.Logger
}

// Runner holds the shared mechanics of one queue's runner: its waker, its lease-safe claim and
// its background duties (LISTEN, lease recovery, statistics). The runner's own loop calls Next,
// Claim and Sleep.
type Runner[T any] struct {
	*Waker
	claimer *Claimer[T]
	upkeep  *Upkeep
	channel string
	conn    *pgx.ConnConfig
	logger  *slog.Logger
}

// New validates cfg, fills in its defaults and returns the runner.
func New[T, R any](cfg Config[T, R]) (*Runner[T], error) {
	if cfg.Metrics == nil {
		return nil, errors.New("queuerun: Config.Metrics is required")
	}
	if cfg.Listen && (cfg.ListenChannel == "" || cfg.ListenConn == nil) {
		return nil, errors.New("queuerun: Config.ListenChannel and Config.ListenConn are required with Listen")
	}
	if cfg.Recovery.Recover == nil || cfg.Recovery.Describe == nil || cfg.Recovery.Message == "" || cfg.Stats.Read == nil {
		return nil, errors.New("queuerun: Config.Recovery (Recover, Describe, Message) and Config.Stats.Read are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Claim.Duration == nil {
		cfg.Claim.Duration = cfg.Metrics.ClaimDuration
	}
	w, err := NewWaker(cfg.PollInterval)
	if err != nil {
		return nil, err
	}
	r := &Runner[T]{Waker: w, logger: cfg.Logger}
	if cfg.Listen {
		r.channel, r.conn = cfg.ListenChannel, cfg.ListenConn
	}
	if r.claimer, err = NewClaimer(cfg.Claim); err != nil {
		return nil, err
	}
	tasks := append([]Task{cfg.Recovery.Task(cfg.Metrics, r.Wake, cfg.Logger), cfg.Stats.Task(cfg.Metrics)}, cfg.Tasks...)
	if r.upkeep, err = NewUpkeep(cfg.Logger, tasks...); err != nil {
		return nil, err
	}
	return r, nil
}

// Claim runs claim lease-safely (see Claimer.Claim).
func (r *Runner[T]) Claim(ctx context.Context, claim func(ctx context.Context) ([]T, error)) ([]T, error) {
	return r.claimer.Claim(ctx, claim)
}

// Background runs LISTEN (when configured), lease recovery, the statistics query and Tasks until ctx
// ends, and returns when they have stopped.
func (r *Runner[T]) Background(ctx context.Context) {
	var wg sync.WaitGroup
	if r.channel != "" {
		wg.Go(func() { r.Listen(ctx, r.conn, r.channel, r.logger) })
	}
	wg.Go(func() { r.upkeep.Run(ctx) })
	wg.Wait()
}
