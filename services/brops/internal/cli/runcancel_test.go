package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/checkrun"
	"github.com/boardreadyops/cloud/pkg/outbox"
)

func TestReleaseRunsCancel(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	dispatchID, runID := o.enqueueDispatch()
	_, reconRun, _ := o.dispatch("reconciliation_required")

	if code, _, errOut := run(t, o.env, "release-runs", "cancel", runID); code != 2 || !strings.Contains(errOut, "--reason is required") {
		t.Fatalf("no reason: %d %s", code, errOut)
	}
	if code, _, errOut := run(t, o.env, "release-runs", "cancel", reconRun, "--reason", "x"); code != 1 || !strings.Contains(errOut, "reconciliation_required") {
		t.Fatalf("run awaiting reconciliation: %d %s", code, errOut)
	}
	code, out, errOut := run(t, o.env, "release-runs", "cancel", runID, "--reason", "wrong tag pushed", "-o", "json")
	var res struct {
		Superseded     int    `json:"superseded_effects"`
		CheckRunEffect *int64 `json:"check_run_effect"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Superseded != 1 || res.CheckRunEffect == nil {
		t.Fatalf("cancel: %d %s %s", code, out, errOut)
	}
	if o.status(dispatchID) != outbox.StatusCompleted {
		t.Fatalf("the pending dispatch is %s, want completed (superseded)", o.status(dispatchID))
	}
	e, err := outbox.Get(o.ctx, o.pool, *res.CheckRunEffect)
	if err != nil {
		t.Fatal(err)
	}
	// The run's check-run update (00021) in state cancelled, the reason as its notice, rendered by
	// the dispatcher as every other update is.
	var p struct {
		checkrun.State
		Conclusion string `json:"conclusion"`
	}
	_ = json.Unmarshal(e.Payload, &p)
	shown := checkrun.Render(p.State)
	if e.EffectType != outbox.EffectCheckRunComplete || e.Status != outbox.StatusAvailable || p.State.State != "cancelled" ||
		p.Conclusion != "cancelled" || shown.Conclusion != "cancelled" ||
		!strings.Contains(shown.Title, "cancelled") || !strings.Contains(shown.Summary, "wrong tag pushed") ||
		e.IdempotencyKey != outbox.EffectCheckRunComplete+":"+runID+":"+*e.ExecutionAttemptID {
		t.Fatalf("check-run completion %+v payload %+v", e, p)
	}
	var status, attempt string
	var audits int
	if err := o.pool.QueryRow(o.ctx, `SELECT r.status, a.status, (SELECT count(*) FROM control_plane_audit WHERE release_run_id = r.id AND action = 'release_run.cancel' AND operator = 'alice')
		FROM release_runs r JOIN execution_attempts a ON a.release_run_id = r.id WHERE r.id = $1`, runID).Scan(&status, &attempt, &audits); err != nil ||
		status != "cancelled" || attempt != "cancelled" || audits != 1 {
		t.Fatalf("run %s attempt %s, %d audit rows (%v)", status, attempt, audits, err)
	}
	if code, _, errOut := run(t, o.env, "release-runs", "cancel", runID, "--reason", "again"); code != 1 || !strings.Contains(errOut, "only an unfinished run is cancelled") {
		t.Fatalf("cancel again: %d %s", code, errOut)
	}
	if code, out, _ := run(t, o.env, "release-runs", "show", runID); code != 0 || !strings.Contains(out, "operator: release_run.cancel") {
		t.Fatalf("show after cancel: %d %s", code, out)
	}
}

// A cancel that starts while a claim is taking the run's workflow dispatch (the claim's
// transaction not yet committed) must not succeed: the dispatcher would send the dispatch of a
// cancelled run. It waits for the claim, then refuses as for any effect being delivered (00069).
func TestReleaseRunsCancelWaitsForAClaimInFlight(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	dispatchID, runID := o.enqueueDispatch()

	claim, err := o.pool.Begin(o.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer claim.Rollback(o.ctx) //nolint:errcheck // committed below
	var claimed int64
	if err := claim.QueryRow(o.ctx, `SELECT id FROM boardreadyops_outbox_claim('w-claim', 10, '1 minute')`).Scan(&claimed); err != nil || claimed != dispatchID {
		t.Fatalf("claim: %d (%v), want the dispatch %d", claimed, err, dispatchID)
	}
	type result struct {
		code        int
		out, errOut string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := run(t, o.env, "release-runs", "cancel", runID, "--reason", "wrong tag pushed")
		done <- result{code, out, errOut}
	}()
	// The cancel reaches the dispatch's row lock while the claim holds it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		if err := o.pool.QueryRow(o.ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%release_run_cancel%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the cancel finished while the claim held the dispatch: %d %s %s", r.code, r.out, r.errOut)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancel never waited for the claim")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := claim.Commit(o.ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != 1 || !strings.Contains(r.errOut, "cannot be cancelled now") || !strings.Contains(r.errOut, "is leased") {
		t.Fatalf("cancel beside a claim: %d %s %s; want it refused, the dispatch leased", r.code, r.out, r.errOut)
	}
	var status string
	if err := o.pool.QueryRow(o.ctx, `SELECT status FROM release_runs WHERE id = $1`, runID).Scan(&status); err != nil || status == "cancelled" {
		t.Fatalf("run %s (%v) while its dispatch is being sent", status, err)
	}
	if o.status(dispatchID) != outbox.StatusLeased {
		t.Fatalf("dispatch %s, want leased by the claim", o.status(dispatchID))
	}
}
