package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/groupcommit"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
	"github.com/boardreadyops/cloud/services/ingest/internal/webhook"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// groupStore is a Store on a fresh database whose accepts go through a running group committer,
// stopped when the test ends.
func groupStore(t *testing.T) (*Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.NewPool(t)
	group := groupcommit.New(pool, slog.New(slog.DiscardHandler), 64, 5*time.Second)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); group.Run(quit) }()
	t.Cleanup(func() { close(quit); <-done })
	return &Store{DB: pool, Group: group}, pool
}

func delivery(id string) webhook.Delivery {
	return webhook.Delivery{ID: id, Event: "ping", Document: []byte(`{"ping":{"zen":"z"}}`), PayloadSHA256: sha256.Sum256([]byte(id))}
}

// Concurrent deliveries through the group committer: each is stored exactly once and gets its
// own outcome; a redelivery is reported as a duplicate; one bad delivery in a batch fails alone.
func TestGroupCommitOutcomes(t *testing.T) {
	t.Parallel()
	s, pool := groupStore(t)
	ctx := context.Background()

	const n = 200
	outs := make([]webhook.Outcome, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := delivery(fmt.Sprintf("d-%d", i%150)) // ids 0..49 are sent twice
			tp := ""
			if i == 7 {
				tp = "not-a-traceparent" // violates the inbox CHECK: this delivery alone must fail
				d = delivery("bad")
			}
			outs[i], errs[i] = s.Accept(ctx, d, tp)
		}()
	}
	wg.Wait()
	dups := 0
	for i := range n {
		if i == 7 {
			if !errors.Is(errs[i], webhook.ErrUnstorable) {
				t.Errorf("the delivery with a malformed traceparent: %v, want it refused as unstorable", errs[i])
			}
			continue
		}
		if errs[i] != nil {
			t.Fatalf("delivery %d: %v", i, errs[i])
		}
		if outs[i].InboxID == 0 {
			t.Fatalf("delivery %d: no inbox id", i)
		}
		if outs[i].Duplicate {
			dups++
		}
	}
	var rows, jobs int
	_ = pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_inbox), (SELECT count(*) FROM control_plane_jobs)`).Scan(&rows, &jobs)
	// 150 distinct ids (d-7 is still sent by i=157); 200 sends minus 150 firsts minus the bad one.
	if rows != 150 || jobs != 150 || dups != 49 {
		t.Fatalf("%d inbox rows, %d jobs, %d duplicates; want 150, 150, 49", rows, jobs, dups)
	}
}

// A caller whose deadline passes gives up at once (ingest answers 503); the delivery may still
// be stored, and its redelivery is then a duplicate.
func TestGroupCommitAbandon(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	group := groupcommit.New(pool, slog.New(slog.DiscardHandler), 64, 5*time.Second)
	s := &Store{DB: pool, Group: group}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	// No Run loop yet: the statement is queued and nothing executes it.
	if _, err := s.Accept(ctx, delivery("late"), ""); err == nil {
		t.Fatal("accepted without a committer running")
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("the caller did not give up at its deadline")
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); group.Run(quit) }()
	defer func() { close(quit); <-done }()
	out, err := s.Accept(context.Background(), delivery("late"), "")
	if err != nil || !out.Duplicate {
		t.Fatalf("redelivery after the abandoned one: %+v, %v; want a duplicate", out, err)
	}
}

// Digests outlive the inbox: the sweep removes a digest only when it is older than the window and
// its delivery left the inbox; a window shorter than GitHub's 3-day redelivery window is refused.
func TestSweepDigestsKeepsWhatTheInboxKeeps(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	s := &Store{DB: pool}
	old := time.Now().Add(-40 * 24 * time.Hour)
	for _, id := range []string{"kept-in-inbox", "swept-from-inbox", "recent"} {
		at := old
		if id == "recent" {
			at = time.Now()
		}
		d := delivery(id)
		if _, err := pool.Exec(ctx, `SELECT boardreadyops_webhook_accept($1, 'ping', NULL, NULL, NULL, $2, $3, NULL, $4)`,
			d.ID, d.Document, d.PayloadSHA256[:], at); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `DELETE FROM webhook_inbox WHERE delivery_id IN ('swept-from-inbox', 'recent')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SELECT boardreadyops_webhook_sweep_digests('2 days')`); err == nil {
		t.Fatal("a window under 3 days was accepted")
	}
	var deleted int64
	if err := pool.QueryRow(ctx, `SELECT boardreadyops_webhook_sweep_digests('30 days')`).Scan(&deleted); err != nil || deleted != 1 {
		t.Fatalf("swept %d (%v), want 1", deleted, err)
	}
	for id, want := range map[string]bool{"kept-in-inbox": true, "swept-from-inbox": false, "recent": true} {
		d := delivery(id)
		out, err := s.Accept(ctx, webhook.Delivery{ID: "new-" + id, Event: "ping", Document: d.Document, PayloadSHA256: d.PayloadSHA256}, "")
		if err != nil {
			t.Fatal(err)
		}
		if out.Replayed != want {
			t.Errorf("%s: replayed %v after the sweep, want %v", id, out.Replayed, want)
		}
	}
}

// After a failover the pool still holds connections to the old primary, and each fails once on
// its next use (FATAL 57P01). A delivery that draws such a connection is written again on another
// one instead of being answered 503, which GitHub would never redeliver by itself; the pool is
// reset first, so that the write again does not draw another dead connection (here every one of
// the pool's four is dead, more than a write's tries). The dead connections are made by
// terminating their backends, with pgxpool's liveness ping turned off so that the pool hands them
// out as they are.
func TestAcceptRetriesALostConnection(t *testing.T) {
	t.Parallel()
	for _, group := range []bool{false, true} {
		t.Run(fmt.Sprintf("group=%v", group), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dbURL := pgtest.NewURL(t)
			cfg, err := pgxpool.ParseConfig(dbURL)
			if err != nil {
				t.Fatal(err)
			}
			const conns = 4
			cfg.MaxConns, cfg.MinConns = conns, 0
			cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			admin, err := pgx.Connect(ctx, dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close(ctx)
			s := &Store{DB: pool, Reset: pool.Reset}
			if group {
				g := groupcommit.New(pool, slog.New(slog.DiscardHandler), 64, 5*time.Second)
				quit, done := make(chan struct{}), make(chan struct{})
				go func() { defer close(done); g.Run(quit) }()
				defer func() { close(quit); <-done }()
				s.Group = g
			}
			// The old primary's end: every connection of the pool is dead.
			failover := func() {
				t.Helper()
				held := make([]*pgxpool.Conn, conns)
				for i := range held {
					if held[i], err = pool.Acquire(ctx); err != nil {
						t.Fatal(err)
					}
				}
				for _, c := range held {
					var killed bool
					if err := admin.QueryRow(ctx, `SELECT pg_terminate_backend($1, 10000)`, c.Conn().PgConn().PID()).Scan(&killed); err != nil || !killed {
						t.Fatalf("terminate backend %d: %v, %v", c.Conn().PgConn().PID(), killed, err)
					}
					c.Release()
				}
			}
			failover()
			out, err := s.Accept(ctx, delivery("after-failover"), "")
			if err != nil {
				t.Fatalf("delivery on a lost connection: %v", err)
			}
			if out.Duplicate || out.InboxID == 0 {
				t.Fatalf("delivery reported %+v, want stored", out)
			}
			failover()
			ignored := webhook.Delivery{ID: "ignored-after-failover", Event: "star", Ignored: true,
				PayloadSHA256: sha256.Sum256([]byte("ignored-after-failover"))}
			if out, err = s.Ignore(ctx, ignored); err != nil {
				t.Fatalf("ignored delivery on a lost connection: %v", err)
			}
			if out.Duplicate || out.Replayed {
				t.Fatalf("ignored delivery reported %+v, want a new body", out)
			}
			var rows, digests int
			if err := admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_inbox), (SELECT count(*) FROM webhook_body_digests)`).Scan(&rows, &digests); err != nil {
				t.Fatal(err)
			}
			if rows != 1 || digests != 2 {
				t.Fatalf("%d inbox rows and %d digests, want 1 and 2", rows, digests)
			}
		})
	}
}
