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

// latestCheckRunUpdateOf is latestCheckRunUpdate of one release run.
func (b *bundle) latestCheckRunUpdateOf(run string) (state, notice string, retry bool) {
	b.t.Helper()
	if err := b.pool.QueryRow(b.ctx, `SELECT payload->>'state', coalesce(payload->>'notice', ''), coalesce((payload->>'retry')::boolean, false)
		FROM control_plane_outbox WHERE effect_type = 'github.check_run.complete' AND release_run_id = $1 ORDER BY id DESC LIMIT 1`, run).Scan(&state, &notice, &retry); err != nil {
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

// answerPermissionReads plays the dispatcher's part for the pending permission reads (what
// GitHub answered: p); every other claimed effect is released untouched. It returns the
// completions' outcomes.
func (b *bundle) answerPermissionReads(p outbox.CollaboratorPermission) []string {
	b.t.Helper()
	st := &outbox.Store{}
	effects, err := st.Claim(b.ctx, b.pool, "fake-dispatcher", 100, time.Minute)
	if err != nil {
		b.t.Fatal(err)
	}
	var outcomes []string
	for _, e := range effects {
		if e.EffectType != outbox.EffectCollaboratorPermissionRead {
			if err := st.Release(b.ctx, b.pool, e.ID, "fake-dispatcher"); err != nil {
				b.t.Fatal(err)
			}
			continue
		}
		outcome, err := st.CompleteCollaboratorPermissionRead(b.ctx, b.pool, e.ID, "fake-dispatcher", p)
		if err != nil {
			b.t.Fatal(err)
		}
		outcomes = append(outcomes, outcome)
	}
	return outcomes
}

var (
	writer     = outbox.CollaboratorPermission{Collaborator: true, Permission: "write", RoleName: "write"}
	maintainer = outbox.CollaboratorPermission{Collaborator: true, Permission: "write", RoleName: "maintain"}
	reader     = outbox.CollaboratorPermission{Collaborator: true, Permission: "read", RoleName: "read"}
	triager    = outbox.CollaboratorPermission{Collaborator: true, Permission: "read", RoleName: "triage"}
	stranger   = outbox.CollaboratorPermission{} // GitHub answered 404
)

const refusedNotice = "Retry requested by @octocat was refused: only a user with write access to the repository can retry a release."

func TestRetryFromTheCheckRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		reconcile bool
		doc       func(run string) eventdoc.Document
		// permission, when set: the press is checked (a permission read enqueued) and GitHub
		// answers this.
		permission *outbox.CollaboratorPermission
		// replayed: the dead letter went back to the queue, audited under the GitHub user.
		replayed bool
		refused  bool   // a check_run.retry.refused audit row names the user
		notice   string // the answer on the check run ("" when none is written)
	}{
		{"retry by a writer replays the dead letter", false, func(run string) eventdoc.Document { return requestedAction(run, 4001, "retry") },
			&writer, true, false, "Retry requested by @octocat: the release workflow is dispatched again."},
		{"retry by a maintainer replays the dead letter", false, func(run string) eventdoc.Document { return requestedAction(run, 4001, "retry") },
			&maintainer, true, false, "Retry requested by @octocat: the release workflow is dispatched again."},
		{"retry by a reader is refused", false, func(run string) eventdoc.Document { return requestedAction(run, 4001, "retry") },
			&reader, false, true, refusedNotice},
		{"retry by a triager is refused", false, func(run string) eventdoc.Document { return requestedAction(run, 4001, "retry") },
			&triager, false, true, refusedNotice},
		{"retry by a non-collaborator is refused", false, func(run string) eventdoc.Document { return requestedAction(run, 4001, "retry") },
			&stranger, false, true, refusedNotice},
		{"retry by a bot is recorded only", false, func(run string) eventdoc.Document {
			d := requestedAction(run, 4001, "retry")
			d.CheckRun.SenderLogin, d.CheckRun.SenderType = "other-app[bot]", "Bot"
			return d
		}, nil, false, false, ""},
		{"a sender that is no GitHub login is recorded only", false, func(run string) eventdoc.Document {
			d := requestedAction(run, 4001, "retry")
			d.CheckRun.SenderLogin = "../../../orgs/octo-org"
			return d
		}, nil, false, false, ""},
		{"another identifier is recorded only", false, func(run string) eventdoc.Document { return requestedAction(run, 4001, "deploy") },
			nil, false, false, ""},
		{"another check run is recorded only", false, func(run string) eventdoc.Document { return requestedAction(run, 4002, "retry") },
			nil, false, false, ""},
		{"a reconciliation is never retried", true, func(run string) eventdoc.Document { return requestedAction(run, 4001, "retry") }, nil, false, false,
			"Retry requested by @octocat: it is not known whether the release workflow started, so it is not started again; an operator has been asked to check."},
		{"re-run of a blocked run is answered", false, func(run string) eventdoc.Document { return rerequest(run, 4001) }, nil, false, false,
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
			reads := b.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.collaborator_permission.read'`)
			if want := map[bool]int{true: 1, false: 0}[tt.permission != nil]; reads != want {
				t.Fatalf("%d permission reads, want %d", reads, want)
			}
			if tt.permission != nil {
				// Nothing is replayed on the payload's word: only GitHub's answer decides.
				if r, _, _ := b.runStatus(run); r != "blocked" || b.count(`SELECT count(*) FROM control_plane_audit`) != 0 {
					t.Fatalf("before the permission was read: run %s, audit rows written", r)
				}
				b.answerPermissionReads(*tt.permission)
			}
			audits := b.count(`SELECT count(*) FROM control_plane_audit WHERE action = 'outbox.replay' AND operator = 'github:octocat'
				AND reason LIKE 'Retry pressed on check run 4001 by GitHub user octocat (id 583231)%'`)
			available := b.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.workflow.dispatch' AND status = 'available'`)
			r, _, _ := b.runStatus(run)
			if tt.replayed != (audits == 1 && available == 1 && r == "dispatching") {
				t.Fatalf("replayed %v: %d audit rows, %d dispatches available, run %s", tt.replayed, audits, available, r)
			}
			refusals := b.count(`SELECT count(*) FROM control_plane_audit WHERE action = 'check_run.retry.refused' AND operator = 'github:octocat'
				AND release_run_id = $1::uuid AND reason LIKE 'Retry pressed on check run 4001 by GitHub user octocat (id 583231)%refused: %'`, run)
			if tt.refused != (refusals == 1) || (tt.refused && r != "blocked") {
				t.Fatalf("refused %v: %d refusal audit rows, run %s", tt.refused, refusals, r)
			}
			if b.count(`SELECT count(*) FROM execution_attempts`) != 1 {
				t.Fatal("a new attempt was started")
			}
			after := b.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.check_run.complete'`)
			state, notice, retry := b.latestCheckRunUpdate()
			if tt.notice == "" && after != updates {
				t.Fatalf("an update was written: %q", notice)
			}
			if tt.notice != "" && (after != updates+1 || notice != tt.notice) {
				t.Fatalf("answer %q (%d new updates), want %q", notice, after-updates, tt.notice)
			}
			if tt.refused && (state != "dispatch_failed" || !retry) {
				t.Fatalf("a refused Retry changed the check run: state %s, Retry offered %v", state, retry)
			}
		})
	}
}

// The refusal says why: who, and what GitHub answered.
func TestRefusedRetryIsAuditedWithTheReason(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		permission outbox.CollaboratorPermission
		want       string
	}{
		{reader, "refused: octocat has permission read (role read) on octo-org/hello-world; Retry needs admin, maintain or write"},
		{stranger, "refused: octocat is not a collaborator of octo-org/hello-world (GitHub answered 404)"},
	} {
		b, run := blockedRun(t, false)
		b.deliver(requestedAction(run, 4001, "retry"))
		b.drain()
		if got := b.answerPermissionReads(tt.permission); len(got) != 1 || got[0] != "refused" {
			t.Fatalf("outcomes %v", got)
		}
		var reason string
		var collaborator bool
		if err := b.pool.QueryRow(b.ctx, `SELECT reason, (evidence->>'collaborator')::boolean FROM control_plane_audit
			WHERE action = 'check_run.retry.refused'`).Scan(&reason, &collaborator); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(reason, tt.want) || collaborator != tt.permission.Collaborator {
			t.Errorf("reason %q (collaborator %v), want it to end %q", reason, collaborator, tt.want)
		}
		if n := b.count(`SELECT count(*) FROM control_plane_outbox WHERE status = 'dead_letter'`); n != 1 {
			t.Errorf("%d dead letters after the refusal, want the dispatch still dead", n)
		}
	}
}

// A writer's Retry replays the dead letter exactly once: the press delivered again (GitHub's
// redelivery under a new id) while its read is pending adds no read, a press after the replay is
// answered with nothing to retry, and a second writer's read completing late replays nothing.
func TestRetryReplaysOnceUnderRedelivery(t *testing.T) {
	t.Parallel()
	b, run := blockedRun(t, false)
	press := requestedAction(run, 4001, "retry")
	b.deliver(press)
	b.deliver(press) // redelivered before the dispatcher read the permission
	other := requestedAction(run, 4001, "retry")
	other.CheckRun.SenderLogin, other.CheckRun.SenderID = "hubot-admin", 583232
	b.deliver(other)
	b.drain()
	if n := b.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.collaborator_permission.read'`); n != 2 {
		t.Fatalf("%d permission reads, want one per user", n)
	}
	if got := b.answerPermissionReads(writer); len(got) != 2 || got[0] != "retried" || got[1] != "nothing_to_retry" {
		t.Fatalf("outcomes %v, want one retried and the later read replaying nothing", got)
	}
	b.deliver(press) // pressed again after the replay: nothing left to retry
	b.drain()
	if n := b.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.collaborator_permission.read'`); n != 2 {
		t.Fatalf("%d permission reads after the run moved on, want 2", n)
	}
	if n := b.count(`SELECT count(*) FROM control_plane_audit WHERE action = 'outbox.replay'`); n != 1 {
		t.Fatalf("%d replays, want exactly 1", n)
	}
	if r, _, _ := b.runStatus(run); r != "dispatching" {
		t.Fatalf("run %s", r)
	}
	if _, notice, _ := b.latestCheckRunUpdate(); notice != "Retry requested by @octocat: there is nothing to retry (the release is dispatching)." {
		t.Fatalf("answer %q", notice)
	}
}

// The read's key is its run, attempt and generation: a transition rolled back and run again
// writes the same key, and the next read of the attempt gets the next generation.
func TestPermissionReadKeyIsDeterministic(t *testing.T) {
	t.Parallel()
	b, run := blockedRun(t, false)
	var attempt string
	if err := b.pool.QueryRow(b.ctx, `SELECT id::text FROM execution_attempts`).Scan(&attempt); err != nil {
		t.Fatal(err)
	}
	enqueue := func(rollback bool) string {
		t.Helper()
		tx, err := b.pool.Begin(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(b.ctx) }()
		var id *int64
		if err := tx.QueryRow(b.ctx, `SELECT boardreadyops_outbox_enqueue_collaborator_permission_read($1::uuid, 'octocat', 583231, 'delivery-1', NULL)`,
			run).Scan(&id); err != nil || id == nil {
			t.Fatalf("enqueue: %v, %v", id, err)
		}
		var key string
		if err := tx.QueryRow(b.ctx, `SELECT idempotency_key FROM control_plane_outbox WHERE id = $1`, *id).Scan(&key); err != nil {
			t.Fatal(err)
		}
		if !rollback {
			if err := tx.Commit(b.ctx); err != nil {
				t.Fatal(err)
			}
		}
		return key
	}
	first := "github.collaborator_permission.read:" + run + ":" + attempt
	if k1, k2 := enqueue(true), enqueue(false); k1 != first || k2 != first {
		t.Fatalf("keys %q, %q; want %q twice", k1, k2, first)
	}
	b.answerPermissionReads(reader)
	if k := enqueue(false); k != first+":g1" {
		t.Fatalf("next read's key %q", k)
	}
	var size int
	if err := b.pool.QueryRow(b.ctx, `SELECT max(pg_column_size(payload)) FROM control_plane_outbox
		WHERE effect_type = 'github.collaborator_permission.read'`).Scan(&size); err != nil || size > 600 {
		t.Fatalf("payload %d bytes (%v), want under 600", size, err)
	}
}

// A permission read that dead-letters (GitHub refused it) retries nothing and blocks nothing
// more: the run stays blocked by its dispatch, whose reason the check run keeps showing, and
// the press is answered. An operator's replay of the read then lets GitHub's answer decide.
func TestDeadLetteredPermissionReadRetriesNothing(t *testing.T) {
	t.Parallel()
	b, run := blockedRun(t, false)
	b.deliver(requestedAction(run, 4001, "retry"))
	b.drain()
	st := &outbox.Store{}
	effects, err := st.Claim(b.ctx, b.pool, "fake-dispatcher", 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var read int64
	for _, e := range effects {
		if e.EffectType == outbox.EffectCollaboratorPermissionRead {
			read = e.ID
			err = st.DeadLetter(b.ctx, b.pool, e.ID, "fake-dispatcher", "github get_collaborator_permission: rejected (HTTP 403): Resource not accessible by integration")
		} else {
			err = st.Release(b.ctx, b.pool, e.ID, "fake-dispatcher")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if r, _, _ := b.runStatus(run); r != "blocked" {
		t.Fatalf("run %s", r)
	}
	var state, reason, notice string
	if err := b.pool.QueryRow(b.ctx, `SELECT payload->>'state', payload->>'reason', payload->>'notice' FROM control_plane_outbox
		WHERE effect_type = 'github.check_run.complete' ORDER BY id DESC LIMIT 1`).Scan(&state, &reason, &notice); err != nil {
		t.Fatal(err)
	}
	if state != "dispatch_failed" || !strings.Contains(reason, "workflow_dispatch") ||
		!strings.HasPrefix(notice, "Retry requested by @octocat was not done: their permission on the repository could not be read from GitHub") {
		t.Fatalf("update %s, reason %q, notice %q", state, reason, notice)
	}
	if _, err := st.Replay(b.ctx, b.pool, read, "operator@example.com", "the App was granted metadata read"); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := b.runStatus(run); r != "blocked" {
		t.Fatalf("replaying the read unblocked the run by itself: %s", r)
	}
	if got := b.answerPermissionReads(writer); len(got) != 1 || got[0] != "retried" {
		t.Fatalf("outcomes %v", got)
	}
	if r, _, _ := b.runStatus(run); r != "dispatching" {
		t.Fatalf("run %s after the writer's read", r)
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

// A re-run or a Retry while the installation's workflow dispatches are paused: the dispatch waits
// for the resume, and the check run says so with the pause's reason, instead of "is starting" or
// "is dispatched again" until the resume (00084). Without a pause the texts are unchanged (the
// tests above).
func TestRerunAndRetryDuringAPauseSaySo(t *testing.T) {
	t.Parallel()
	const pause = "The release is paused: an operator paused workflow dispatches (GitHub incident 42)."
	t.Run("re-run", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.deliver(pushTag("v1.0.0", sha))
		b.drain()
		run := b.onlyRun()
		b.completeEffects(4001, 9001)
		b.deliver(workflowRun("completed", 9001, "failure"))
		b.drain()
		b.completeEffects(0, 0)
		b.exec(`SELECT boardreadyops_outbox_pause_dispatches($1, 'alice', 'GitHub incident 42')`, installationID)
		b.deliver(rerequest(run, 4001))
		b.drain()
		want := "Re-run: attempt 2 is waiting. " + pause + " The release workflow starts when they resume."
		if state, notice, _ := b.latestCheckRunUpdate(); state != "dispatching" || notice != want {
			t.Fatalf("check run after a re-run during a pause: %s %q, want %q", state, notice, want)
		}
	})
	t.Run("retry", func(t *testing.T) {
		t.Parallel()
		b, run := blockedRun(t, false)
		b.exec(`SELECT boardreadyops_outbox_pause_dispatches(NULL, 'alice', 'GitHub incident 42')`)
		b.deliver(requestedAction(run, 4001, "retry"))
		b.drain()
		b.answerPermissionReads(writer)
		if r, _, _ := b.runStatus(run); r != "dispatching" {
			t.Fatalf("run %s after the Retry, want dispatching", r)
		}
		want := "Retry requested by @octocat: the release is paused: an operator paused workflow dispatches (GitHub incident 42). " +
			"The release workflow is dispatched again when they resume."
		if state, notice, _ := b.latestCheckRunUpdate(); state != "retrying" || notice != want {
			t.Fatalf("check run after a Retry during a pause: %s %q, want %q", state, notice, want)
		}
	})
}
