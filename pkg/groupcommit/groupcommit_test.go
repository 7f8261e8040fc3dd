package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newTable makes a scratch table whose CHECK lets the tests fail single statements.
func newTable(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE gc (id int PRIMARY KEY, v int NOT NULL CHECK (v > 0))`); err != nil {
		t.Fatal(err)
	}
	return pool
}

func insert(id, v int) func(b *Batch, report func(error)) {
	return func(b *Batch, report func(error)) {
		b.Queue(`INSERT INTO gc (id, v) VALUES ($1, $2)`, id, v).Exec(func(_ pgconn.CommandTag) error {
			return nil
		})
		report(nil)
	}
}

func rows(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var s string
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM gc`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// A batch with one failing statement fails as a whole, and every statement then runs alone, so
// the good ones commit and the failing one gets its own error.
func TestBatchFallbackGivesExactOutcomes(t *testing.T) {
	t.Parallel()
	pool := newTable(t)
	c := New(pool, slog.New(slog.DiscardHandler), 10, 30*time.Second)
	errs := c.CommitTogether(insert(1, 1), insert(2, -1), insert(3, 1))
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("good statements: %v, %v", errs[0], errs[2])
	}
	var pgErr *pgconn.PgError
	if !errors.As(errs[1], &pgErr) || pgErr.Code != "23514" {
		t.Errorf("failing statement: %v, want its check violation", errs[1])
	}
	if got := rows(t, pool); got != "1,3" {
		t.Fatalf("rows %q, want 1,3", got)
	}
}

// Requests submitted concurrently are committed by Run, together, each with its own outcome.
func TestRunCommitsWaitingRequests(t *testing.T) {
	t.Parallel()
	pool := newTable(t)
	c := New(pool, slog.New(slog.DiscardHandler), 10, 30*time.Second)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, v := range []int{1, -1, 1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Do(context.Background(), insert(i+1, v))
		}()
	}
	for len(c.reqs) < 3 {
		time.Sleep(time.Millisecond)
	}
	quit := make(chan struct{})
	close(quit)
	c.Run(quit) // drains what is waiting, then returns
	wg.Wait()
	if errs[0] != nil || errs[2] != nil || errs[1] == nil {
		t.Fatalf("outcomes %v", errs)
	}
	if got := rows(t, pool); got != "1,3" {
		t.Fatalf("rows %q, want 1,3", got)
	}
}

// idsInsert is a Set: one INSERT for all its ids; an id already present is left out (ErrAlone).
type idsInsert struct {
	ids  []int
	done map[int]func(error)
}

func (s *idsInsert) Queue(b *pgx.Batch) {
	b.Queue(`INSERT INTO gc (id, v) SELECT unnest($1::int[]), 1 ON CONFLICT DO NOTHING RETURNING id`, s.ids).Query(func(rows pgx.Rows) error {
		got := map[int]bool{}
		for rows.Next() {
			var id int
			if err := rows.Scan(&id); err != nil {
				return err
			}
			got[id] = true
		}
		for _, id := range s.ids {
			if got[id] {
				s.done[id](nil)
			} else {
				s.done[id](ErrAlone)
			}
		}
		return rows.Err()
	})
}

// insertVia joins the set of its batch; alone, it runs its single INSERT.
func insertVia(statements *[]string, mu *sync.Mutex, id int) func(b *Batch, report func(error)) {
	return func(b *Batch, report func(error)) {
		set, ok := b.Join("gc", func() Set { return &idsInsert{done: map[int]func(error){}} })
		mu.Lock()
		*statements = append(*statements, fmt.Sprintf("%d:%v", id, ok))
		mu.Unlock()
		if ok {
			s := set.(*idsInsert)
			s.ids = append(s.ids, id)
			s.done[id] = report
			return
		}
		b.Queue(`INSERT INTO gc (id, v) VALUES ($1, 1)`, id).Exec(func(_ pgconn.CommandTag) error { return nil })
		report(nil)
	}
}

// Members of a set share one statement; the one it leaves out runs again alone, gets its own
// exact error, and does not undo the others.
func TestSetLeavesOutRunAlone(t *testing.T) {
	t.Parallel()
	pool := newTable(t)
	if _, err := pool.Exec(context.Background(), `INSERT INTO gc VALUES (2, 1)`); err != nil {
		t.Fatal(err)
	}
	c := New(pool, slog.New(slog.DiscardHandler), 10, 30*time.Second)
	var joins []string
	var mu sync.Mutex
	errs := c.CommitTogether(insertVia(&joins, &mu, 1), insertVia(&joins, &mu, 2), insertVia(&joins, &mu, 3))
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("members the set carried out: %v, %v", errs[0], errs[2])
	}
	var pgErr *pgconn.PgError
	if !errors.As(errs[1], &pgErr) || pgErr.Code != "23505" {
		t.Errorf("member left out: %v, want its unique violation from the single statement", errs[1])
	}
	// 1, 2, 3 joined the set; 2 then ran alone with its single statement.
	if fmt.Sprint(joins) != "[1:true 2:true 3:true 2:false]" {
		t.Errorf("joins %v", joins)
	}
	if got := rows(t, pool); got != "1,2,3" {
		t.Fatalf("rows %q, want 1,2,3", got)
	}
}

// A request alone in its batch never joins a set.
func TestSingleRequestRunsAlone(t *testing.T) {
	t.Parallel()
	pool := newTable(t)
	c := New(pool, slog.New(slog.DiscardHandler), 10, 30*time.Second)
	var joins []string
	var mu sync.Mutex
	if errs := c.CommitTogether(insertVia(&joins, &mu, 7)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if fmt.Sprint(joins) != "[7:false]" {
		t.Fatalf("joins %v", joins)
	}
}

// TestOverlapCommitsBesideABlockedBatch: with two executors taking turns, a batch whose statement
// waits for a row lock does not hold up the others: they commit beside it after the overlap, while
// the lock is still held (it is released only once they all have committed, or the test fails).
func TestOverlapCommitsBesideABlockedBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newTable(t)
	if _, err := pool.Exec(ctx, `INSERT INTO gc (id, v) VALUES (1, 1)`); err != nil {
		t.Fatal(err)
	}
	locker, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = locker.Rollback(ctx) }()
	if _, err := locker.Exec(ctx, `SELECT 1 FROM gc WHERE id = 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	c := New(pool, slog.New(slog.DiscardHandler), 10, 30*time.Second).Overlap(20 * time.Millisecond)
	quit := make(chan struct{})
	var executors sync.WaitGroup
	for range 2 {
		executors.Go(func() { c.Run(quit) })
	}
	defer func() { close(quit); executors.Wait() }()

	blocked := make(chan error, 1)
	go func() {
		blocked <- c.Do(ctx, func(b *Batch, report func(error)) {
			b.Queue(`UPDATE gc SET v = 2 WHERE id = 1`).Exec(func(pgconn.CommandTag) error { return nil })
			report(nil)
		})
	}()
	// Wait until the blocked statement is waiting for its lock.
	for waiting := false; !waiting; time.Sleep(5 * time.Millisecond) {
		if err := pool.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE gc%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	others := make(chan error, 5)
	for i := range 5 {
		go func() { others <- c.Do(ctx, insert(10+i, 1)) }()
	}
	deadline := time.After(20 * time.Second)
	for range 5 {
		select {
		case err := <-others:
			if err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatal("the other commits waited for the blocked batch")
		}
	}
	if got := rows(t, pool); got != "1,10,11,12,13,14" {
		t.Fatalf("rows %s", got)
	}
	if err := locker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-blocked; err != nil {
		t.Fatalf("the blocked statement, once the lock was released: %v", err)
	}
}

// lockRow inserts row id and holds a row lock on it until the returned release is called.
func lockRow(t *testing.T, pool *pgxpool.Pool, id int) (release func()) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO gc (id, v) VALUES ($1, 1)`, id); err != nil {
		t.Fatal(err)
	}
	locker, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locker.Exec(ctx, `SELECT 1 FROM gc WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = locker.Rollback(ctx) }) }
	t.Cleanup(release)
	return release
}

func update(id, v int) func(b *Batch, report func(error)) {
	return func(b *Batch, report func(error)) {
		b.Queue(`UPDATE gc SET v = $2 WHERE id = $1`, id, v).Exec(func(pgconn.CommandTag) error { return nil })
		report(nil)
	}
}

// A statement waiting for a row lock fails its batch on the lock timeout and fails alone on it
// again, while the statements that only shared its batch commit alone: they are neither left
// without time (before, the fallback ran on the batch's expired deadline) nor held for a timeout
// each.
func TestInnocentStatementsCommitBesideALockWait(t *testing.T) {
	t.Parallel()
	pool := newTable(t)
	lockRow(t, pool, 1)
	c := New(pool, slog.New(slog.DiscardHandler), 10, 4*time.Second) // lock_timeout 1 s
	errs := c.CommitTogether(update(1, 2), insert(2, 1), insert(3, 1))
	var pgErr *pgconn.PgError
	if !errors.As(errs[0], &pgErr) || pgErr.Code != "55P03" {
		t.Errorf("the statement waiting for the lock: %v, want its lock timeout (55P03)", errs[0])
	}
	if errs[1] != nil || errs[2] != nil {
		t.Errorf("the innocent statements: %v, %v; want committed", errs[1], errs[2])
	}
	if got := rows(t, pool); got != "1,2,3" {
		t.Fatalf("rows %q, want 1,2,3", got)
	}
}

// A batch whose outcome is unknown — its deadline passed while it ran, so the connection was cut
// and it may have committed — is not run again statement by statement, which could do a statement
// twice: every caller gets the error.
func TestUnknownOutcomeIsNotRunAgain(t *testing.T) {
	t.Parallel()
	pool := newTable(t)
	c := New(pool, slog.New(slog.DiscardHandler), 10, time.Second)
	sleep := func(b *Batch, report func(error)) {
		b.Queue(`SELECT pg_sleep(3)`).Exec(func(pgconn.CommandTag) error { return nil })
		report(nil)
	}
	errs := c.CommitTogether(insert(5, 1), sleep)
	for i, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("statement %d: %v, want the batch's deadline", i, err)
		}
	}
	if got := rows(t, pool); got != "" {
		t.Fatalf("rows %q: a statement of the cut batch ran again", got)
	}
}

// recorder keeps the messages and errors of the records logged.
type recorder struct {
	mu      sync.Mutex
	records []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, line)
	return nil
}

func (r *recorder) find(substr string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.records {
		if strings.Contains(l, substr) {
			return l, true
		}
	}
	return "", false
}

// A statement of a batch waits for a row lock for at most the batch's lock_timeout, a quarter of
// its timeout, not for the whole of it: the batch rolls back on the lock timeout (55P03) and every
// statement runs alone, where the one that waited commits once the lock is released.
func TestBatchWaitsForALockAtMostItsLockTimeout(t *testing.T) {
	t.Parallel()
	pool := newTable(t)
	release := lockRow(t, pool, 1)
	log := &recorder{}
	c := New(pool, slog.New(log), 10, 8*time.Second) // lock_timeout 2 s
	done := make(chan []error, 1)
	go func() { done <- c.CommitTogether(update(1, 2), insert(2, 1)) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if line, ok := log.find("rolled back"); ok {
			if !strings.Contains(line, "55P03") {
				t.Fatalf("the batch rolled back for another reason: %s", line)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the batch was still waiting for the lock after 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	release()
	for i, err := range <-done {
		if err != nil {
			t.Errorf("statement %d: %v", i, err)
		}
	}
	if got := rows(t, pool); got != "1,2" {
		t.Fatalf("rows %q, want 1,2", got)
	}
}
