// Package groupcommit commits the statements of concurrent callers together: whatever statements
// are waiting are pipelined as one pgx.Batch in one transaction — one round trip and one commit
// (one WAL flush) instead of one each. Each caller's semantics are unchanged: its statement is the
// same SQL, and when any statement of a batch fails the batch is rolled back and every statement
// in it runs again in its own transaction, so each caller gets its own exact outcome. A batch
// whose outcome is unknown (its connection cut, its timeout reached) is not run again: each caller
// gets its error. In a batch, and in the statements run alone after one, each lock wait lasts at
// most a quarter of the timeout, and the statements run alone after a batch share one fresh
// timeout: an executor is held by one batch for at most twice its timeout. It never waits to fill
// a batch: a batch is what queued while the previous one ran, so an idle system pays no latency
// for it.
//
// Requests of one kind can share one set-based statement (Batch.Join): the statement reports, per
// request, done or ErrAlone — "not done here" — and a request left out runs again alone, in its own
// transaction with its single statement, whose error is its exact outcome.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Committer runs the batches. Run executes them; Do and DoOrAbandon submit statements.
type Committer struct {
	pool     *pgxpool.Pool
	logger   *slog.Logger
	reqs     chan *completion
	maxBatch int
	timeout  time.Duration
	// lockTimeout is a batch's lock_timeout setting: a quarter of timeout, in whole milliseconds.
	lockTimeout string
	// turn, with Overlap set, is held by the executor committing: another waits up to overlap for
	// it before it commits beside it.
	turn    chan struct{}
	overlap time.Duration
}

// completion is one caller's statement: queue adds it to a batch, reporting the statement's own
// error through report.
type completion struct {
	queue func(b *Batch, report func(error))
	err   error
	done  chan struct{}
}

// New returns a committer of batches of at most maxBatch statements. A batch is bounded by
// timeout, each of its lock waits by a quarter of it; the statements then run alone share one more
// timeout.
func New(pool *pgxpool.Pool, logger *slog.Logger, maxBatch int, timeout time.Duration) *Committer {
	maxBatch = max(maxBatch, 1)
	return &Committer{pool: pool, logger: logger, reqs: make(chan *completion, 4*maxBatch), maxBatch: maxBatch, timeout: timeout,
		lockTimeout: fmt.Sprintf("%dms", max(timeout.Milliseconds()/4, 1)), turn: make(chan struct{}, 1)}
}

// Overlap makes the executors (several Run calls) take turns: one that has a request waits, while
// another commits, until that one is done — what queues meanwhile joins its batch — or for at most
// d, after which it commits beside it, so that one slow batch (a statement waiting for a lock)
// does not hold up every caller. Without it (d = 0) each executor commits as soon as it has a
// request. Call it before Run.
func (c *Committer) Overlap(d time.Duration) *Committer {
	c.overlap = d
	return c
}

// takeTurn waits for the turn up to the overlap; it reports whether it holds it.
func (c *Committer) takeTurn() bool {
	if c.overlap <= 0 {
		return false
	}
	select {
	case c.turn <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(c.overlap)
	defer t.Stop()
	select {
	case c.turn <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

// Do commits one statement (with whatever others are waiting) and returns its outcome. Once
// submitted it always waits for the outcome — ctx only bounds the submission — because a caller
// that must know whether its statement committed (an outbox completion) cannot leave early.
func (c *Committer) Do(ctx context.Context, queue func(b *Batch, report func(error))) error {
	req, err := c.submit(ctx, queue)
	if err != nil {
		return err
	}
	<-req.done // Run always answers: a batch and its fallback are bounded by twice the timeout
	return req.err
}

// DoOrAbandon is Do for callers whose statement is idempotent: when ctx ends first it returns
// ctx's error at once, and the statement may still commit afterwards (its report callback then
// runs for nobody). Ingest uses it: a delivery stored after a 503 is deduplicated on GitHub's retry.
func (c *Committer) DoOrAbandon(ctx context.Context, queue func(b *Batch, report func(error))) error {
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

func (c *Committer) submit(ctx context.Context, queue func(b *Batch, report func(error))) (*completion, error) {
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
		// Let goroutines that are runnable now — often the rest of a claimed batch, finishing
		// together — submit before collecting: without this yield half the batches held a single
		// request. It never waits for more work than is already running, nor, with Overlap, for
		// another executor's batch longer than the overlap.
		runtime.Gosched()
		held := c.takeTurn()
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
		if held {
			<-c.turn
		}
	}
}

// CommitTogether runs the given requests at once as one batch, on the caller's goroutine and
// without Run — as Run would had they been waiting together — and returns their outcomes in order.
func (c *Committer) CommitTogether(queues ...func(b *Batch, report func(error))) []error {
	batch := make([]*completion, len(queues))
	for i, q := range queues {
		batch[i] = &completion{queue: q, done: make(chan struct{})}
	}
	c.execute(batch)
	errs := make([]error, len(batch))
	for i, r := range batch {
		errs[i] = r.err
	}
	return errs
}

func (c *Committer) execute(batch []*completion) {
	if len(batch) == 1 {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		defer cancel()
		c.runAlone(ctx, batch[0], false)
		return
	}
	alone := c.commitBatch(batch)
	// After a batch: one deadline for all that run alone, and each lock wait bounded as in the
	// batch, so that one statement still waiting for its lock neither holds the executor for a
	// timeout per statement nor leaves the innocent ones after it without time.
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	for _, r := range alone {
		c.runAlone(ctx, r, true)
	}
}

// commitBatch runs the batch as one transaction and answers every request it settled; it returns
// those that must run alone: all of them when the batch rolled back, those their set left out
// when it committed.
func (c *Committer) commitBatch(batch []*completion) (alone []*completion) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	err := c.inTx(ctx, batch, false, true)
	switch {
	case err == nil:
		for _, r := range batch {
			if errors.Is(r.err, ErrAlone) {
				alone = append(alone, r) // its set's statement left it out: exact outcome alone
				continue
			}
			close(r.done)
		}
		return alone
	case rolledBack(err):
		c.logger.Debug("group commit batch rolled back; running each statement alone", "size", len(batch), "error", err)
		return batch
	default:
		// The batch may have committed (the connection was cut, or the context ended, after the
		// commit was sent): running its statements again could do them twice. Every caller gets
		// the error, as a lost connection gives any caller.
		c.logger.Warn("group commit batch outcome unknown; not running its statements again", "size", len(batch), "error", err)
		for _, r := range batch {
			r.err = err
			close(r.done)
		}
		return nil
	}
}

// runAlone runs one request's statement in its own transaction, for its exact outcome.
func (c *Committer) runAlone(ctx context.Context, r *completion, lockTimeout bool) {
	r.err = nil
	if err := c.inTx(ctx, []*completion{r}, true, lockTimeout); err != nil && r.err == nil {
		r.err = err
	}
	close(r.done)
}

// rolledBack reports whether a batch's error shows that none of it committed: the server
// reported an error, which aborts the batch's one transaction, or the batch never left.
func rolledBack(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) || pgconn.SafeToRetry(err)
}

// inTx runs the statements in one transaction; any failure rolls all of them back. The batch is
// one pipeline ending in one Sync, which PostgreSQL runs as one implicit transaction, committed
// at the Sync — the whole group commit is one round trip (an explicit BEGIN and COMMIT were two
// more).
func (c *Committer) inTx(ctx context.Context, batch []*completion, alone, lockTimeout bool) error {
	b := &Batch{alone: alone}
	if lockTimeout {
		// Statements that share a transaction, or an executor's fallback, share its waits: one
		// waiting for a row lock would hold every other caller until the timeout. Here each lock
		// wait lasts at most a quarter of it (55P03); a batch then rolls back and each statement
		// runs alone.
		b.Queue(`SELECT pg_catalog.set_config('lock_timeout', $1, true)`, c.lockTimeout)
	}
	for _, r := range batch {
		r.err = nil
		r.queue(b, func(err error) { r.err = err })
	}
	for _, set := range b.order {
		set.Queue(&b.Batch)
	}
	if err := c.pool.SendBatch(ctx, &b.Batch).Close(); err != nil {
		return fmt.Errorf("group commit: %w", err)
	}
	return nil
}

// ErrAlone is what a Set reports for a request its statement did not carry out (a completion
// whose lease is gone, say): the request then runs again alone, where its single statement's
// error says exactly why. A Set must never report it for a request whose effect it committed.
var ErrAlone = errors.New("groupcommit: left out of its set; runs alone")

// Batch is one transaction's statements being built: queue plain statements on it as on a
// pgx.Batch, or Join a Set that turns many requests of one kind into one statement.
type Batch struct {
	pgx.Batch
	alone bool
	sets  map[string]Set
	order []Set
}

// Set gathers the requests of one kind in a batch. Queue, called once when the batch is sent
// (after every request was queued), adds its statement; its result callback must report every
// member's outcome: nil when done, ErrAlone when left out, the statement's error when it failed
// (the batch is then rolled back and every request runs alone).
type Set interface {
	Queue(b *pgx.Batch)
}

// Join returns the batch's set for key, made by create on its first use. ok is false when the
// request is running alone: the caller then queues its single statement instead.
func (b *Batch) Join(key string, create func() Set) (set Set, ok bool) {
	if b.alone {
		return nil, false
	}
	if set, ok := b.sets[key]; ok {
		return set, true
	}
	if b.sets == nil {
		b.sets = map[string]Set{}
	}
	set = create()
	b.sets[key] = set
	b.order = append(b.order, set)
	return set, true
}
