package notify

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Waker wakes every goroutine waiting on it at once (close-and-replace broadcast). Take the
// channel before looking for work, so that a wake-up during the look is not lost.
type Waker struct {
	mu sync.Mutex
	ch chan struct{}
}

// NewWaker returns a waker.
func NewWaker() *Waker { return &Waker{ch: make(chan struct{})} }

// Wake wakes everyone waiting now.
func (w *Waker) Wake() {
	w.mu.Lock()
	close(w.ch)
	w.ch = make(chan struct{})
	w.mu.Unlock()
}

// C is the channel closed by the next Wake.
func (w *Waker) C() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ch
}

// Listen holds a dedicated connection LISTENing on channel and calls wake on every notification
// until ctx ends. A lost connection is re-established with backoff (1 s doubling to 30 s) while
// consumers poll; every (re)connect calls wake once, since notifications may have been missed.
func Listen(ctx context.Context, cfg *pgx.ConnConfig, channel string, wake func(), logger *slog.Logger) {
	delay := time.Second
	for ctx.Err() == nil {
		err := listenOnce(ctx, cfg, channel, wake)
		if ctx.Err() != nil {
			return
		}
		logger.Warn("LISTEN connection lost; polling until it is back", "channel", channel, "error", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, 30*time.Second)
	}
}

func listenOnce(ctx context.Context, cfg *pgx.ConnConfig, channel string, wake func()) error {
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		wake()
	}
}
