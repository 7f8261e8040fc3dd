package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// completer commits the completions of concurrent deliveries together: whatever completions are
// waiting are pipelined as one pgx.Batch in one transaction — one round trip and one commit
// instead of one each. A completion's semantics are unchanged: each statement is the same SQL
// function call, and when any statement of a batch fails (a stale lease, an attempt that cannot
// advance) the batch is rolled back and every completion in it runs again in its own transaction,
// so each caller gets its own exact outcome.
type completer struct {
	pool     *pgxpool.Pool
	logger   *slog.Logger
	reqs     chan *completion
	maxBatch int
}

// completion is one delivery's completion: queue adds its statement to a batch, reporting the
// statement's own error through report.
type completion struct {
	queue func(b *pgx.Batch, report func(error))
	err   error
	done  chan struct{}
}

func newCompleter(pool *pgxpool.Pool, logger *slog.Logger, maxBatch int) *completer {
	return &completer{pool: pool, logger: logger, reqs: make(chan *completion, 4*maxBatch), maxBatch: maxBatch}
}

// do commits one completion (with whatever others are waiting) and returns its outcome.
func (c *completer) do(ctx context.Context, queue func(b *pgx.Batch, report func(error))) error {
	req := &completion{queue: queue, done: make(chan struct{})}
	select {
	case c.reqs <- req:
	case <-ctx.Done():
		return fmt.Errorf("complete: %w", ctx.Err())
	}
	<-req.done // the executors always answer: each batch is bounded by its own timeout
	return req.err
}

// run executes batches until quit is closed and no completion is waiting.
func (c *completer) run(quit <-chan struct{}) {
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

func (c *completer) execute(batch []*completion) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if len(batch) > 1 {
		if err := c.inTx(ctx, batch); err == nil {
			for _, r := range batch {
				close(r.done)
			}
			return
		}
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

// inTx runs the completions in one transaction; any failure rolls all of them back.
func (c *completer) inTx(ctx context.Context, batch []*completion) error {
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin completion batch: %w", err)
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
		return fmt.Errorf("commit completion batch: %w", err)
	}
	return nil
}
