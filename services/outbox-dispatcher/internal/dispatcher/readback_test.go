package dispatcher_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
	"github.com/boardreadyops/cloud/pkg/testkit/metricstest"
	"github.com/boardreadyops/cloud/services/outbox-dispatcher/internal/dispatcher"
)

// A dispatch whose response was lost needs reconciliation; the workflow run then finishes while
// BoardReadyOps is not listening (no webhook reaches it). The operator's repair finds no stored
// completion, so the dispatcher reads the run back from GitHub (github.workflow_run.read) and the
// release run finishes from GitHub's answer, its check run saying so.
func TestRepairReadsTheConclusionBack(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.sim.AddFault(githubsim.Fault{Operation: githubsim.OpDispatchWorkflow, DropAfterProcessing: true, Times: 1})
	run := e.release(55501, "octo-org/hello-world", "v4.0.0")
	d := e.dispatcher(10 * time.Second)
	e.runUntil(d, func() bool {
		return e.count(`SELECT count(*) FROM release_runs WHERE status = 'blocked'`) == 1 &&
			e.statuses()["github.check_run.complete/completed"] == 1
	})
	if c := e.checkRuns(run)[0]; c.Status != "in_progress" || !strings.Contains(*c.Output.Summary, "It is not known whether the release workflow started") {
		t.Fatalf("check run while reconciliation is required %+v", c)
	}
	runs := e.sim.WorkflowRuns()
	if len(runs) != 1 {
		t.Fatalf("%d workflow runs", len(runs))
	}
	if err := e.sim.FinishWorkflowRun(runs[0].ID, "success"); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := e.pool.QueryRow(e.ctx, `SELECT id FROM control_plane_outbox WHERE status = 'reconciliation_required'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `SELECT boardreadyops_outbox_resolve_reconciliation($1, 'operator@example.com', $2, 'run found in the Actions list')`,
		id, runs[0].ID); err != nil {
		t.Fatal(err)
	}
	e.runUntil(d, func() bool {
		c := e.checkRuns(run)[0]
		return e.count(`SELECT count(*) FROM release_runs WHERE status = 'succeeded'`) == 1 && c.Status == "completed" &&
			e.count(`SELECT count(*) FROM control_plane_outbox WHERE status <> 'completed'`) == 0
	})
	c := e.checkRuns(run)[0]
	if *c.Conclusion != "success" || !strings.Contains(*c.Output.Summary, "read back from GitHub") ||
		!strings.Contains(*c.Output.Title, "v4.0.0") || !strings.HasSuffix(c.DetailsURL, "/actions/runs/"+strconv.FormatInt(runs[0].ID, 10)) {
		t.Fatalf("check run %+v", c)
	}
	if n := e.sim.Count(githubsim.OpGetWorkflowRun, 200); n != 1 {
		t.Fatalf("%d workflow run reads, want 1", n)
	}
	if st := e.statuses(); st["github.workflow_run.read/completed"] != 1 {
		t.Fatalf("outbox %v", st)
	}
}

// A workflow run finishes and its webhook never arrives. Once the attempt has been quiet for the
// read-back period, lifecycle's upkeep (boardreadyops_release_run_read_back_quiet, 00029)
// enqueues a read; the dispatcher reads the run back and the release run finishes. A second sweep
// within the period reads nothing again; a run read while still in progress is read again only
// after another period.
func TestQuietRunsAreReadBack(t *testing.T) {
	t.Parallel()
	e := setup(t)
	run := e.release(55501, "octo-org/hello-world", "v4.1.0")
	d := e.dispatcher(10 * time.Second)
	e.runUntil(d, func() bool { return e.count(`SELECT count(*) FROM release_runs WHERE status = 'running'`) == 1 })
	sweep := e.readBackSweep
	if n := sweep(); n != 0 {
		t.Fatalf("a run dispatched just now read back: %d", n)
	}
	age := func() { e.ageRun(run, "1 hour") }
	age()
	// Still in progress on GitHub: read once, nothing changes, not read again within the period.
	if n := sweep(); n != 1 {
		t.Fatalf("quiet run: %d reads enqueued, want 1", n)
	}
	e.runUntil(d, func() bool { return e.statuses()["github.workflow_run.read/completed"] == 1 })
	if n := sweep(); n != 0 {
		t.Fatalf("read again within the period: %d", n)
	}
	runs := e.sim.WorkflowRuns()
	if len(runs) != 1 {
		t.Fatalf("%d workflow runs", len(runs))
	}
	if err := e.sim.FinishWorkflowRun(runs[0].ID, "success"); err != nil { // no webhook
		t.Fatal(err)
	}
	age()
	if n := sweep(); n != 1 {
		t.Fatalf("after another period: %d reads enqueued, want 1", n)
	}
	e.runUntil(d, func() bool {
		return e.count(`SELECT count(*) FROM release_runs WHERE id = $1 AND status = 'succeeded'`, run) == 1 &&
			e.count(`SELECT count(*) FROM control_plane_outbox WHERE status <> 'completed'`) == 0
	})
	if n := e.sim.Count(githubsim.OpGetWorkflowRun, 200); n != 2 {
		t.Fatalf("%d workflow run reads, want 2", n)
	}
	if c := e.checkRuns(run)[0]; c.Status != "completed" || *c.Conclusion != "success" {
		t.Fatalf("check run %+v", c)
	}
	if n := sweep(); n != 0 {
		t.Fatalf("a finished run read back: %d", n)
	}
}

// A quiet workflow run read back from GitHub ran another commit than its release run's: its tag
// was moved between the dispatcher's tag read and the dispatch. The run is failed whatever the
// workflow concluded, and the check run names the commit that ran (migration 00080).
func TestReadBackOfAnotherCommitFailsTheRun(t *testing.T) {
	t.Parallel()
	const other = "0123456789abcdef0123456789abcdef01234567"
	e := setup(t)
	run, d, workflowRun := e.runningRelease("v4.2.0")
	e.sim.SetWorkflowRunHead(workflowRun, "v4.2.0", other)
	if err := e.sim.FinishWorkflowRun(workflowRun, "success"); err != nil { // no webhook
		t.Fatal(err)
	}
	e.ageRun(run, "1 hour")
	if n := e.readBackSweep(); n != 1 {
		t.Fatalf("%d reads enqueued, want 1", n)
	}
	e.runUntil(d, func() bool {
		return e.count(`SELECT count(*) FROM release_runs WHERE id = $1 AND status = 'failed'`, run) == 1 &&
			e.count(`SELECT count(*) FROM control_plane_outbox WHERE status <> 'completed'`) == 0
	})
	var outcome string
	if err := e.pool.QueryRow(e.ctx, `SELECT result ->> 'outcome' FROM control_plane_outbox WHERE effect_type = 'github.workflow_run.read'`).Scan(&outcome); err != nil || outcome != "other_commit" {
		t.Fatalf("read outcome %q (%v), want other_commit", outcome, err)
	}
	if c := e.checkRuns(run)[0]; c.Status != "completed" || *c.Conclusion != "failure" ||
		!strings.Contains(*c.Output.Summary, "The workflow ran commit "+other) {
		t.Fatalf("check run %+v (summary %q)", c, *c.Output.Summary)
	}
	if n := metricstest.Scrape(t, e.reg)[metricstest.Key(outbox.OtherCommitMetric, nil)]; n != 1 {
		t.Fatalf("%s %v, want 1: counted for its alert", outbox.OtherCommitMetric, n)
	}
}

// GitHub refuses a quiet run's read-back (the workflow run was deleted: 404). The read is
// dead-lettered and the run stays running; the sweeps of the next periods leave the attempt alone
// for a day instead of adding a dead letter each period (00083). A day after the dead letter the
// attempt is read again, and a cause that has passed (here the refusal was once) finishes the run.
func TestRefusedReadBackIsNotRepeated(t *testing.T) {
	t.Parallel()
	e := setup(t)
	run, d, workflowRun := e.runningRelease("v4.3.0")
	if err := e.sim.FinishWorkflowRun(workflowRun, "success"); err != nil { // no webhook
		t.Fatal(err)
	}
	e.sim.AddFault(githubsim.Fault{Operation: githubsim.OpGetWorkflowRun, Times: 1,
		Response: &githubsim.Response{Status: 404, Body: `{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}`}})
	age := func(by string) { e.ageRun(run, by) }
	sweep := e.readBackSweep
	age("1 hour")
	if n := sweep(); n != 1 {
		t.Fatalf("quiet run: %d reads enqueued, want 1", n)
	}
	e.runUntil(d, func() bool { return e.statuses()["github.workflow_run.read/dead_letter"] == 1 })
	for hours := 1; hours <= 23; hours += 11 {
		age("1 hour")
		if n := sweep(); n != 0 {
			t.Fatalf("about %d hours after the refused read: %d reads enqueued, want none", hours, n)
		}
		age("10 hours")
	}
	if e.count(`SELECT count(*) FROM release_runs WHERE id = $1 AND status = 'running'`, run) != 1 {
		t.Fatal("the run is no longer running after a refused read-back")
	}
	age("2 hours") // a day and more since the dead letter
	if n := sweep(); n != 1 {
		t.Fatalf("a day after the refused read: %d reads enqueued, want 1", n)
	}
	e.runUntil(d, func() bool {
		return e.count(`SELECT count(*) FROM release_runs WHERE id = $1 AND status = 'succeeded'`, run) == 1
	})
	if st := e.statuses(); st["github.workflow_run.read/dead_letter"] != 1 || st["github.workflow_run.read/completed"] != 1 {
		t.Fatalf("reads %v, want the refused one and the one a day later", st)
	}
}

// ageRun moves a release run's times, its attempts' and its effects' back by the interval by, as
// if that much time had passed since.
func (e *env) ageRun(run, by string) {
	e.t.Helper()
	for _, sql := range []string{
		`UPDATE release_runs SET created_at = created_at - $2::interval WHERE id = $1`,
		`UPDATE execution_attempts SET updated_at = updated_at - $2::interval WHERE release_run_id = $1`,
		`UPDATE control_plane_outbox SET created_at = created_at - $2::interval, updated_at = updated_at - $2::interval WHERE release_run_id = $1`,
	} {
		if _, err := e.pool.Exec(e.ctx, sql, run, by); err != nil {
			e.t.Fatal(err)
		}
	}
}

// readBackSweep runs lifecycle's sweep for quiet runs once (a 30-minute period) and returns how
// many reads it enqueued.
func (e *env) readBackSweep() int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(e.ctx, `SELECT boardreadyops_release_run_read_back_quiet('30 minutes', 100)`).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// A quiet attempt whose read is still to be sent (its installation rate-limited for an hour or
// more) is passed over by the sweep: before migration 00086 such attempts, oldest run first, took
// every place of the sweep and were given nothing, so a younger quiet run, of any installation,
// was never read back.
func TestReadBackPassesOverPendingReads(t *testing.T) {
	t.Parallel()
	e := setup(t)
	older := e.release(55501, "octo-org/hello-world", "v4.4.0")
	younger := e.release(55501, "octo-org/hello-world", "v4.4.1")
	d := e.dispatcher(10 * time.Second)
	e.runUntil(d, func() bool { return e.count(`SELECT count(*) FROM release_runs WHERE status = 'running'`) == 2 })
	e.ageRun(older, "2 hours")
	e.ageRun(younger, "1 hour")
	sweep := func() int {
		t.Helper()
		var n int
		if err := e.pool.QueryRow(e.ctx, `SELECT boardreadyops_release_run_read_back_quiet('30 minutes', 1)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := sweep(); n != 1 {
		t.Fatalf("first sweep: %d reads enqueued, want the older run's", n)
	}
	// The read is not sent (no dispatcher runs: as if its installation were blocked) and ages
	// past the period.
	e.ageRun(older, "1 hour")
	if n := sweep(); n != 1 {
		t.Fatalf("second sweep: %d reads enqueued, want the younger run's", n)
	}
	if n := e.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.workflow_run.read' AND release_run_id = $1`, younger); n != 1 {
		t.Fatalf("the younger run has %d reads, want 1", n)
	}
}

// A read-back that GitHub answers with an older run attempt than one lifecycle already recorded
// (the workflow run was re-run in GitHub Actions after the GET, or a lagging replica answered)
// does not finish the attempt: run attempt 2's completion, ignored for a finished attempt, could
// never finish it then, and a re-run that succeeded would leave the release failed (00087).
func TestReadBackOfAnOlderRunAttemptIsStale(t *testing.T) {
	t.Parallel()
	e := setup(t)
	run, d, workflowRun := e.runningRelease("v4.5.0")
	if err := e.sim.FinishWorkflowRun(workflowRun, "failure"); err != nil { // run attempt 1, no webhook
		t.Fatal(err)
	}
	// Lifecycle recorded run attempt 2 as requested (its workflow_run webhook).
	if _, err := e.pool.Exec(e.ctx, `
		INSERT INTO execution_attempt_workflow_runs (execution_attempt_id, workflow_run_attempt, updated_at)
		SELECT a.id, 2, now() FROM execution_attempts a WHERE a.release_run_id = $1
		ON CONFLICT (execution_attempt_id) DO UPDATE SET workflow_run_attempt = 2`, run); err != nil {
		t.Fatal(err)
	}
	e.ageRun(run, "1 hour")
	if n := e.readBackSweep(); n != 1 {
		t.Fatalf("%d reads enqueued, want 1", n)
	}
	e.runUntil(d, func() bool { return e.statuses()["github.workflow_run.read/completed"] == 1 })
	var outcome string
	if err := e.pool.QueryRow(e.ctx, `SELECT result ->> 'outcome' FROM control_plane_outbox WHERE effect_type = 'github.workflow_run.read'`).Scan(&outcome); err != nil || outcome != "stale" {
		t.Fatalf("read outcome %q (%v), want stale", outcome, err)
	}
	if n := e.count(`SELECT count(*) FROM release_runs WHERE id = $1 AND status = 'running'`, run); n != 1 {
		t.Fatal("run attempt 1's conclusion finished the release, though run attempt 2 is running")
	}
}

// runningRelease releases tag in octo-org/hello-world and runs a dispatcher until its run is
// running. It returns the run, the dispatcher and the workflow run the dispatch started.
func (e *env) runningRelease(tag string) (string, *dispatcher.Dispatcher, int64) {
	e.t.Helper()
	run := e.release(55501, "octo-org/hello-world", tag)
	d := e.dispatcher(10 * time.Second)
	e.runUntil(d, func() bool { return e.count(`SELECT count(*) FROM release_runs WHERE status = 'running'`) == 1 })
	runs := e.sim.WorkflowRuns()
	if len(runs) != 1 {
		e.t.Fatalf("%d workflow runs", len(runs))
	}
	return run, d, runs[0].ID
}
