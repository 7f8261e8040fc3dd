package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
	"github.com/boardreadyops/cloud/pkg/outbox"
)

// blockedRun brings a release run to blocked: check run 4001 created, then its dispatch
// dead-lettered (GitHub refused it) or, with reconcile, in doubt (reconciliation_required).
func blockedRun(t *testing.T, reconcile bool) (*bundle, string) {
	t.Helper()
	b := setup(t)
	b.deliver(pushTag("v1.0.0", sha))
	b.drain()
	run := b.onlyRun()
	st := &outbox.Store{}
	for _, want := range []string{outbox.EffectCheckRunCreate, outbox.EffectWorkflowDispatch} {
		effects, err := st.Claim(b.ctx, b.pool, "fake-dispatcher", 10, time.Minute)
		if err != nil || len(effects) != 1 || effects[0].EffectType != want {
			t.Fatalf("claim: %+v, %v; want one %s", effects, err, want)
		}
		id := effects[0].ID
		switch {
		case want == outbox.EffectCheckRunCreate:
			_, err = st.CompleteCheckRunCreate(b.ctx, b.pool, id, "fake-dispatcher", 4001)
		case reconcile:
			if _, err = st.StartDelivery(b.ctx, b.pool, id, "fake-dispatcher"); err == nil {
				err = st.RequireReconciliation(b.ctx, b.pool, id, "fake-dispatcher", "dispatch_workflow: 502 Bad Gateway")
			}
		default:
			err = st.DeadLetter(b.ctx, b.pool, id, "fake-dispatcher", "dispatch_workflow: 422 Workflow does not have 'workflow_dispatch' trigger")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if r, _, _ := b.runStatus(run); r != "blocked" {
		t.Fatalf("run %s, want blocked", r)
	}
	return b, run
}

// latestCheckRunUpdate is the newest check-run update's state and notice.
func (b *bundle) latestCheckRunUpdate() (state, notice string, retry bool) {
	b.t.Helper()
	if err := b.pool.QueryRow(b.ctx, `SELECT payload->>'state', coalesce(payload->>'notice', ''), coalesce((payload->>'retry')::boolean, false)
		FROM control_plane_outbox WHERE effect_type = 'github.check_run.complete' ORDER BY id DESC LIMIT 1`).Scan(&state, &notice, &retry); err != nil {
		b.t.Fatal(err)
	}
	return state, notice, retry
}

func TestBlockedRunShowsWhyOnTheCheckRun(t *testing.T) {
	t.Parallel()
	for _, reconcile := range []bool{false, true} {
		b, _ := blockedRun(t, reconcile)
		state, _, retry := b.latestCheckRunUpdate()
		if want := map[bool]string{false: "dispatch_failed", true: "dispatch_unknown"}[reconcile]; state != want || retry == reconcile {
			t.Errorf("reconcile %v: update state %s retry %v, want %s with Retry only for a dead letter", reconcile, state, retry, want)
		}
	}
}

func TestRetryFromTheCheckRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		reconcile bool
		doc       func(run string) eventdoc.Document
		// replayed: the dead letter went back to the queue, audited under the GitHub user.
		replayed bool
		notice   string // the answer on the check run ("" when none is written)
	}{
		{"retry by a user replays the dead letter", false, func(run string) eventdoc.Document { return requestedAction(run, 4001, "retry") }, true,
			"Retry requested by @octocat: the release workflow is dispatched again."},
		{"retry by a bot is recorded only", false, func(run string) eventdoc.Document {
			d := requestedAction(run, 4001, "retry")
			d.CheckRun.SenderLogin, d.CheckRun.SenderType = "other-app[bot]", "Bot"
			return d
		}, false, ""},
		{"another identifier is recorded only", false, func(run string) eventdoc.Document { return requestedAction(run, 4001, "deploy") }, false, ""},
		{"another check run is recorded only", false, func(run string) eventdoc.Document { return requestedAction(run, 4002, "retry") }, false, ""},
		{"a reconciliation is never retried", true, func(run string) eventdoc.Document { return requestedAction(run, 4001, "retry") }, false,
			"Retry requested by @octocat: it is not known whether the release workflow started, so it is not started again; an operator has been asked to check."},
		{"re-run of a blocked run is answered", false, func(run string) eventdoc.Document { return rerequest(run, 4001) }, false,
			"Re-run requested by @octocat while the release is blocked: nothing new was started. Press Retry to start it again."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, run := blockedRun(t, tt.reconcile)
			updates := b.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.check_run.complete'`)
			job := b.deliver(tt.doc(run))
			b.drain()
			if s := b.jobStatus(job); s != "completed" {
				t.Fatalf("job %s", s)
			}
			audits := b.count(`SELECT count(*) FROM control_plane_audit WHERE action = 'outbox.replay' AND operator = 'github:octocat'
				AND reason LIKE 'Retry pressed on check run 4001 by GitHub user octocat (id 583231)%'`)
			available := b.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.workflow.dispatch' AND status = 'available'`)
			r, _, _ := b.runStatus(run)
			if tt.replayed != (audits == 1 && available == 1 && r == "dispatching") {
				t.Fatalf("replayed %v: %d audit rows, %d dispatches available, run %s", tt.replayed, audits, available, r)
			}
			if b.count(`SELECT count(*) FROM execution_attempts`) != 1 {
				t.Fatal("a new attempt was started")
			}
			after := b.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.check_run.complete'`)
			_, notice, _ := b.latestCheckRunUpdate()
			if tt.notice == "" && after != updates {
				t.Fatalf("an update was written: %q", notice)
			}
			if tt.notice != "" && (after != updates+1 || notice != tt.notice) {
				t.Fatalf("answer %q (%d new updates), want %q", notice, after-updates, tt.notice)
			}
		})
	}
}

// A re-run of the dispatched workflow run from the Actions UI (same id, run_attempt 2) runs the
// attempt again and is followed; a late event of run attempt 1 changes nothing.
func TestActionsRerunIsFollowed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deliver(pushTag("v1.0.0", sha))
	b.drain()
	run := b.onlyRun()
	b.completeEffects(4001, 9001)
	b.deliver(workflowRun("completed", 9001, "success"))
	b.drain()
	b.completeEffects(0, 0)
	rerun := func(action, conclusion string, attempt int) {
		d := workflowRun(action, 9001, conclusion)
		d.WorkflowRun.RunAttempt = attempt
		b.deliver(d)
		b.drain()
	}
	rerun("requested", "", 2)
	if r, a, _ := b.runStatus(run); r != "running" || a != "running" {
		t.Fatalf("after the re-run started: run %s attempt %s", r, a)
	}
	if state, notice, _ := b.latestCheckRunUpdate(); state != "running" || !strings.Contains(notice, "run attempt 2") {
		t.Fatalf("update %s %q", state, notice)
	}
	rerun("completed", "success", 1) // late, of the first run attempt
	if r, _, _ := b.runStatus(run); r != "running" {
		t.Fatalf("a late event of run attempt 1 finished the run: %s", r)
	}
	rerun("completed", "failure", 2)
	if r, a, _ := b.runStatus(run); r != "failed" || a != "failed" {
		t.Fatalf("after the re-run failed: run %s attempt %s", r, a)
	}
	if state, _, _ := b.latestCheckRunUpdate(); state != "failed" {
		t.Fatalf("update %s", state)
	}
	if n := b.count(`SELECT workflow_run_attempt FROM execution_attempt_workflow_runs`); n != 2 {
		t.Fatalf("recorded run attempt %d", n)
	}
}
