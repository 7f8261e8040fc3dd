// Package groupcommit commits the statements of concurrent callers together: whatever statements
// are waiting are pipelined as one pgx.Batch in one transaction — one round trip and one commit
// (one WAL flush) instead of one each. Each caller's semantics are unchanged: its statement is the
// same SQL, and when any statement of a batch fails the batch is rolled back and every statement
// in it runs again in its own transaction, so each caller gets its own exact outcome. It never
// waits to fill a batch: a batch is what queued while the previous one ran, so an idle system pays
// no latency for it.
package groupcommit

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Committer runs the batches. Run executes them; Do and DoOrAbandon submit statements.
type Committer struct {
	pool     *pgxpool.Pool
	logger   *slog.Logger
	reqs     chan *completion
	maxBatch int
	timeout  time.Duration
}

// completion is one caller's statement: queue adds it to a batch, reporting the statement's own
// error through report.
type completion struct {
	queue func(b *pgx.Batch, report func(error))
	err   error
	done  chan struct{}
}

// New returns a committer of batches of at most maxBatch statements, each batch (with its
// fallback) bounded by timeout.
func New(pool *pgxpool.Pool, logger *slog.Logger, maxBatch int, timeout time.Duration) *Committer {
	maxBatch = max(maxBatch, 1)
	return &Committer{pool: pool, logger: logger, reqs: make(chan *completion, 4*maxBatch), maxBatch: maxBatch, timeout: timeout}
}

// Do commits one statement (with whatever others are waiting) and returns its outcome. Once
// submitted it always waits for the outcome — ctx only bounds the submission — because a caller
// that must know whether its statement committed (an outbox completion) cannot leave early.
func (c *Committer) Do(ctx context.Context, queue func(b *pgx.Batch, report func(error))) error {
	req, err := c.submit(ctx, queue)
	if err != nil {
		return err
	}
	<-req.done // Run always answers: each batch is bounded by its own timeout
	return req.err
}

// DoOrAbandon is Do for callers whose statement is idempotent: when ctx ends first it returns
// ctx's error at once, and the statement may still commit afterwards (its report callback then
// runs for nobody). Ingest uses it: a delivery stored after a 503 is deduplicated on GitHub's retry.
func (c *Committer) DoOrAbandon(ctx context.Context, queue func(b *pgx.Batch, report func(error))) error {
	req, err := c.submit(ctx, queue)
	if err != nil {
		return err
	}
	select {
	case <-req.done:
		return req.err
	case <-ctx.Done():
		return fmt.Errorf("group commit: %w", ctx.Err())
	}
}

func (c *Committer) submit(ctx context.Context, queue func(b *pgx.Batch, report func(error))) (*completion, error) {
	req := &completion{queue: queue, done: make(chan struct{})}
	select {
	case c.reqs <- req:
		return req, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("group commit: %w", ctx.Err())
	}
}

// Run executes batches until quit is closed and no statement is waiting.
func (c *Committer) Run(quit <-chan struct{}) {
	for {
		var first *completion
		select {
		case first = <-c.reqs:
		case <-quit:
			select {
			case first = <-c.reqs:
			default:
				return
			}
		}
		batch := []*completion{first}
	collect: // take what is waiting now; never wait for more
		for len(batch) < c.maxBatch {
			select {
			case r := <-c.reqs:
				batch = append(batch, r)
			default:
				break collect
			}
		}
		c.execute(batch)
	}
}

func (c *Committer) execute(batch []*completion) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if len(batch) > 1 {
		err := c.inTx(ctx, batch)
		if err == nil {
			for _, r := range batch {
				close(r.done)
			}
			return
		}
		c.logger.Debug("group commit batch rolled back; running each statement alone", "size", len(batch), "error", err)
	}
	// Alone: one transaction each, for exact outcomes.
	for _, r := range batch {
		r.err = nil
		if err := c.inTx(ctx, []*completion{r}); err != nil && r.err == nil {
			r.err = err
		}
		close(r.done)
	}
}

// inTx runs the statements in one transaction; any failure rolls all of them back.
func (c *Committer) inTx(ctx context.Context, batch []*completion) error {
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin group commit: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	b := &pgx.Batch{}
	for _, r := range batch {
		r.err = nil
		r.queue(b, func(err error) { r.err = err })
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit group: %w", err)
	}
	return nil
}
