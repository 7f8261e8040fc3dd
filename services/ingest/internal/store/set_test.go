package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/groupcommit"
	"github.com/boardreadyops/cloud/pkg/pgtest"
	"github.com/boardreadyops/cloud/services/ingest/internal/webhook"
)

// batchSQL records the statements of every batch sent.
type batchSQL struct {
	mu      sync.Mutex
	batches [][]string
}

func (bs *batchSQL) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (bs *batchSQL) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (bs *batchSQL) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	bs.mu.Lock()
	bs.batches = append(bs.batches, nil)
	bs.mu.Unlock()
	return ctx
}
func (bs *batchSQL) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	bs.mu.Lock()
	i := strings.Index(d.SQL, "boardreadyops_")
	bs.batches[len(bs.batches)-1] = append(bs.batches[len(bs.batches)-1], d.SQL[i:i+strings.IndexByte(d.SQL[i:], '(')])
	bs.mu.Unlock()
}
func (bs *batchSQL) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// The deliveries of one group commit are stored by one set-based statement; a redelivery — of a
// stored delivery, or the same id twice in the batch — runs alone and is reported as a duplicate
// with the stored inbox id.
func TestSetBasedAccepts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.NewURL(t))
	if err != nil {
		t.Fatal(err)
	}
	tr := &batchSQL{}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	old, err := (&Store{DB: pool}).Accept(ctx, delivery("d-old"), "")
	if err != nil {
		t.Fatal(err)
	}

	ids := []string{"d-new1", "d-old", "d-new2", "d-new1"}
	res := make([]webhook.Outcome, len(ids))
	var queues []func(*groupcommit.Batch, func(error))
	for i, id := range ids {
		queues = append(queues, queueAccept(id, acceptArgs(delivery(id), ""), &res[i]))
	}
	errs := groupcommit.New(pool, slog.New(slog.DiscardHandler), 64, 5*time.Second).CommitTogether(queues...)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("delivery %s: %v", ids[i], err)
		}
	}
	for i, want := range []struct {
		dup   bool
		inbox int64
	}{{false, 0}, {true, old.InboxID}, {false, 0}, {true, res[0].InboxID}} {
		if got := res[i]; got.Duplicate != want.dup || got.InboxID == 0 || (want.inbox != 0 && got.InboxID != want.inbox) || (got.JobID == 0) == !want.dup {
			t.Errorf("%s: %+v, want duplicate %v, inbox %d", ids[i], got, want.dup, want.inbox)
		}
	}
	var rows, jobs int
	_ = pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_inbox), (SELECT count(*) FROM control_plane_jobs)`).Scan(&rows, &jobs)
	if rows != 3 || jobs != 3 {
		t.Fatalf("%d inbox rows, %d jobs; want 3, 3", rows, jobs)
	}
	want := "[[boardreadyops_accept_webhooks] [boardreadyops_accept_webhook] [boardreadyops_accept_webhook]]"
	if got := fmt.Sprint(tr.batches); got != want {
		t.Fatalf("batches %s\nwant    %s", got, want)
	}
}
