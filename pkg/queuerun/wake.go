package queuerun

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/notify"
)

// Waker wakes a runner's idle loops: every loop waiting in Sleep returns at once on Wake, and
// otherwise after the poll interval.
type Waker struct {
	poll      time.Duration
	broadcast *notify.Waker
	// timer starts the poll interval's timer (time.NewTimer; tests substitute channels they fire).
	timer func(time.Duration) (<-chan time.Time, func() bool)
}

// NewWaker returns a waker whose sleepers look for work again at least every poll interval,
// which must be positive.
func NewWaker(poll time.Duration) (*Waker, error) {
	if poll <= 0 {
		return nil, fmt.Errorf("queuerun: poll interval %v: must be positive", poll)
	}
	return &Waker{poll: poll, broadcast: notify.NewWaker(), timer: newTimer}, nil
}

// newTimer is time.NewTimer as the package's waits use it.
func newTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// Wake ends every Sleep given a channel taken by Next before this call.
func (w *Waker) Wake() { w.broadcast.Wake() }

// Next returns the channel the next Wake closes. A loop takes it before it looks for work, so
// that a wake-up during the look is not lost.
func (w *Waker) Next() <-chan struct{} { return w.broadcast.C() }

// Sleep waits for the poll interval, for wake to be closed, or for ctx to end, whichever comes
// first. A nil wake waits for the interval (or ctx) alone: a loop whose claim failed does not
// retry sooner because work arrived. It reports whether wake ended the wait.
func (w *Waker) Sleep(ctx context.Context, wake <-chan struct{}) bool {
	c, stop := w.timer(w.poll)
	defer stop()
	select {
	case <-ctx.Done():
	case <-c:
	case <-wake:
		return true
	}
	return false
}

// Listen calls Wake on every NOTIFY on channel until ctx ends, over a dedicated connection
// configured by cfg (pkg/notify: a lost connection is re-established with backoff while the
// loops poll, and every (re)connect wakes them once, since notifications may have been missed).
func (w *Waker) Listen(ctx context.Context, cfg *pgx.ConnConfig, channel string, logger *slog.Logger) {
	notify.Listen(ctx, cfg, channel, w.Wake, logger)
}
