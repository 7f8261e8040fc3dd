package queuerun

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/notify"
)

// Waker wakes a runner's idle loops: one loop waiting in Sleep returns on Wake, the others go on
// waiting, and every loop returns after the poll interval.
//
// One and not all: each loop that returns claims, and a claim costs the database a statement and
// a transaction whether it finds work or not. Woken all at once by every notification, four idle
// lifecycle loops made three empty claims for each one that found a job: at 150 release runs/s a
// claim brought 0.9 jobs on average and PostgreSQL spent 7.5 ms per run (docs/performance.md).
// A loop that claims a whole batch wakes another (the lifecycle's loops do; the dispatcher has
// one loop), so a backlog still gets every loop.
//
// A Wake is a ticket that the first loop to look takes: a sleeper, or a loop whose claim was
// running when the Wake came (its Sleep returns at once, since it took its channel from Next
// before the claim). Tickets do not pile up beyond one: a loop that is not sleeping claims again
// after its batch anyway.
//
// A loop whose claim fails after it took a ticket passes it on with Wake before it backs off:
// the work it was woken for is another loop's to claim meanwhile.
type Waker struct {
	poll      time.Duration
	broadcast *notify.Waker
	mu        sync.Mutex
	ticket    bool
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

// Wake ends one Sleep given a channel taken by Next before this call: the first to look.
func (w *Waker) Wake() {
	w.mu.Lock()
	w.ticket = true
	w.mu.Unlock()
	w.broadcast.Wake()
}

// Next returns the channel the next Wake closes. A loop takes it before it looks for work, so
// that a wake-up during the look is not lost.
func (w *Waker) Next() <-chan struct{} { return w.broadcast.C() }

// Sleep waits for the poll interval, for a Wake that wake tells of and whose ticket this loop
// takes, or for ctx to end, whichever comes first. A nil wake waits for the interval (or ctx)
// alone: a loop whose claim failed does not retry sooner because work arrived. It reports whether
// a Wake ended the wait.
func (w *Waker) Sleep(ctx context.Context, wake <-chan struct{}) bool {
	c, stop := w.timer(w.poll)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-c:
			return false
		case <-wake:
			// Another loop may have taken this Wake's ticket: then wait for the next one.
			w.mu.Lock()
			took := w.ticket
			w.ticket = false
			if !took {
				wake = w.broadcast.C()
			}
			w.mu.Unlock()
			if took {
				return true
			}
		}
	}
}

// Listen calls Wake on every NOTIFY on channel until ctx ends, over a dedicated connection
// configured by cfg (pkg/notify: a lost connection is re-established with backoff while the
// loops poll, and every (re)connect wakes a loop, since notifications may have been missed).
func (w *Waker) Listen(ctx context.Context, cfg *pgx.ConnConfig, channel string, logger *slog.Logger) {
	notify.Listen(ctx, cfg, channel, w.Wake, logger)
}
