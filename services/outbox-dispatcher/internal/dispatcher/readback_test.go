package dispatcher_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
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
	if c := e.sim.CheckRuns(run)[0]; c.Status != "in_progress" || !strings.Contains(*c.Output.Summary, "It is not known whether the release workflow started") {
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
		c := e.sim.CheckRuns(run)[0]
		return e.count(`SELECT count(*) FROM release_runs WHERE status = 'succeeded'`) == 1 && c.Status == "completed" &&
			e.count(`SELECT count(*) FROM control_plane_outbox WHERE status <> 'completed'`) == 0
	})
	c := e.sim.CheckRuns(run)[0]
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
