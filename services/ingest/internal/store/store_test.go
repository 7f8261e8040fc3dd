package store

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/groupcommit"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
	"github.com/boardreadyops/cloud/services/ingest/internal/webhook"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func delivery(id string) webhook.Delivery {
	return webhook.Delivery{ID: id, Event: "ping", Document: []byte(`{"ping":{"zen":"z"}}`), PayloadSHA256: sha256.Sum256([]byte(id))}
}

// Concurrent deliveries through the group committer: each is stored exactly once and gets its
// own outcome; a redelivery is reported as a duplicate; one bad delivery in a batch fails alone.
func TestGroupCommitOutcomes(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	group := groupcommit.New(pool, slog.New(slog.DiscardHandler), 64, 5*time.Second)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); group.Run(quit) }()
	defer func() { close(quit); <-done }()
	s := &Store{DB: pool, Group: group}
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
			if errs[i] == nil {
				t.Error("the delivery with a malformed traceparent was stored")
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
