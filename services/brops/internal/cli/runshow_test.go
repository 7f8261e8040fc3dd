package cli_test

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/boardreadyops/cloud/pkg/outbox"
)

func TestReleaseRunsShow(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	dispatchID, runID, _ := o.dispatch("dead_letter")
	tag := strings.TrimPrefix(o.ref(runID), "refs/tags/")
	if _, err := o.pool.Exec(o.ctx, `UPDATE control_plane_outbox SET traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' WHERE release_run_id = $1`, runID); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, o.env, "outbox", "replay", strconv.FormatInt(dispatchID, 10), "--reason", "workflow restored"); code != 0 {
		t.Fatal(errOut)
	}
	for _, args := range [][]string{{"release-runs", "show", runID}, {"release-runs", "show", "--repo", "octo-org/hello-world", "--tag", tag}} {
		code, out, errOut := run(t, o.env, args...)
		for _, want := range []string{"release run created", "check run created", "https://github.com/octo-org/hello-world/runs/4001",
			"4bf92f3577b34da6a3ce929d0e0e4736", "operator: outbox.replay", `github\.workflow\.dispatch +available`,
			`github dispatch_workflow: rejected \(HTTP 404\)`} {
			if code != 0 || !regexp.MustCompile(want).MatchString(out) {
				t.Fatalf("%v: exit %d, missing %q in\n%s%s", args, code, want, out, errOut)
			}
		}
		// The dead letter's check-run update was superseded by the replay's, never sent: it
		// completes nothing on the timeline.
		if strings.Contains(out, "check run completed") {
			t.Fatalf("%v: a superseded check-run update shown as delivered:\n%s", args, out)
		}
	}
	// Four effects: the check run's creation, the dispatch, the dead letter's check-run update
	// (superseded) and the replay's.
	code, out, _ := run(t, o.env, "release-runs", "show", runID, "-o", "json")
	var v struct {
		TraceID  string `json:"trace_id"`
		Timeline []struct{ What string }
		Effects  []struct{ Status string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.TraceID == "" || len(v.Effects) != 4 || len(v.Timeline) < 3 {
		t.Fatalf("json: %d %s", code, out)
	}
	refusals := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"release-runs", "show", "not-a-run"}, 2, "is not a release run id"},
		{[]string{"release-runs", "show"}, 2, "give a release run id, or --repo"},
		{[]string{"release-runs", "show", "--repo", "octo-org/hello-world"}, 2, "give a release run id, or --repo"},
		{[]string{"release-runs", "show", "00000000-0000-0000-0000-000000000000"}, 1, "no release run 00000000"},
		{[]string{"release-runs", "show", "--repo", "octo-org/hello-world", "--tag", "v0.0.0"}, 1, "no release run for octo-org/hello-world tag v0.0.0"},
	}
	for _, r := range refusals {
		if code, _, errOut := run(t, o.env, r.args...); code != r.code || !strings.Contains(errOut, r.want) {
			t.Errorf("%v: exit %d %q, want %d %q", r.args, code, errOut, r.code, r.want)
		}
	}
}

// show finds the push delivery of an annotated tag's run by the tagged commit (push.head_sha,
// 00075), not by after, the tag object.
func TestReleaseRunsShowFindsAnAnnotatedTagsPush(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	runID := o.createRun() // commit repeat('a', 40)
	if _, err := o.pool.Exec(o.ctx, `INSERT INTO webhook_inbox (delivery_id, event, action, repository_id, payload, payload_sha256, received_at)
		VALUES ('annotated-push', 'push', NULL, 1, jsonb_build_object('push', jsonb_build_object('ref', $1::text,
			'after', repeat('c', 40), 'head_sha', repeat('a', 40))), sha256('annotated'::bytea), now() - interval '1 minute')`, o.ref(runID)); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, o.env, "release-runs", "show", runID)
	if code != 0 || !strings.Contains(out, "push delivery annotated-push") {
		t.Fatalf("exit %d, no push delivery on the timeline:\n%s%s", code, out, errOut)
	}
}

// The timeline has a line for each of the five effect types: a read-back of the workflow run
// (when its webhook did not come) and a Retry's permission read say what GitHub answered and what
// the completion did with it.
func TestReleaseRunsShowReads(t *testing.T) {
	t.Parallel()
	o := newOps(t)

	// A dispatched run whose workflow_run webhook never came: read back, finished from the read.
	dispatchID, readRun, attempt := o.dispatch("")
	if _, err := o.st.StartDelivery(o.ctx, o.pool, dispatchID, "w"); err != nil {
		t.Fatal(err)
	}
	if err := o.st.CompleteWorkflowDispatch(o.ctx, o.pool, dispatchID, "w", 777001); err != nil {
		t.Fatal(err)
	}
	read, _, err := o.st.Enqueue(o.ctx, o.pool, outbox.NewEffect{EffectType: outbox.EffectWorkflowRunRead, ReleaseRunID: readRun,
		ExecutionAttemptID: attempt, InstallationID: 55501,
		Payload: map[string]any{"repository_full_name": "octo-org/hello-world", "workflow_run_id": 777001}})
	if err != nil {
		t.Fatal(err)
	}
	o.claimFor(readRun, outbox.EffectWorkflowRunRead)
	if outcome, err := o.st.CompleteWorkflowRunRead(o.ctx, o.pool, read, "w", outbox.WorkflowRunRead{Status: "completed",
		Conclusion: "success", RunAttempt: 1, HeadSHA: strings.Repeat("a", 40)}); err != nil || outcome != "finished" {
		t.Fatalf("read: %q %v", outcome, err)
	}

	// A run blocked by a dead letter, whose Retry a user without write access pressed.
	_, retryRun, retryAttempt := o.dispatch("dead_letter")
	perm, _, err := o.st.Enqueue(o.ctx, o.pool, outbox.NewEffect{EffectType: outbox.EffectCollaboratorPermissionRead, ReleaseRunID: retryRun,
		ExecutionAttemptID: retryAttempt, InstallationID: 55501,
		Payload: map[string]any{"repository_full_name": "octo-org/hello-world", "username": "octocat"}})
	if err != nil {
		t.Fatal(err)
	}
	o.claimFor(retryRun, outbox.EffectCollaboratorPermissionRead)
	if outcome, err := o.st.CompleteCollaboratorPermissionRead(o.ctx, o.pool, perm, "w", outbox.CollaboratorPermission{Collaborator: true,
		Permission: "read", RoleName: "read"}); err != nil || outcome != "refused" {
		t.Fatalf("permission read: %q %v", outcome, err)
	}

	for _, tt := range []struct {
		run  string
		want []string
	}{
		{readRun, []string{`1 +workflow run read back +run 777001 completed, conclusion success: the attempt finished with it +https://github.com/octo-org/hello-world/actions/runs/777001`,
			`1 +completion +succeeded, conclusion success`}},
		{retryRun, []string{`1 +Retry's permission read +@octocat: read: Retry refused`}},
	} {
		code, out, errOut := run(t, o.env, "release-runs", "show", tt.run)
		for _, want := range tt.want {
			if code != 0 || !regexp.MustCompile(want).MatchString(out) {
				t.Fatalf("exit %d, missing %q in\n%s%s", code, want, out, errOut)
			}
		}
	}
}
