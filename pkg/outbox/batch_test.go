package outbox_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/sqlstate"
)

func TestQueuedCompletions(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	create := enqueueCreate(t, ctx, b, seedRun(t, ctx, b))
	claimOne(t, ctx, b, "w1", create)

	// A batch of one good completion: committed, dispatch id reported.
	batch := &pgx.Batch{}
	var dispatchID int64
	var gotErr error
	b.store.QueueCompleteCheckRunCreate(batch, create, "w1", 321, func(id int64, err error) { dispatchID, gotErr = id, err })
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if gotErr != nil || dispatchID == 0 {
		t.Fatalf("dispatch %d err %v", dispatchID, gotErr)
	}
	wantStatus(t, ctx, b, create, outbox.StatusCompleted)

	// A stale completion in a batch reports its own classified error.
	claimOne(t, ctx, b, "w2", dispatchID)
	batch = &pgx.Batch{}
	var staleErr error
	b.store.QueueCompleteWorkflowDispatch(batch, dispatchID, "w-stale", 9, func(err error) { staleErr = err })
	err = b.pool.SendBatch(ctx, batch).Close()
	if !errors.Is(staleErr, sqlstate.ErrLeaseNotHeld) || err == nil {
		t.Fatalf("stale completion: callback %v, batch %v", staleErr, err)
	}
	wantStatus(t, ctx, b, dispatchID, outbox.StatusLeased)
}

func TestQueuedStartDelivery(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	create := enqueueCreate(t, ctx, b, seedRun(t, ctx, b))
	claimOne(t, ctx, b, "w1", create)
	if _, err := b.pool.Exec(ctx, `UPDATE control_plane_outbox SET delivery_started_at = NULL WHERE id = $1`, create); err != nil {
		t.Fatal(err)
	}

	batch := &pgx.Batch{}
	var stale, mine error
	b.store.QueueStartDelivery(batch, create, "w-stale", func(err error) { stale = err })
	if err := b.pool.SendBatch(ctx, batch).Close(); err == nil || !errors.Is(stale, sqlstate.ErrLeaseNotHeld) {
		t.Fatalf("stale start: callback %v, batch %v", stale, err)
	}
	if e := wantStatus(t, ctx, b, create, outbox.StatusLeased); e.DeliveryStartedAt != nil {
		t.Fatalf("refused start recorded %v", e.DeliveryStartedAt)
	}

	batch = &pgx.Batch{}
	b.store.QueueStartDelivery(batch, create, "w1", func(err error) { mine = err })
	if err := b.pool.SendBatch(ctx, batch).Close(); err != nil || mine != nil {
		t.Fatalf("start: callback %v, batch %v", mine, err)
	}
	if e := wantStatus(t, ctx, b, create, outbox.StatusLeased); e.DeliveryStartedAt == nil {
		t.Fatal("delivery start not recorded")
	}
}
