package dispatcher_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
)

// A repository transferred to another account's installation while its check run's creation is
// out: GitHub refuses the request made under the old installation (404), and the effect, moved to
// the new installation and name meanwhile (migration 00088), goes out again under them instead of
// being dead-lettered. The release then runs to its dispatch under the new installation.
func TestRefusalUnderTheOldInstallationIsSentAgainUnderTheNew(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const from, to = 61001, 61002
	e.sim.AddInstallation(from, "octo-org")
	e.sim.AddInstallation(to, "new-org")
	e.sim.AddRepository(from, 1, "octo-org/moving", map[string]githubsim.Workflow{"boardreadyops-release.yml": githubsim.ReleaseWorkflow()})
	run := e.release(from, "octo-org/moving", "v1.0.0")
	if _, err := e.pool.Exec(e.ctx, `INSERT INTO installations (id, account_login, account_type) VALUES ($1, 'new-org', 'Organization')`, to); err != nil {
		t.Fatal(err)
	}
	// The check-run search under the old installation is answered late: the transfer happens
	// while it is out.
	e.sim.AddFault(githubsim.Fault{Operation: githubsim.OpListCheckRuns, InstallationID: from, Times: 1, Latency: 600 * time.Millisecond})
	transferred := false
	e.runUntil(e.dispatcher(10*time.Second), func() bool {
		if !transferred && e.count(`SELECT count(*) FROM control_plane_outbox WHERE status = 'leased'`) == 1 {
			transferred = true
			if err := e.sim.TransferRepository("octo-org/moving", to, "new-org/moving"); err != nil {
				t.Error(err)
			}
			if _, err := e.pool.Exec(e.ctx, `UPDATE repositories SET installation_id = $1, full_name = 'new-org/moving'
				WHERE id = (SELECT repository_id FROM release_runs WHERE id = $2)`, to, run); err != nil {
				t.Error(err)
			}
		}
		s := e.statuses()
		return s["github.workflow.dispatch/completed"] == 1 || s["github.check_run.create/dead_letter"] == 1
	})
	if !transferred {
		t.Fatal("the check-run creation was never seen leased")
	}
	if s := e.statuses(); s["github.workflow.dispatch/completed"] != 1 {
		t.Fatalf("effects %v: the check run's creation, refused under the old installation, was not sent again under the new", s)
	}
	if n := e.sim.Count(githubsim.OpListCheckRuns, http.StatusNotFound); n != 1 {
		t.Fatalf("%d check-run searches refused, want the one under the old installation", n)
	}
	if crs := e.checkRuns(run); len(crs) != 1 {
		t.Fatalf("%d check runs for the release, want 1", len(crs))
	}
	if n := e.count(`SELECT count(*) FROM release_runs WHERE id = $1 AND installation_id = $2`, run, to); n != 1 {
		t.Fatal("the release run stayed under the old installation")
	}
}
