package store

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/groupcommit"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
	"github.com/boardreadyops/cloud/services/ingest/internal/webhook"
)

// The deliveries of one group commit are stored by one set-based statement; a redelivery — of a
// stored delivery, or the same id twice in the batch — runs alone and is reported as a duplicate
// with the stored inbox id.
func TestSetBasedAccepts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, tr := pgtest.NewBatchPool(t)
	old, err := (&Store{DB: pool}).Accept(ctx, delivery("d-old"), "")
	if err != nil {
		t.Fatal(err)
	}

	ids := []string{"d-new1", "d-old", "d-new2", "d-new1"}
	res := make([]webhook.Outcome, len(ids))
	var queues []func(*groupcommit.Batch, func(error))
	for i, id := range ids {
		queues = append(queues, queueAccept(delivery(id), "", &res[i]))
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
	want := "[[set_config boardreadyops_webhook_accept_batch] [set_config boardreadyops_webhook_accept] [set_config boardreadyops_webhook_accept]]"
	if got := tr.Functions(); got != want {
		t.Fatalf("batches %s\nwant    %s", got, want)
	}
}
