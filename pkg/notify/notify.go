// Package notify wakes the workers of a queue with PostgreSQL NOTIFY, sent after the writer's
// commit and coalesced: however many rows a process commits, at most one NOTIFY is in flight per
// channel, and consecutive ones are spaced by a minimum interval.
//
// Notifications are latency hints, never the only path to work: every consumer also polls. That is
// why they need not be transactional — and must not be, because a NOTIFY inside every writing
// transaction serializes all their commits on PostgreSQL's notification queue lock.
package notify

import (
	"context"
	"log/slog"
	"time"

	"github.com/boardreadyops/cloud/pkg/database"
)

// Channels.
const (
	// Jobs wakes lifecycle workers: a job was created.
	Jobs = "boardreadyops_jobs"
	// Outbox wakes dispatchers: an effect was enqueued.
	Outbox = "boardreadyops_outbox"
)

// Notifier sends coalesced NOTIFYs on one channel.
type Notifier struct {
	db          database.DBTX
	channel     string
	minInterval time.Duration
	logger      *slog.Logger
	pending     chan struct{}
}

// New returns a notifier for channel. minInterval spaces consecutive notifications (the first
// after a quiet period goes out at once, so an idle system wakes without delay).
func New(db database.DBTX, channel string, minInterval time.Duration, logger *slog.Logger) *Notifier {
	return &Notifier{db: db, channel: channel, minInterval: minInterval, logger: logger, pending: make(chan struct{}, 1)}
}

// Signal asks for a notification after work was committed. It never blocks.
func (n *Notifier) Signal() {
	select {
	case n.pending <- struct{}{}:
	default: // one is already pending: coalesced
	}
}

// Run sends the notifications until ctx ends.
func (n *Notifier) Run(ctx context.Context) {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.pending:
		}
		if wait := n.minInterval - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		last = time.Now()
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if _, err := n.db.Exec(sctx, "SELECT pg_notify($1, '')", n.channel); err != nil && ctx.Err() == nil {
			// Consumers poll as well; a lost notification costs latency, not work.
			n.logger.Debug("notify failed", "channel", n.channel, "error", err)
		}
		cancel()
	}
}
