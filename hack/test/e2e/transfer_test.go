package e2e_test

import (
	"strings"
	"testing"

	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
)

// A repository transferred to another account's installation after its release: GitHub sends its
// webhooks from the new installation under the new name, and refuses the old installation's token
// for it. The Actions UI's re-run of the release's workflow run, and then "Re-run all checks", are
// followed under the new installation: the check run is updated and a new attempt dispatched with
// its token (migration 00088). Before, the run kept the old installation, and every effect of it
// was refused with 404 and dead-lettered.
func TestReleaseFollowsItsTransferredRepository(t *testing.T) {
	t.Parallel()
	s := newStack(t, githubsim.ReleaseWorkflow())
	run := s.pushTag("v3.0.0")
	s.until("the release succeeds", func() bool {
		c, ok := s.checkRun(run)
		return s.runStatus(run) == "succeeded" && ok && c.Status == "completed" && *c.Conclusion == "success"
	})

	const newInstallation, newName = 7002, "new-org/stuck"
	s.sim.AddInstallation(newInstallation, "new-org")
	if err := s.sim.TransferRepository(stuckRepo, newInstallation, newName); err != nil {
		t.Fatal(err)
	}
	s.send("repository", map[string]any{
		"action": "transferred", "installation": map[string]any{"id": newInstallation},
		"repository": map[string]any{"id": githubsim.RepositoryID(stuckRepo), "name": "stuck", "full_name": newName,
			"default_branch": "main", "owner": map[string]any{"login": "new-org", "type": "Organization"}},
		"changes": map[string]any{"owner": map[string]any{"from": map[string]any{"organization": map[string]any{"login": "octo-org"}}}},
	})
	s.until("the release run follows its repository", func() bool {
		var inst int64
		_ = s.pool.QueryRow(s.ctx, `SELECT installation_id FROM release_runs WHERE id = $1`, run).Scan(&inst)
		return inst == newInstallation
	})

	// "Re-run all jobs" in the Actions UI, now in the new account: run attempt 2 fails.
	attempt, wfRun := s.attempt(run)
	if err := s.sim.RerunWorkflowRun(wfRun, "failure"); err != nil {
		t.Fatal(err)
	}
	s.until("the Actions re-run is followed to its failure", func() bool {
		c, ok := s.checkRun(run)
		return s.runStatus(run) == "failed" && ok && c.Status == "completed" && *c.Conclusion == "failure" &&
			c.Output.Text != nil && strings.Contains(*c.Output.Text, "run attempt 2")
	})
	// "Re-run all checks": a new attempt, dispatched under the new installation, succeeds.
	c, _ := s.checkRun(run)
	if err := s.sim.RerequestSuite(s.ctx, c.ID, "octocat"); err != nil {
		t.Fatal(err)
	}
	s.until("the suite's re-run releases again and succeeds", func() bool {
		c, ok := s.checkRun(run)
		return s.runStatus(run) == "succeeded" && ok && c.Status == "completed" && *c.Conclusion == "success"
	})
	if next, _ := s.attempt(run); next == attempt || s.sim.Dispatches(next) != 1 {
		t.Fatalf("attempt %s after the suite's re-run (was %s), %d dispatches; want a new attempt dispatched once", next, attempt, s.sim.Dispatches(next))
	}
	var dead int
	if err := s.pool.QueryRow(s.ctx, `SELECT count(*) FROM control_plane_outbox WHERE status <> 'completed'`).Scan(&dead); err != nil || dead != 0 {
		t.Fatalf("%d effects not completed (%v)", dead, err)
	}
	for _, j := range s.sim.Journal() {
		if j.Status == 404 {
			t.Fatalf("a request refused with 404: %+v", j)
		}
	}
}
