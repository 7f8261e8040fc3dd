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

// Reconnect delays of Listen: an outage's first wait, doubled after every failed attempt up to
// the cap.
const (
	firstRetry = time.Second
	maxRetry   = 30 * time.Second
)

// Listen holds a dedicated connection LISTENing on channel and calls wake on every notification
// until ctx ends. A lost connection is re-established with backoff while consumers poll: 1 s,
// doubling with every failed attempt to 30 s, and from 1 s again in the next outage once a session
// was LISTENing. Every (re)connect calls wake once, since notifications may have been missed.
func Listen(ctx context.Context, cfg *pgx.ConnConfig, channel string, wake func(), logger *slog.Logger) {
	listen(ctx, cfg, channel, wake, logger, firstRetry, maxRetry)
}

// listen is Listen with its reconnect delays as parameters, which the tests shrink.
func listen(ctx context.Context, cfg *pgx.ConnConfig, channel string, wake func(), logger *slog.Logger, first, limit time.Duration) {
	delay := first
	for ctx.Err() == nil {
		listening, err := listenOnce(ctx, cfg, channel, wake)
		if ctx.Err() != nil {
			return
		}
		if listening {
			// The backoff is per outage: a session that got as far as LISTEN ended the last one.
			// Kept from the process's earlier outages (restarts, failovers, pooler reloads), the
			// delay would soon be the cap for good, and every later loss would cost 30 s of
			// polling.
			delay = first
		}
		logger.Warn("LISTEN connection lost; polling until it is back", "channel", channel, "error", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, limit)
	}
}

// listenOnce runs one session; listening reports whether it got as far as LISTEN.
func listenOnce(ctx context.Context, cfg *pgx.ConnConfig, channel string, wake func()) (listening bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return false, err
	}
	wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true, err
		}
		wake()
	}
}
