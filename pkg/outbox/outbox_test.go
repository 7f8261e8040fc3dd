package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/sqlstate"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

func TestStaleWorkerCannotCompleteAfterRecovery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		from     builder
		complete func(ctx context.Context, b *bundle, id int64, worker string) error
	}{
		{"check run create",
			func(t *testing.T, ctx context.Context, b *bundle) int64 {
				return enqueueCreate(t, ctx, b, createRun(t, ctx, b))
			},
			func(ctx context.Context, b *bundle, id int64, w string) error {
				_, err := b.store.CompleteCheckRunCreate(ctx, b.pool, id, w, 99)
				return err
			}},
		{"check run complete",
			func(t *testing.T, ctx context.Context, b *bundle) int64 {
				r := createRun(t, ctx, b)
				id, _, err := b.store.Enqueue(ctx, b.pool, outbox.NewEffect{EffectType: outbox.EffectCheckRunComplete,
					ReleaseRunID: r.ID, ExecutionAttemptID: r.AttemptID, InstallationID: r.InstallationID,
					Payload: map[string]any{"check_run_id": 1}})
				if err != nil {
					t.Fatal(err)
				}
				return id
			},
			func(ctx context.Context, b *bundle, id int64, w string) error {
				return b.store.CompleteCheckRunComplete(ctx, b.pool, id, w)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, b := setup(t)
			id := tt.from(t, ctx, b)
			claimOne(t, ctx, b, "w-old", id)
			b.clock.Advance(2 * time.Minute) // past the one-minute lease
			rec, err := b.store.RecoverLeases(ctx, b.pool, 100)
			if err != nil || len(rec) != 1 || rec[0].Status != outbox.StatusAvailable || rec[0].PreviousOwner != "w-old" {
				t.Fatalf("recover: %+v, %v", rec, err)
			}
			b.clock.Advance(15 * time.Second) // a started check run creation is searched for again after 15 s (00089)
			claimOne(t, ctx, b, "w-new", id)

			if err := tt.complete(ctx, b, id, "w-old"); !errors.Is(err, sqlstate.ErrLeaseNotHeld) {
				t.Fatalf("stale completion: %v, want ErrLeaseNotHeld", err)
			}
			if err := tt.complete(ctx, b, id, "w-new"); err != nil {
				t.Fatalf("owner's completion: %v", err)
			}
			wantStatus(t, ctx, b, id, outbox.StatusCompleted)
		})
	}
}

func TestStaleWorkerCannotCompleteDispatch(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	id := dispatchFor(t, ctx, b, createRun(t, ctx, b))
	claimOne(t, ctx, b, "w-old", id)
	// The old worker dies before starting delivery; the lease expires and another worker takes over.
	b.clock.Advance(2 * time.Minute)
	if _, err := b.store.RecoverLeases(ctx, b.pool, 100); err != nil {
		t.Fatal(err)
	}
	claimOne(t, ctx, b, "w-new", id)
	if _, err := b.store.StartDelivery(ctx, b.pool, id, "w-old"); !errors.Is(err, sqlstate.ErrLeaseNotHeld) {
		t.Fatalf("stale start: %v", err)
	}
	if err := b.store.CompleteWorkflowDispatch(ctx, b.pool, id, "w-old", 1); !errors.Is(err, sqlstate.ErrLeaseNotHeld) {
		t.Fatalf("stale completion: %v", err)
	}
}

func TestStartDeliveryRefusedAfterLeaseExpiry(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	id := dispatchFor(t, ctx, b, createRun(t, ctx, b))
	claimOne(t, ctx, b, "w1", id)
	b.clock.Advance(61 * time.Second)
	if _, err := b.store.StartDelivery(ctx, b.pool, id, "w1"); !errors.Is(err, sqlstate.ErrLeaseNotHeld) {
		t.Fatalf("start after expiry: %v, want ErrLeaseNotHeld", err)
	}
	if e := wantStatus(t, ctx, b, id, outbox.StatusLeased); e.DeliveryStartedAt != nil {
		t.Fatal("delivery_started_at recorded after expiry")
	}
}

func TestLeaseExpiryRecovery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		dispatch    bool
		start       bool
		maxAttempts int
		claims      int
		want        string
	}{
		{"started dispatch needs reconciliation", true, true, 10, 1, outbox.StatusReconciliationRequired},
		{"unstarted dispatch returns to queue", true, false, 10, 1, outbox.StatusAvailable},
		{"started check run creation returns to queue", false, true, 10, 1, outbox.StatusAvailable},
		{"unstarted check run creation returns to queue", false, false, 10, 1, outbox.StatusAvailable},
		{"exhausted check run creation is dead-lettered", false, true, 2, 2, outbox.StatusDeadLetter},
		{"exhausted but started dispatch still needs reconciliation", true, true, 1, 1, outbox.StatusReconciliationRequired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, b := setup(t)
			r := createRun(t, ctx, b)
			var id int64
			if tt.dispatch {
				id = dispatchFor(t, ctx, b, r)
			} else {
				id = enqueueCreate(t, ctx, b, r)
			}
			if _, err := b.pool.Exec(ctx, `UPDATE control_plane_outbox SET max_attempts = $2 WHERE id = $1`, id, tt.maxAttempts); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < tt.claims; i++ {
				claimOne(t, ctx, b, fmt.Sprintf("w%d", i), id)
				if tt.start {
					if _, err := b.store.StartDelivery(ctx, b.pool, id, fmt.Sprintf("w%d", i)); err != nil {
						t.Fatal(err)
					}
				}
				// Not yet expired: recovery leaves the lease alone.
				b.clock.Advance(59 * time.Second)
				if rec, _ := b.store.RecoverLeases(ctx, b.pool, 100); len(rec) != 0 {
					t.Fatalf("recovered a live lease: %+v", rec)
				}
				b.clock.Advance(2 * time.Second)
				rec, err := b.store.RecoverLeases(ctx, b.pool, 100)
				if err != nil || len(rec) != 1 {
					t.Fatalf("recover: %+v %v", rec, err)
				}
				recovered := b.clock.Now()
				// A check run creation (its claim records its delivery's start) may still be made
				// by GitHub: it is searched for again only after 15 s (00089), a dispatch at once.
				settle := time.Duration(0)
				if !tt.dispatch {
					settle = 15 * time.Second
				}
				if i == tt.claims-1 && tt.want == outbox.StatusAvailable {
					if e := wantStatus(t, ctx, b, id, tt.want); !e.AvailableAt.Equal(recovered.Add(settle)) {
						t.Fatalf("available %v after the recovery, want %v", e.AvailableAt.Sub(recovered), settle)
					}
				}
				b.clock.Advance(settle)
			}
			e := wantStatus(t, ctx, b, id, tt.want)
			if e.LeaseOwner != nil || e.LeaseExpiresAt != nil {
				t.Fatal("lease fields left set after recovery")
			}
			if tt.want == outbox.StatusReconciliationRequired && e.DeliveryStartedAt == nil {
				t.Fatal("reconciliation record lost delivery_started_at")
			}
			if e.LastError == nil || !strings.Contains(*e.LastError, "expired") {
				t.Fatalf("last_error %v does not explain the expiry", deref(e.LastError))
			}
		})
	}
}

func TestRetryExhaustsToDeadLetter(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	id := enqueueCreate(t, ctx, b, createRun(t, ctx, b))
	if _, err := b.pool.Exec(ctx, `UPDATE control_plane_outbox SET max_attempts = 3 WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{outbox.StatusAvailable, outbox.StatusAvailable, outbox.StatusDeadLetter} {
		claimOne(t, ctx, b, "w1", id)
		got, err := b.store.Retry(ctx, b.pool, id, "w1", "502 bad gateway", b.clock.Now().Add(10*time.Second))
		if err != nil || got != want {
			t.Fatalf("retry %d: status %q err %v, want %q", i+1, got, err, want)
		}
		if want == outbox.StatusAvailable {
			// Not due before the retry time.
			if early, _ := b.store.Claim(ctx, b.pool, "w1", 10, time.Minute); len(early) != 0 {
				t.Fatal("claimed before retry time")
			}
			b.clock.Advance(10 * time.Second)
		}
	}
	e := wantStatus(t, ctx, b, id, outbox.StatusDeadLetter)
	if e.Attempts != 3 || !strings.Contains(*e.LastError, "attempts exhausted (3 of 3)") {
		t.Fatalf("attempts %d last error %q", e.Attempts, deref(e.LastError))
	}
}

func TestDeferDoesNotSpendAttempts(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	id := enqueueCreate(t, ctx, b, createRun(t, ctx, b))
	for i := 0; i < 20; i++ { // far more deferrals than max_attempts
		claimOne(t, ctx, b, "w1", id)
		if err := b.store.Defer(ctx, b.pool, id, "w1", b.clock.Now().Add(30*time.Second), "secondary rate limit"); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(30 * time.Second)
	}
	if e := wantStatus(t, ctx, b, id, outbox.StatusAvailable); e.Attempts != 0 {
		t.Fatalf("deferrals spent %d attempts", e.Attempts)
	}
	if err := func() error {
		claimOne(t, ctx, b, "w1", id)
		return b.store.Defer(ctx, b.pool, id, "w1", b.clock.Now().Add(3*time.Hour), "too far")
	}(); !errors.Is(err, sqlstate.ErrInvalidArgument) {
		t.Fatalf("defer 3h ahead: %v, want ErrInvalidArgument", err)
	}
}

func TestReplay(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	id := dispatchDeadLetter(t, ctx, b)
	e, err := b.store.Replay(ctx, b.pool, id, "alice", "workflow file restored")
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != outbox.StatusAvailable || e.Attempts != 0 || e.DeliveryStartedAt != nil {
		t.Fatalf("replayed record %+v", e)
	}
	var operator, action, reason, from, to string
	err = b.pool.QueryRow(ctx, `SELECT operator, action, reason, from_status, to_status FROM control_plane_audit
		WHERE subject_type = 'outbox' AND subject_id = $1`, id).Scan(&operator, &action, &reason, &from, &to)
	if err != nil {
		t.Fatal(err)
	}
	if operator != "alice" || action != "outbox.replay" || reason != "workflow file restored" || from != "dead_letter" || to != "available" {
		t.Fatalf("audit row %s %s %s %s %s", operator, action, reason, from, to)
	}
	// The replayed record is claimable again.
	claimOne(t, ctx, b, "w9", id)

	// Missing identity or reason is refused.
	other := dispatchDeadLetter(t, ctx, b)
	for _, args := range [][2]string{{"", "why"}, {"alice", " "}} {
		if _, err := b.store.Replay(ctx, b.pool, other, args[0], args[1]); !errors.Is(err, sqlstate.ErrInvalidArgument) {
			t.Fatalf("replay %q %q: %v", args[0], args[1], err)
		}
	}
}

func TestReplayRefusesReconciliationWithGuidance(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	id := dispatchReconciliation(t, ctx, b)
	_, err := b.store.Replay(ctx, b.pool, id, "alice", "try again")
	if !errors.Is(err, sqlstate.ErrReconciliationRequired) {
		t.Fatalf("replay: %v", err)
	}
	if hint := sqlstate.Hint(err); !strings.Contains(hint, "brops reconcile") {
		t.Fatalf("hint %q does not say what to do instead", hint)
	}
	var n int
	_ = b.pool.QueryRow(ctx, `SELECT count(*) FROM control_plane_audit`).Scan(&n)
	if n != 0 {
		t.Fatalf("refused replay wrote %d audit rows", n)
	}
}

func TestResolveReconciliation(t *testing.T) {
	t.Parallel()
	t.Run("repair records the run and advances", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		id := dispatchReconciliation(t, ctx, b)
		e := mustGet(t, ctx, b, id)
		if err := b.store.ResolveReconciliationRepair(ctx, b.pool, id, "alice", 777001, "run 777001 found, run-name matches"); err != nil {
			t.Fatal(err)
		}
		var runStatus, attStatus string
		var wfRun int64
		err := b.pool.QueryRow(ctx, `SELECT r.status, a.status, a.workflow_run_id FROM release_runs r
			JOIN execution_attempts a ON a.release_run_id = r.id WHERE a.id = $1`, *e.ExecutionAttemptID).Scan(&runStatus, &attStatus, &wfRun)
		if err != nil {
			t.Fatal(err)
		}
		if runStatus != "running" || attStatus != "running" || wfRun != 777001 {
			t.Fatalf("run %s attempt %s workflow run %d", runStatus, attStatus, wfRun)
		}
		var action string
		var evidence json.RawMessage
		if err := b.pool.QueryRow(ctx, `SELECT action, evidence FROM control_plane_audit WHERE subject_id = $1`, id).Scan(&action, &evidence); err != nil {
			t.Fatal(err)
		}
		if action != "outbox.reconciliation.repair" || !strings.Contains(string(evidence), "777001") {
			t.Fatalf("audit %s %s", action, evidence)
		}
	})
	t.Run("supersede enqueues a fresh dispatch under a new key", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		id := dispatchReconciliation(t, ctx, b)
		old := mustGet(t, ctx, b, id)
		newID, err := b.store.ResolveReconciliationSupersede(ctx, b.pool, id, "alice", "no run on GitHub")
		if err != nil {
			t.Fatal(err)
		}
		closed := wantStatus(t, ctx, b, id, outbox.StatusCompleted)
		if closed.SupersededBy == nil || *closed.SupersededBy != newID {
			t.Fatalf("superseded_by %v, want %d", deref(closed.SupersededBy), newID)
		}
		fresh := wantStatus(t, ctx, b, newID, outbox.StatusAvailable)
		if fresh.IdempotencyKey != old.IdempotencyKey+":g1" || fresh.Generation != 1 ||
			*fresh.ExecutionAttemptID != *old.ExecutionAttemptID || string(fresh.Payload) != string(old.Payload) {
			t.Fatalf("fresh record %+v", fresh)
		}
		// The fresh dispatch runs through to completion.
		claimOne(t, ctx, b, "w5", newID)
		if _, err := b.store.StartDelivery(ctx, b.pool, newID, "w5"); err != nil {
			t.Fatal(err)
		}
		if err := b.store.CompleteWorkflowDispatch(ctx, b.pool, newID, "w5", 31337); err != nil {
			t.Fatal(err)
		}
		// A superseded record is closed for good: not replayable.
		if _, err := b.store.Replay(ctx, b.pool, id, "alice", "oops"); !errors.Is(err, sqlstate.ErrIllegalState) {
			t.Fatalf("replay superseded: %v", err)
		}
	})
	t.Run("evidence and identity are required", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		id := dispatchReconciliation(t, ctx, b)
		if err := b.store.ResolveReconciliationRepair(ctx, b.pool, id, "alice", 5, ""); !errors.Is(err, sqlstate.ErrInvalidArgument) {
			t.Fatalf("no evidence: %v", err)
		}
		if _, err := b.store.ResolveReconciliationSupersede(ctx, b.pool, id, "", "gone"); !errors.Is(err, sqlstate.ErrInvalidArgument) {
			t.Fatalf("no operator: %v", err)
		}
		wantStatus(t, ctx, b, id, outbox.StatusReconciliationRequired)
	})
	t.Run("only workflow dispatches", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		id := createLeased(t, ctx, b)
		if err := b.store.ResolveReconciliationRepair(ctx, b.pool, id, "alice", 5, "x"); !errors.Is(err, sqlstate.ErrWrongEffectType) {
			t.Fatalf("repair of a check run creation: %v", err)
		}
	})
}

// The outbox specification: workflow completion requires the run and attempt to advance; otherwise nothing
// completes and the record stays recoverable, eventually entering reconciliation.
func TestDispatchCompletionRequiresAdvance(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	id := dispatchStarted(t, ctx, b)
	e := mustGet(t, ctx, b, id)
	// The run was cancelled meanwhile (e.g. its installation was deleted).
	if _, err := b.pool.Exec(ctx, `UPDATE release_runs SET status = 'cancelled', completed_at = now() WHERE id = $1`, e.ReleaseRunID); err != nil {
		t.Fatal(err)
	}
	if err := b.store.CompleteWorkflowDispatch(ctx, b.pool, id, "w1", 5150); !errors.Is(err, sqlstate.ErrCannotAdvance) {
		t.Fatalf("complete: %v, want ErrCannotAdvance", err)
	}
	wantStatus(t, ctx, b, id, outbox.StatusLeased)
	var n int
	_ = b.pool.QueryRow(ctx, `SELECT count(*) FROM execution_attempts WHERE workflow_run_id = 5150`).Scan(&n)
	if n != 0 {
		t.Fatal("workflow run recorded although nothing completed")
	}
	b.clock.Advance(2 * time.Minute)
	if _, err := b.store.RecoverLeases(ctx, b.pool, 10); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, ctx, b, id, outbox.StatusReconciliationRequired)
}

func TestPipelineHappyPath(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	r := createRun(t, ctx, b)
	create := enqueueCreate(t, ctx, b, r)
	claimOne(t, ctx, b, "w1", create)
	if _, err := b.store.StartDelivery(ctx, b.pool, create, "w1"); err != nil {
		t.Fatal(err)
	}
	dispatch, err := b.store.CompleteCheckRunCreate(ctx, b.pool, create, "w1", 555)
	if err != nil {
		t.Fatal(err)
	}
	d := wantStatus(t, ctx, b, dispatch, outbox.StatusAvailable)
	if d.EffectType != outbox.EffectWorkflowDispatch || d.IdempotencyKey != "github.workflow.dispatch:"+r.ID+":"+r.AttemptID {
		t.Fatalf("dispatch %+v", d)
	}
	var payload map[string]any
	if err := json.Unmarshal(d.Payload, &payload); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"release_run_id", "execution_attempt_id", "repository_full_name", "workflow_file", "ref", "head_sha"} {
		if payload[k] == nil || payload[k] == "" {
			t.Errorf("dispatch payload lacks %s: %s", k, d.Payload)
		}
	}
	if payload["check_run_id"] != float64(555) {
		t.Errorf("dispatch payload check_run_id %v", payload["check_run_id"])
	}
	claimOne(t, ctx, b, "w2", dispatch)
	if _, err := b.store.StartDelivery(ctx, b.pool, dispatch, "w2"); err != nil {
		t.Fatal(err)
	}
	if err := b.store.CompleteWorkflowDispatch(ctx, b.pool, dispatch, "w2", 9001); err != nil {
		t.Fatal(err)
	}
	var status string
	var checkRun int64
	if err := b.pool.QueryRow(ctx, `SELECT status, check_run_id FROM release_runs WHERE id = $1`, r.ID).Scan(&status, &checkRun); err != nil {
		t.Fatal(err)
	}
	if status != "running" || checkRun != 555 {
		t.Fatalf("run status %s check run %d", status, checkRun)
	}
	// A second dispatch for the same attempt cannot exist.
	if _, inserted, err := b.store.Enqueue(ctx, b.pool, outbox.NewEffect{
		EffectType: outbox.EffectWorkflowDispatch, ReleaseRunID: r.ID, ExecutionAttemptID: r.AttemptID,
		InstallationID: r.InstallationID, Payload: map[string]any{},
	}); err != nil || inserted {
		t.Fatalf("duplicate dispatch enqueue: inserted %v err %v", inserted, err)
	}
	// The dispatch's completion updated the check run in the same transaction (migration 00021):
	// running, under the attempt's first check-run key.
	var complete int64
	var state string
	if err := b.pool.QueryRow(ctx, `SELECT id, payload ->> 'state' FROM control_plane_outbox
		WHERE idempotency_key = $1 AND status = 'available'`,
		"github.check_run.complete:"+r.ID+":"+r.AttemptID).Scan(&complete, &state); err != nil || state != "running" {
		t.Fatalf("check-run update after the dispatch: state %q err %v", state, err)
	}
	claimOne(t, ctx, b, "w3", complete)
	if err := b.store.CompleteCheckRunComplete(ctx, b.pool, complete, "w3"); err != nil {
		t.Fatal(err)
	}
	if e := wantStatus(t, ctx, b, complete, outbox.StatusCompleted); string(e.Result) != `{"check_run_id": 555}` {
		t.Fatalf("result %s", e.Result)
	}
}

func TestEnqueueConstraints(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	r := createRun(t, ctx, b)
	enqueueCreate(t, ctx, b, r)

	t.Run("duplicate idempotency key inserts nothing", func(t *testing.T) {
		id, inserted, err := b.store.Enqueue(ctx, b.pool, outbox.NewEffect{
			EffectType: outbox.EffectCheckRunCreate, ReleaseRunID: r.ID, InstallationID: r.InstallationID,
			Payload: map[string]any{"different": true},
		})
		if err != nil || inserted || id != 0 {
			t.Fatalf("id %d inserted %v err %v", id, inserted, err)
		}
		var n int
		_ = b.pool.QueryRow(ctx, `SELECT count(*) FROM control_plane_outbox WHERE release_run_id = $1`, r.ID).Scan(&n)
		if n != 1 {
			t.Fatalf("%d records", n)
		}
	})

	tests := []struct {
		name string
		e    outbox.NewEffect
	}{
		{"oversize payload", outbox.NewEffect{EffectType: outbox.EffectCheckRunComplete, ReleaseRunID: r.ID, ExecutionAttemptID: r.AttemptID,
			InstallationID: r.InstallationID, Payload: map[string]string{"summary": strings.Repeat("x", 9000)}}},
		{"payload not an object", outbox.NewEffect{EffectType: outbox.EffectCheckRunComplete, ReleaseRunID: r.ID, ExecutionAttemptID: r.AttemptID,
			InstallationID: r.InstallationID, Payload: []int{1, 2}}},
		{"unknown effect type", outbox.NewEffect{EffectType: "github.issue.create", ReleaseRunID: r.ID, ExecutionAttemptID: r.AttemptID,
			InstallationID: r.InstallationID, Payload: map[string]any{}}},
		{"dispatch without attempt", outbox.NewEffect{EffectType: outbox.EffectWorkflowDispatch, ReleaseRunID: r.ID,
			InstallationID: r.InstallationID, Payload: map[string]any{}}},
		{"check run create with attempt", outbox.NewEffect{EffectType: outbox.EffectCheckRunCreate, ReleaseRunID: r.ID, ExecutionAttemptID: r.AttemptID,
			InstallationID: r.InstallationID, Payload: map[string]any{}}},
		{"bad traceparent", outbox.NewEffect{EffectType: outbox.EffectCheckRunComplete, ReleaseRunID: r.ID, ExecutionAttemptID: r.AttemptID,
			InstallationID: r.InstallationID, Payload: map[string]any{}, Traceparent: "not-a-traceparent"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := b.store.Enqueue(ctx, b.pool, tt.e)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "23514" {
				t.Fatalf("error %v, want a check violation", err)
			}
		})
	}

	t.Run("a hand-written idempotency key is refused", func(t *testing.T) {
		_, err := b.pool.Exec(ctx, `INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, release_run_id, execution_attempt_id, installation_id)
			VALUES ('github.check_run.complete', 'my-own-key', '{}', $1, $2, $3)`, r.ID, r.AttemptID, r.InstallationID)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.ConstraintName != "control_plane_outbox_idempotency_key_check" {
			t.Fatalf("error %v, want the idempotency key check", err)
		}
	})
}

func TestClaimArgumentsAreBounded(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	tests := []struct {
		worker string
		limit  int
		lease  time.Duration
	}{
		{"", 10, time.Minute},
		{"w", 0, time.Minute},
		{"w", 1001, time.Minute},
		{"w", 10, 0},
		{"w", 10, 2 * time.Hour},
		{strings.Repeat("w", 201), 10, time.Minute},
	}
	for _, tt := range tests {
		if _, err := b.store.Claim(ctx, b.pool, tt.worker, tt.limit, tt.lease); !errors.Is(err, sqlstate.ErrInvalidArgument) {
			t.Errorf("claim(%q, %d, %v): %v, want ErrInvalidArgument", tt.worker, tt.limit, tt.lease, err)
		}
	}
}

func TestStats(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	// Two available (one of them retrying, due in an hour), one leased, one dead letter, one
	// reconciliation. Leased states are built first: building one claims whatever is available.
	retrying := dispatchLeased(t, ctx, b)
	dispatchLeased(t, ctx, b)
	dispatchDeadLetter(t, ctx, b)
	dispatchReconciliation(t, ctx, b)
	if _, err := b.store.Retry(ctx, b.pool, retrying, "w1", "503", b.clock.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	enqueueCreate(t, ctx, b, createRun(t, ctx, b))
	b.clock.Advance(45 * time.Second)

	st, err := b.store.Stats(ctx, b.pool)
	if err != nil {
		t.Fatal(err)
	}
	// The third available effect is the check-run update the reconciliation enqueued (00021);
	// the retrying one is not due, and the oldest age is of the due ones.
	want := outbox.Stats{Available: 3, Due: 2, Leased: 1, Retrying: 1, DeadLetter: 1, ReconciliationRequired: 1, OldestAvailableAgeSeconds: 45}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	// Nothing due: no oldest age (not the negative age of an effect due later).
	b.clock.Advance(-time.Hour)
	if st, err = b.store.Stats(ctx, b.pool); err != nil {
		t.Fatal(err)
	}
	if st.Due != 0 || st.OldestAvailableAgeSeconds != 0 {
		t.Fatalf("an hour earlier: stats %+v, want nothing due and no oldest age", st)
	}
}

// 16 concurrent claimers over 10,000 rows claim every row exactly once.
func TestConcurrentClaimersClaimEachRowOnce(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	const rows, claimers = 10000, 16
	r := createRun(t, ctx, b)
	// Many attempts of one run give many distinct check_run.complete keys cheaply.
	_, err := b.pool.Exec(ctx, `
		WITH a AS (
			INSERT INTO execution_attempts (release_run_id, number)
			SELECT $1, n FROM generate_series(2, $2 + 1) n RETURNING id
		)
		INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, release_run_id, execution_attempt_id, installation_id, available_at)
		SELECT 'github.check_run.complete', 'github.check_run.complete:' || $1 || ':' || a.id, '{}', $1, a.id, $3, $4 FROM a`,
		r.ID, rows, r.InstallationID, b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	store := &outbox.Store{} // database time: claimers really race
	var mu sync.Mutex
	seen := make(map[int64]string, rows)
	var wg sync.WaitGroup
	errs := make(chan error, claimers)
	for c := 0; c < claimers; c++ {
		wg.Add(1)
		go func(worker string) {
			defer wg.Done()
			for {
				batch, err := store.Claim(ctx, b.pool, worker, 50, time.Minute)
				if err != nil {
					errs <- err
					return
				}
				if len(batch) == 0 {
					return
				}
				mu.Lock()
				for _, e := range batch {
					if prev, dup := seen[e.ID]; dup {
						mu.Unlock()
						errs <- fmt.Errorf("effect %d claimed by %s and %s", e.ID, prev, worker)
						return
					}
					seen[e.ID] = worker
				}
				mu.Unlock()
			}
		}(fmt.Sprintf("claimer-%02d", c))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != rows {
		t.Fatalf("claimed %d distinct rows, want %d", len(seen), rows)
	}
	var leased, attempts int
	_ = b.pool.QueryRow(ctx, `SELECT count(*), sum(attempts) FROM control_plane_outbox WHERE status = 'leased'`).Scan(&leased, &attempts)
	if leased != rows || attempts != rows {
		t.Fatalf("leased %d with %d attempts, want %d each", leased, attempts, rows)
	}
}

// TestDeadLetterInstallationUsesTheClaimIndex: dead-lettering a deleted installation's effects
// reads the available rows through the claim index (the backlog), never the outbox's history,
// and dead-letters exactly that installation's available effects.
func TestDeadLetterInstallationUsesTheClaimIndex(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	// 3,000 release runs over 5 installations, each with its check-run creation effect; all but
	// the last 30 completed, as history accumulates.
	if _, err := b.pool.Exec(ctx, `
		INSERT INTO installations (id, account_login, account_type) SELECT i, 'org-' || i, 'Organization' FROM generate_series(1, 5) i;
		INSERT INTO repositories (id, installation_id, full_name) SELECT r, 1 + r % 5, 'org-' || (1 + r % 5) || '/repo-' || r FROM generate_series(1, 50) r;
		SELECT boardreadyops_release_run_create(1 + g % 50, 1 + (1 + g % 50) % 5, 'refs/tags/v' || g,
			substr(md5(g::text) || md5(g::text || 'x'), 1, 40), 'release.yml', 'BoardReadyOps release') FROM generate_series(1, 3000) g;
		UPDATE control_plane_outbox SET status = 'completed', completed_at = now() WHERE id <= (SELECT max(id) - 30 FROM control_plane_outbox);
		ANALYZE control_plane_outbox;`); err != nil {
		t.Fatal(err)
	}
	var want int64
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM control_plane_outbox WHERE installation_id = 3 AND status = 'available'`).Scan(&want); err != nil || want == 0 {
		t.Fatalf("installation 3 has %d available effects (%v)", want, err)
	}
	plans := pgtest.NewPlans(t, b.pool.Config().ConnString())
	var got int64
	if err := plans.Conn.QueryRow(ctx, `SELECT boardreadyops_outbox_dead_letter_installation(3, 'installation deleted')`).Scan(&got); err != nil || got != want {
		t.Fatalf("dead-lettered %d (%v), want %d", got, err, want)
	}
	update, all := plans.Find("Update on control_plane_outbox")
	if !strings.Contains(update, "control_plane_outbox_claim_idx") || strings.Contains(update, "Seq Scan") {
		t.Fatalf("installation dead-letter plan does not read the claim index:\n%s\n(all plans: %q)", update, all)
	}
	var left int64
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM control_plane_outbox WHERE status = 'available' AND installation_id <> 3`).Scan(&left); err != nil || left != 30-want {
		t.Fatalf("%d other installations' effects still available (%v), want %d", left, err, 30-want)
	}
}

// ScanEffect reads payload and result as the JSON PostgreSQL holds (bytes, not re-validated):
// a claimed effect's payload decodes to what was enqueued, and result is nil until completion.
func TestScanEffectJSON(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	rows, err := pool.Query(ctx, `SELECT `+outbox.Columns+` FROM (SELECT 1::bigint AS id, 'github.check_run.create' AS effect_type,
		'k' AS idempotency_key, 0 AS generation, '{"repository_full_name": "acme/app", "n": [1, 2]}'::jsonb AS payload,
		'leased' AS status, 1 AS attempts, 10 AS max_attempts, now() AS available_at, 'w' AS lease_owner,
		now() AS lease_expires_at, NULL::timestamptz AS delivery_started_at, NULL::timestamptz AS completed_at,
		NULL::text AS last_error, NULL::jsonb AS result, gen_random_uuid() AS release_run_id,
		NULL::uuid AS execution_attempt_id, 1::bigint AS installation_id, NULL::bigint AS superseded_by,
		NULL::text AS traceparent, now() AS created_at, now() AS updated_at) r`)
	if err != nil {
		t.Fatal(err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, outbox.ScanEffect)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Repository string `json:"repository_full_name"`
		N          []int  `json:"n"`
	}
	if err := json.Unmarshal(e.Payload, &p); err != nil || p.Repository != "acme/app" || len(p.N) != 2 {
		t.Errorf("payload %s: %+v, %v", e.Payload, p, err)
	}
	if e.Result != nil {
		t.Errorf("result %q, want nil for NULL", e.Result)
	}
}

// BenchmarkScanEffect scans a claim-sized batch (64 rows of Columns); its allocations per batch
// do not depend on the machine's load, unlike its time.
func BenchmarkScanEffect(b *testing.B) {
	ctx := context.Background()
	pool := pgtest.NewPool(b)
	query := `SELECT ` + outbox.Columns + ` FROM (SELECT g::bigint AS id, 'github.check_run.complete' AS effect_type,
		'k' || g AS idempotency_key, 0 AS generation,
		jsonb_build_object('repository_full_name', 'org-1/repo-' || g, 'check_run_id', g, 'conclusion', 'success') AS payload,
		'leased' AS status, 1 AS attempts, 10 AS max_attempts, now() AS available_at, 'outbox-dispatcher/host/1/abcd' AS lease_owner,
		now() AS lease_expires_at, now() AS delivery_started_at, NULL::timestamptz AS completed_at,
		NULL::text AS last_error, NULL::jsonb AS result, gen_random_uuid() AS release_run_id,
		gen_random_uuid() AS execution_attempt_id, 1::bigint AS installation_id, NULL::bigint AS superseded_by,
		NULL::text AS traceparent, now() AS created_at, now() AS updated_at FROM generate_series(1, 64) g) r`
	b.ReportAllocs()
	for b.Loop() {
		rows, err := pool.Query(ctx, query)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pgx.CollectRows(rows, outbox.ScanEffect); err != nil {
			b.Fatal(err)
		}
	}
}

// TestOlderCheckRunUpdateNeverSentAfterNewer: a check-run update in flight when its run moves on
// (a newer update enqueued) never goes back to the queue, whichever way it would: its lease
// expires (the dispatcher died, or a restore brought the lease back), a rate limit defers it, its
// worker releases it, or it fails. Sent after the newer one it would put a finished release's
// check run back in progress for good. Without a newer update each way returns it to the queue.
func TestOlderCheckRunUpdateNeverSentAfterNewer(t *testing.T) {
	t.Parallel()
	ways := []struct {
		name string
		// back tries to return the leased update id (held by "w-old") to the queue.
		back func(t *testing.T, ctx context.Context, b *bundle, id int64)
	}{
		{"lease expired", func(t *testing.T, ctx context.Context, b *bundle, id int64) {
			b.clock.Advance(2 * time.Minute) // past the one-minute lease
			if _, err := b.store.RecoverLeases(ctx, b.pool, 100); err != nil {
				t.Fatal(err)
			}
		}},
		{"deferred by a rate limit", func(t *testing.T, ctx context.Context, b *bundle, id int64) {
			if err := b.store.Defer(ctx, b.pool, id, "w-old", b.clock.Now().Add(time.Minute), "rate limited"); err != nil {
				t.Fatal(err)
			}
		}},
		{"released", func(t *testing.T, ctx context.Context, b *bundle, id int64) {
			if err := b.store.Release(ctx, b.pool, id, "w-old"); err != nil {
				t.Fatal(err)
			}
		}},
		{"retried", func(t *testing.T, ctx context.Context, b *bundle, id int64) {
			if _, err := b.store.Retry(ctx, b.pool, id, "w-old", "502 bad gateway", b.clock.Now()); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, way := range ways {
		for _, newer := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/newer update %v", way.name, newer), func(t *testing.T) {
				t.Parallel()
				ctx, b := setup(t)
				update := runWithCheckRun(t, ctx, b)
				older := update("running")
				claimOne(t, ctx, b, "w-old", older)
				var newest int64
				if newer {
					newest = update("succeeded")
				}
				way.back(t, ctx, b, older)

				if !newer {
					wantStatus(t, ctx, b, older, outbox.StatusAvailable)
					return
				}
				e := wantStatus(t, ctx, b, older, outbox.StatusCompleted)
				if e.SupersededBy == nil || *e.SupersededBy != newest {
					t.Fatalf("superseded_by %v, want %d", deref(e.SupersededBy), newest)
				}
				if !strings.Contains(string(e.Result), fmt.Sprintf(`"resolution": "superseded", "superseded_by": %d`, newest)) {
					t.Fatalf("result %s does not name the update that superseded it", e.Result)
				}
				// Only the newest state is left to send.
				b.clock.Advance(2 * time.Hour)
				claimed, err := b.store.Claim(ctx, b.pool, "w-new", 10, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if len(claimed) != 1 || claimed[0].ID != newest {
					t.Fatalf("claimed %+v, want only the newest update %d", claimed, newest)
				}
			})
		}
	}
}

// A dead-lettered check-run update replayed after a newer update of its run was enqueued (an
// installation's suspension dead-letters everything it has queued; a Retry press replays a run's
// dead letters) must not be sent after the newer one: the check run would go back to the older
// state. It completes as superseded instead, audited (00068).
func TestReplayedOlderCheckRunUpdateIsSuperseded(t *testing.T) {
	t.Parallel()
	for _, newer := range []bool{true, false} {
		t.Run(fmt.Sprintf("newer update %v", newer), func(t *testing.T) {
			t.Parallel()
			ctx, b := setup(t)
			update := runWithCheckRun(t, ctx, b)
			older := update("running")
			claimOne(t, ctx, b, "w1", older)
			if err := b.store.DeadLetter(ctx, b.pool, older, "w1", "installation suspended"); err != nil {
				t.Fatal(err)
			}
			var newest int64
			if newer {
				newest = update("succeeded")
			}
			e, err := b.store.Replay(ctx, b.pool, older, "alice", "installation unsuspended")
			if err != nil {
				t.Fatal(err)
			}
			var to string
			if err := b.pool.QueryRow(ctx, `SELECT to_status FROM control_plane_audit WHERE action = 'outbox.replay' AND subject_id = $1`,
				older).Scan(&to); err != nil {
				t.Fatal(err)
			}
			if !newer {
				if e.Status != outbox.StatusAvailable || to != outbox.StatusAvailable {
					t.Fatalf("replayed update with nothing newer: %s, audited to %s; want available", e.Status, to)
				}
				return
			}
			if e.Status != outbox.StatusCompleted || e.SupersededBy == nil || *e.SupersededBy != newest || to != outbox.StatusCompleted {
				t.Fatalf("replayed older update: %s superseded by %v, audited to %s; want completed, superseded by %d",
					e.Status, deref(e.SupersededBy), to, newest)
			}
			b.clock.Advance(time.Hour)
			claimed, err := b.store.Claim(ctx, b.pool, "w2", 10, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if len(claimed) != 1 || claimed[0].ID != newest {
				t.Fatalf("claimed %+v, want only the newest update %d", claimed, newest)
			}
		})
	}
}

// The oldest-available age is that of the oldest due effect a claim can take: a paused dispatch
// and an effect of a rate-limited installation created during its block wait on purpose, have
// alerts of their own, and must not fire the oldest-age alert (00071). The counts keep them.
func TestStatsOldestAgeLeavesOutHeldEffects(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	paused := dispatchFor(t, ctx, b, createRun(t, ctx, b)) // built first: it claims what is available
	blocked := randomID()
	if _, err := b.store.Block(ctx, b.pool, blocked, time.Time{}, time.Minute, 16*time.Minute); err != nil {
		t.Fatal(err)
	}
	effectsOf(t, ctx, b, blocked, 1) // created during the block: due, and no claim takes it
	if _, err := b.pool.Exec(ctx, `SELECT boardreadyops_outbox_pause_dispatches(NULL, 'alice', 'GitHub incident', $1)`, b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	// The pause told the paused run on its check run: that update is being delivered.
	var notice int64
	if err := b.pool.QueryRow(ctx, `SELECT id FROM control_plane_outbox WHERE effect_type = 'github.check_run.complete'`).Scan(&notice); err != nil {
		t.Fatal(err)
	}
	claimOne(t, ctx, b, "w-notice", notice)
	b.clock.Advance(15 * time.Second)
	enqueueCreate(t, ctx, b, createRun(t, ctx, b))
	b.clock.Advance(30 * time.Second) // the block (a minute or more) still holds
	st, err := b.store.Stats(ctx, b.pool)
	if err != nil {
		t.Fatal(err)
	}
	if st.Due != 3 || st.OldestAvailableAgeSeconds != 30 {
		t.Fatalf("stats %+v, want 3 due and the age of the one a claim can take (30 s), not the paused dispatch %d's or the blocked installation's (45 s)",
			st, paused)
	}
}

// A Retry replays a blocked run's dead letters in id order: the dispatch first (its replay finds
// the older update still dead and leaves the run blocked), then the older check-run update, which
// is superseded. That replay must unblock the run, as any replay does when nothing else blocks it:
// otherwise the dispatch is sent while the run stays blocked and its check run keeps saying the
// dispatch failed.
func TestSupersededReplayUnblocksItsRun(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	r := createRun(t, ctx, b)
	dispatch := dispatchFor(t, ctx, b, r)
	claimOne(t, ctx, b, "w1", dispatch)
	update := enqueueCheckRunUpdate(t, ctx, b, r, "running")
	claimOne(t, ctx, b, "w1", update)
	if err := b.store.DeadLetter(ctx, b.pool, update, "w1", "installation suspended"); err != nil {
		t.Fatal(err)
	}
	if err := b.store.DeadLetter(ctx, b.pool, dispatch, "w1", "rejected (HTTP 404)"); err != nil {
		t.Fatal(err)
	}
	status := func() string {
		var s string
		if err := b.pool.QueryRow(ctx, `SELECT status FROM release_runs WHERE id = $1`, r.ID).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := status(); s != "blocked" {
		t.Fatalf("run %s after its dispatch was dead-lettered, want blocked", s)
	}
	for _, id := range []int64{dispatch, update} { // the order a Retry replays them in
		if _, err := b.store.Replay(ctx, b.pool, id, "github:octocat", "Retry pressed"); err != nil {
			t.Fatal(err)
		}
	}
	if s := status(); s != "dispatching" {
		t.Fatalf("run %s after both dead letters were replayed (the update superseded), want dispatching", s)
	}
	var retrying int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM control_plane_outbox WHERE release_run_id = $1
		AND effect_type = 'github.check_run.complete' AND status = 'available' AND payload ->> 'state' = 'retrying'`, r.ID).Scan(&retrying); err != nil || retrying != 1 {
		t.Fatalf("%d retrying check-run updates queued (%v), want 1", retrying, err)
	}
}
