package queuerun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// DefaultUpkeepJitter spreads upkeep waits when Task.Jitter is zero.
const DefaultUpkeepJitter = 0.1

// Task is one periodic upkeep duty of a runner (lease recovery, queue statistics).
type Task struct {
	// Name says what the task does, for its log line on failure ("recover job leases" logs
	// "recover job leases failed"). Required.
	Name string
	// Interval is the mean wait between runs; it must be positive.
	Interval time.Duration
	// Jitter spreads each wait by ±Jitter of Interval, from 0 to 1, so that the replicas of a
	// service started together do not run their upkeep in step; zero means
	// DefaultUpkeepJitter.
	Jitter float64
	// Immediately runs the task once at start, before the first wait.
	Immediately bool
	// Run does the work once. Its error is logged (at warning level, unless ctx has ended) and
	// the task carries on: a periodic duty survives a passing database outage.
	Run func(ctx context.Context) error
}

// Upkeep runs periodic tasks, each in its own goroutine.
type Upkeep struct {
	tasks  []Task
	logger *slog.Logger
	// timer and rand are time.NewTimer and math/rand/v2's Float64 (tests substitute their own).
	timer func(time.Duration) (<-chan time.Time, func() bool)
	rand  func() float64
}

// NewUpkeep checks the tasks and returns their runner; logger receives their failures.
func NewUpkeep(logger *slog.Logger, tasks ...Task) (*Upkeep, error) {
	var errs []error
	for _, t := range tasks {
		if t.Name == "" || t.Interval <= 0 || t.Run == nil || t.Jitter < 0 || t.Jitter > 1 {
			errs = append(errs, fmt.Errorf("queuerun: upkeep task %q: want a name, a positive interval (%v), a jitter from 0 to 1 (%v) and a Run function",
				t.Name, t.Interval, t.Jitter))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Upkeep{tasks: tasks, logger: logger, rand: rand.Float64, timer: newTimer}, nil
}

// Run runs every task until ctx ends and returns when all of them have stopped.
func (u *Upkeep) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, t := range u.tasks {
		wg.Go(func() { u.run(ctx, t) })
	}
	wg.Wait()
}

func (u *Upkeep) run(ctx context.Context, t Task) {
	jitter := t.Jitter
	if jitter == 0 {
		jitter = DefaultUpkeepJitter
	}
	if t.Immediately {
		u.once(ctx, t)
	}
	for {
		c, stop := u.timer(time.Duration(float64(t.Interval) * (1 - jitter + 2*jitter*u.rand())))
		select {
		case <-ctx.Done():
			stop()
			return
		case <-c:
		}
		u.once(ctx, t)
	}
}

func (u *Upkeep) once(ctx context.Context, t Task) {
	if err := t.Run(ctx); err != nil && ctx.Err() == nil {
		u.logger.Warn(t.Name+" failed", "error", err)
	}
}
