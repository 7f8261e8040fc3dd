package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/sqlstate"
)

// state builders bring a fresh workflow dispatch (or check run creation) into one state and return
// its id. The worker that holds a lease is always "w1".
type builder func(t *testing.T, ctx context.Context, b *bundle) int64

var (
	dispatchAvailable builder = func(t *testing.T, ctx context.Context, b *bundle) int64 {
		return dispatchFor(t, ctx, b, createRun(t, ctx, b))
	}
	dispatchLeased builder = func(t *testing.T, ctx context.Context, b *bundle) int64 {
		id := dispatchAvailable(t, ctx, b)
		claimOne(t, ctx, b, "w1", id)
		return id
	}
	dispatchStarted builder = func(t *testing.T, ctx context.Context, b *bundle) int64 {
		id := dispatchLeased(t, ctx, b)
		if _, err := b.store.StartDelivery(ctx, b.pool, id, "w1"); err != nil {
			t.Fatal(err)
		}
		return id
	}
	dispatchCompleted builder = func(t *testing.T, ctx context.Context, b *bundle) int64 {
		id := dispatchStarted(t, ctx, b)
		if err := b.store.CompleteWorkflowDispatch(ctx, b.pool, id, "w1", randomID()); err != nil {
			t.Fatal(err)
		}
		return id
	}
	dispatchDeadLetter builder = func(t *testing.T, ctx context.Context, b *bundle) int64 {
		id := dispatchLeased(t, ctx, b)
		if err := b.store.DeadLetter(ctx, b.pool, id, "w1", "404 workflow not found"); err != nil {
			t.Fatal(err)
		}
		return id
	}
	dispatchReconciliation builder = func(t *testing.T, ctx context.Context, b *bundle) int64 {
		id := dispatchStarted(t, ctx, b)
		if err := b.store.RequireReconciliation(ctx, b.pool, id, "w1", "connection reset after write"); err != nil {
			t.Fatal(err)
		}
		return id
	}
	createLeased builder = func(t *testing.T, ctx context.Context, b *bundle) int64 {
		id := enqueueCreate(t, ctx, b, createRun(t, ctx, b))
		claimOne(t, ctx, b, "w1", id)
		return id
	}
)

type operation func(ctx context.Context, b *bundle, id int64) error

var (
	opStart = func(ctx context.Context, b *bundle, id int64) error {
		_, err := b.store.StartDelivery(ctx, b.pool, id, "w1")
		return err
	}
	opCompleteDispatch = func(ctx context.Context, b *bundle, id int64) error {
		return b.store.CompleteWorkflowDispatch(ctx, b.pool, id, "w1", randomID())
	}
	opCompleteDispatchOther = func(ctx context.Context, b *bundle, id int64) error {
		return b.store.CompleteWorkflowDispatch(ctx, b.pool, id, "w2", randomID())
	}
	opCompleteCreate = func(ctx context.Context, b *bundle, id int64) error {
		_, err := b.store.CompleteCheckRunCreate(ctx, b.pool, id, "w1", 77)
		return err
	}
	opCompleteComplete = func(ctx context.Context, b *bundle, id int64) error {
		return b.store.CompleteCheckRunComplete(ctx, b.pool, id, "w1")
	}
	opRetry = func(ctx context.Context, b *bundle, id int64) error {
		_, err := b.store.Retry(ctx, b.pool, id, "w1", "dial tcp: connection refused", b.clock.Now().Add(time.Second))
		return err
	}
	opRetryOther = func(ctx context.Context, b *bundle, id int64) error {
		_, err := b.store.Retry(ctx, b.pool, id, "w2", "dial tcp: connection refused", b.clock.Now())
		return err
	}
	opDefer = func(ctx context.Context, b *bundle, id int64) error {
		return b.store.Defer(ctx, b.pool, id, "w1", b.clock.Now().Add(time.Minute), "rate limited")
	}
	opRelease = func(ctx context.Context, b *bundle, id int64) error {
		return b.store.Release(ctx, b.pool, id, "w1")
	}
	opDeadLetter = func(ctx context.Context, b *bundle, id int64) error {
		return b.store.DeadLetter(ctx, b.pool, id, "w1", "422 unprocessable")
	}
	opRequireReconciliation = func(ctx context.Context, b *bundle, id int64) error {
		return b.store.RequireReconciliation(ctx, b.pool, id, "w1", "timeout after write")
	}
	opReplay = func(ctx context.Context, b *bundle, id int64) error {
		_, err := b.store.Replay(ctx, b.pool, id, "alice", "workflow file restored")
		return err
	}
	opRepair = func(ctx context.Context, b *bundle, id int64) error {
		return b.store.ResolveReconciliationRepair(ctx, b.pool, id, "alice", randomID(), "run found on GitHub")
	}
	opSupersede = func(ctx context.Context, b *bundle, id int64) error {
		_, err := b.store.ResolveReconciliationSupersede(ctx, b.pool, id, "alice", "no run on GitHub after 10 minutes")
		return err
	}
)

// TestTransitions covers every operation from every state: legal ones reach their status, illegal
// ones are refused with the classified error and change nothing.
func TestTransitions(t *testing.T) {
	t.Parallel()
	const unchanged = ""
	tests := []struct {
		name       string
		from       builder
		op         operation
		wantErr    error
		wantStatus string // status afterwards; unchanged means the starting status
	}{
		// available: nothing but claim (and enqueue) applies.
		{"available/start", dispatchAvailable, opStart, sqlstate.ErrLeaseNotHeld, unchanged},
		{"available/complete", dispatchAvailable, opCompleteDispatch, sqlstate.ErrLeaseNotHeld, unchanged},
		{"available/retry", dispatchAvailable, opRetry, sqlstate.ErrLeaseNotHeld, unchanged},
		{"available/defer", dispatchAvailable, opDefer, sqlstate.ErrLeaseNotHeld, unchanged},
		{"available/release", dispatchAvailable, opRelease, sqlstate.ErrLeaseNotHeld, unchanged},
		{"available/dead-letter", dispatchAvailable, opDeadLetter, sqlstate.ErrLeaseNotHeld, unchanged},
		{"available/reconcile", dispatchAvailable, opRequireReconciliation, sqlstate.ErrLeaseNotHeld, unchanged},
		{"available/replay", dispatchAvailable, opReplay, sqlstate.ErrIllegalState, unchanged},
		{"available/repair", dispatchAvailable, opRepair, sqlstate.ErrIllegalState, unchanged},

		// leased, delivery not started.
		{"leased/start", dispatchLeased, opStart, nil, outbox.StatusLeased},
		{"leased/complete before start", dispatchLeased, opCompleteDispatch, sqlstate.ErrIllegalState, unchanged},
		{"leased/complete wrong type", dispatchLeased, opCompleteCreate, sqlstate.ErrWrongEffectType, unchanged},
		{"leased/complete-complete wrong type", dispatchLeased, opCompleteComplete, sqlstate.ErrWrongEffectType, unchanged},
		{"leased/complete other worker", dispatchLeased, opCompleteDispatchOther, sqlstate.ErrLeaseNotHeld, unchanged},
		{"leased/retry", dispatchLeased, opRetry, nil, outbox.StatusAvailable},
		{"leased/retry other worker", dispatchLeased, opRetryOther, sqlstate.ErrLeaseNotHeld, unchanged},
		{"leased/defer", dispatchLeased, opDefer, nil, outbox.StatusAvailable},
		{"leased/release", dispatchLeased, opRelease, nil, outbox.StatusAvailable},
		{"leased/dead-letter", dispatchLeased, opDeadLetter, nil, outbox.StatusDeadLetter},
		{"leased/reconcile before start", dispatchLeased, opRequireReconciliation, sqlstate.ErrIllegalState, unchanged},
		{"leased/replay", dispatchLeased, opReplay, sqlstate.ErrIllegalState, unchanged},
		{"leased/supersede", dispatchLeased, opSupersede, sqlstate.ErrIllegalState, unchanged},
		{"leased create/reconcile wrong type", createLeased, opRequireReconciliation, sqlstate.ErrWrongEffectType, unchanged},
		{"leased create/complete dispatch wrong type", createLeased, opCompleteDispatch, sqlstate.ErrWrongEffectType, unchanged},

		// leased, delivery started.
		{"started/complete", dispatchStarted, opCompleteDispatch, nil, outbox.StatusCompleted},
		{"started/reconcile", dispatchStarted, opRequireReconciliation, nil, outbox.StatusReconciliationRequired},
		{"started/release refused", dispatchStarted, opRelease, sqlstate.ErrIllegalState, unchanged},
		{"started/retry when provably not delivered", dispatchStarted, opRetry, nil, outbox.StatusAvailable},
		{"started/dead-letter", dispatchStarted, opDeadLetter, nil, outbox.StatusDeadLetter},

		// completed: terminal.
		{"completed/complete again", dispatchCompleted, opCompleteDispatch, sqlstate.ErrLeaseNotHeld, unchanged},
		{"completed/retry", dispatchCompleted, opRetry, sqlstate.ErrLeaseNotHeld, unchanged},
		{"completed/dead-letter", dispatchCompleted, opDeadLetter, sqlstate.ErrLeaseNotHeld, unchanged},
		{"completed/replay", dispatchCompleted, opReplay, sqlstate.ErrIllegalState, unchanged},
		{"completed/repair", dispatchCompleted, opRepair, sqlstate.ErrIllegalState, unchanged},

		// dead letter: only replay.
		{"dead-letter/replay", dispatchDeadLetter, opReplay, nil, outbox.StatusAvailable},
		{"dead-letter/complete", dispatchDeadLetter, opCompleteDispatch, sqlstate.ErrLeaseNotHeld, unchanged},
		{"dead-letter/retry", dispatchDeadLetter, opRetry, sqlstate.ErrLeaseNotHeld, unchanged},
		{"dead-letter/supersede", dispatchDeadLetter, opSupersede, sqlstate.ErrIllegalState, unchanged},

		// reconciliation required: never replayed, only resolved.
		{"reconciliation/replay refused", dispatchReconciliation, opReplay, sqlstate.ErrReconciliationRequired, unchanged},
		{"reconciliation/complete", dispatchReconciliation, opCompleteDispatch, sqlstate.ErrLeaseNotHeld, unchanged},
		{"reconciliation/retry", dispatchReconciliation, opRetry, sqlstate.ErrLeaseNotHeld, unchanged},
		{"reconciliation/release", dispatchReconciliation, opRelease, sqlstate.ErrLeaseNotHeld, unchanged},
		{"reconciliation/repair", dispatchReconciliation, opRepair, nil, outbox.StatusCompleted},
		{"reconciliation/supersede", dispatchReconciliation, opSupersede, nil, outbox.StatusCompleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, b := setup(t)
			id := tt.from(t, ctx, b)
			before := mustGet(t, ctx, b, id)
			err := tt.op(ctx, b, id)
			if tt.wantErr == nil && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			after := mustGet(t, ctx, b, id)
			want := tt.wantStatus
			if want == unchanged {
				want = before.Status
				if after.UpdatedAt != before.UpdatedAt || after.Attempts != before.Attempts {
					t.Fatalf("refused operation changed the record: before %+v after %+v", before, after)
				}
			}
			if after.Status != want {
				t.Fatalf("status %s, want %s", after.Status, want)
			}
		})
	}
}
