package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/sqlstate"
)

// Config configures a Service. Zero values take the defaults named on each field.
type Config struct {
	// Owner names this replica in the lease (daemon.WorkerID). Required.
	Owner string
	// Periods per table class; zero means never (the defaults are the caller's: lifecycle's
	// BOARDREADYOPS_RETENTION_* settings).
	Periods Periods
	// BatchSize is the rows one delete statement removes, 1 to 10000; 0 means 1000.
	BatchSize int
	// BatchPause is the wait between two batches; 0 means none (a negative value is invalid).
	BatchPause time.Duration
	// Interval is the wait between two passes; 0 means 5 minutes.
	Interval time.Duration
	// Lease is the lease's time to live, 1 s to 1 h; 0 means 30 s. It is renewed every Lease/3.
	Lease time.Duration
	// BatchTimeout bounds one batch; 0 means 30 s.
	BatchTimeout time.Duration
	// ClassBudget bounds the time one table class gets in a pass; 0 means a minute. A class still
	// behind when it runs out is left to the next pass, which starts at once: a class that fills
	// faster than it is deleted never keeps the pass from the other classes or from completing
	// (its metrics, the gauges between passes).
	ClassBudget time.Duration
	// Store runs the functions; nil means a Store on the database clock.
	Store *Store
	// Metrics may be nil (no instruments).
	Metrics *Metrics
	// Logger may be nil (silent).
	Logger *slog.Logger
	// OnBatch, when set, is called after each batch that deleted rows (tests).
	OnBatch func(table string, deleted int64)
}

func (c Config) withDefaults() (Config, error) {
	if c.BatchSize == 0 {
		c.BatchSize = 1000
	}
	if c.Interval == 0 {
		c.Interval = 5 * time.Minute
	}
	if c.Lease == 0 {
		c.Lease = 30 * time.Second
	}
	if c.BatchTimeout == 0 {
		c.BatchTimeout = 30 * time.Second
	}
	if c.ClassBudget == 0 {
		c.ClassBudget = time.Minute
	}
	if c.Store == nil {
		c.Store = &Store{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	if c.Owner == "" {
		errs = append(errs, errors.New("retention: Config.Owner is required"))
	}
	if c.BatchSize < 1 || c.BatchSize > 10000 {
		errs = append(errs, fmt.Errorf("retention: batch size %d: want 1 to 10000", c.BatchSize))
	}
	if c.BatchPause < 0 || c.Interval < 0 || c.ClassBudget < 0 {
		errs = append(errs, errors.New("retention: batch pause, interval and class budget must not be negative"))
	}
	if c.Lease < time.Second || c.Lease > time.Hour {
		errs = append(errs, fmt.Errorf("retention: lease %v: want 1s to 1h", c.Lease))
	}
	for _, t := range Tables {
		if p := c.Periods.Of(t); p < 0 || (p > 0 && p < time.Second) {
			errs = append(errs, fmt.Errorf("retention: period of %s %v: want 0 (never) or at least 1s", t, p))
		}
	}
	return c, errors.Join(errs...)
}

// Service is the retention maintenance loop.
type Service struct {
	pool    *pgxpool.Pool
	cfg     Config
	leader  atomic.Bool
	renewed time.Time
}

// New checks cfg and returns the service.
func New(pool *pgxpool.Pool, cfg Config) (*Service, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Service{pool: pool, cfg: c}, nil
}

// Leader reports whether this replica holds the lease (as of its last acquire).
func (s *Service) Leader() bool { return s.leader.Load() }

// Run works until ctx ends, then gives the lease up so that another replica takes over at once.
// Every Lease/3 it tries to take or renew the lease; while it holds it, it runs a pass every
// Interval. A failed acquire is logged and tried again on the next tick; a failed pass is logged,
// counted, and followed by the next one an Interval later.
func (s *Service) Run(ctx context.Context) {
	defer s.release()
	tick := s.cfg.Lease / 3
	var nextPass time.Time
	for {
		if s.acquire(ctx) && !time.Now().Before(nextPass) {
			start := time.Now()
			_, behind, err := s.pass(ctx)
			switch {
			case err != nil && ctx.Err() != nil:
				// Stopped part way: neither a failure nor a complete pass.
			case err != nil:
				s.cfg.Logger.Warn("retention pass failed", "error", err)
				if s.cfg.Metrics != nil {
					s.cfg.Metrics.Passes.WithLabelValues(PassFailed).Inc()
				}
			case s.cfg.Metrics != nil:
				s.cfg.Metrics.LastPass.Set(time.Since(start).Seconds())
				s.cfg.Metrics.Passes.WithLabelValues(PassCompleted).Inc()
			}
			nextPass = time.Now().Add(s.cfg.Interval)
			if behind && err == nil {
				nextPass = time.Now() // a class ran out of its budget: go on at the next tick
			}
		}
		s.observe(ctx)
		t := time.NewTimer(tick)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// acquire takes or renews the lease between passes, logging a failure.
func (s *Service) acquire(ctx context.Context) bool {
	held, err := s.renew(ctx)
	if err != nil && ctx.Err() == nil {
		s.cfg.Logger.Warn("acquire retention lease failed", "error", err)
	}
	return held
}

// renew takes or renews the lease and records the outcome; a database error leaves this replica
// without it.
func (s *Service) renew(ctx context.Context) (bool, error) {
	actx, cancel := context.WithTimeout(ctx, s.cfg.BatchTimeout)
	defer cancel()
	l, err := s.cfg.Store.Acquire(actx, s.pool, s.cfg.Owner, s.cfg.Lease)
	if err != nil {
		s.setLeader(false, "")
		return false, err
	}
	if l.Acquired {
		s.renewed = time.Now()
	}
	s.setLeader(l.Acquired, l.Holder)
	return l.Acquired, nil
}

func (s *Service) setLeader(leader bool, holder string) {
	if s.leader.Swap(leader) != leader {
		s.cfg.Logger.Info("retention leadership changed", "leader", leader, "holder", holder)
	}
	if s.cfg.Metrics != nil {
		v := 0.0
		if leader {
			v = 1
		}
		s.cfg.Metrics.Leader.Set(v)
	}
}

// ErrLeaseHeld means another replica holds the retention lease.
var ErrLeaseHeld = errors.New("the retention lease is held by another replica")

// RunOnce takes the lease, runs one pass and gives the lease up (brops retention run). It returns
// the rows deleted per table, also when it fails part way.
func (s *Service) RunOnce(ctx context.Context) (map[string]int64, error) {
	actx, cancel := context.WithTimeout(ctx, s.cfg.BatchTimeout)
	l, err := s.cfg.Store.Acquire(actx, s.pool, s.cfg.Owner, s.cfg.Lease)
	cancel()
	if err != nil {
		return nil, err
	}
	if !l.Acquired {
		return nil, fmt.Errorf("%w: %s, until %s", ErrLeaseHeld, l.Holder, l.HeldUntil.UTC().Format(time.RFC3339))
	}
	s.renewed = time.Now()
	s.setLeader(true, s.cfg.Owner)
	defer s.release()
	total := map[string]int64{}
	for {
		deleted, behind, err := s.pass(ctx)
		for t, n := range deleted {
			total[t] += n
		}
		if err != nil || !behind {
			return total, err
		}
	}
}

// pass deletes every table class down to nothing past its period, batch by batch, renewing the
// lease on the way, each class for at most ClassBudget: behind reports a class left with rows past
// its period when its budget ran out. It stops when the lease is lost.
func (s *Service) pass(ctx context.Context) (deleted map[string]int64, behind bool, err error) {
	deleted = map[string]int64{}
	for _, table := range Tables {
		period := s.cfg.Periods.Of(table)
		if period <= 0 {
			continue
		}
		classStart := time.Now()
		for {
			if time.Since(classStart) >= s.cfg.ClassBudget {
				behind = true
				break
			}
			if time.Since(s.renewed) >= s.cfg.Lease/3 {
				if held, err := s.renew(ctx); err != nil {
					return deleted, behind, fmt.Errorf("renew retention lease: %w", err)
				} else if !held {
					return deleted, behind, errors.New("retention lease lost to another replica")
				}
			}
			n, err := s.batch(ctx, table, period)
			if errors.Is(err, sqlstate.ErrLeaseNotHeld) {
				s.setLeader(false, "")
				return deleted, behind, err
			}
			if err != nil {
				return deleted, behind, err
			}
			deleted[table] += n
			if n > 0 {
				if s.cfg.Metrics != nil {
					s.cfg.Metrics.Deleted.WithLabelValues(table).Add(float64(n))
				}
				if s.cfg.OnBatch != nil {
					s.cfg.OnBatch(table, n)
				}
			}
			if n < int64(s.cfg.BatchSize) {
				break
			}
			if err := sleep(ctx, s.cfg.BatchPause); err != nil {
				return deleted, behind, err
			}
		}
	}
	return deleted, behind, nil
}

func (s *Service) batch(ctx context.Context, table string, period time.Duration) (int64, error) {
	bctx, cancel := context.WithTimeout(ctx, s.cfg.BatchTimeout)
	defer cancel()
	return s.cfg.Store.Delete(bctx, s.pool, table, s.cfg.Owner, period, s.cfg.BatchSize)
}

// observe refreshes the oldest-expired and claim index gauges. Every replica does (index reads
// of each table's oldest rows, pinned by TestDeletesUseTheirIndexes, and a catalog read), so
// the alerts depend neither on a leader nor on a former leader's stale values.
func (s *Service) observe(ctx context.Context) {
	if s.cfg.Metrics == nil {
		return
	}
	octx, cancel := context.WithTimeout(ctx, s.cfg.BatchTimeout)
	defer cancel()
	st, err := s.cfg.Store.Status(octx, s.pool, s.cfg.Periods, false)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("read retention status failed", "error", err)
		}
		return
	}
	now := time.Now()
	if s.cfg.Store.Clock != nil {
		now = s.cfg.Store.Clock()
	}
	for _, t := range st {
		s.cfg.Metrics.OldestExpired.WithLabelValues(t.Table).Set(t.Overdue(now).Seconds())
	}
	bloat, err := s.cfg.Store.IndexBloat(octx, s.pool)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("read claim index bloat failed", "error", err)
		}
		return
	}
	for _, b := range bloat {
		s.cfg.Metrics.IndexBytes.WithLabelValues(b.Index).Set(float64(b.SizeBytes))
		s.cfg.Metrics.IndexBloat.WithLabelValues(b.Index).Set(b.Ratio())
	}
}

func (s *Service) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.cfg.Store.Release(ctx, s.pool, s.cfg.Owner); err != nil {
		s.cfg.Logger.Warn("release retention lease failed", "error", err)
	}
	s.setLeader(false, "")
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
