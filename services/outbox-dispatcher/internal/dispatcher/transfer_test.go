package dispatcher_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
)

// A request GitHub refuses (404) because it was sent under the repository's previous installation
// goes out again under the current one (boardreadyops_outbox_reject, migration 00088), with the
// effect and its run moved, instead of being dead-lettered:
//   - the repository is transferred while the check run's creation is out;
//   - the run was created under the old installation beside the transfer (its push read the
//     repository before the transfer committed), so nothing moved it.
//
// The release then runs to its dispatch under the new installation.
func TestRefusalUnderTheOldInstallationIsSentAgainUnderTheNew(t *testing.T) {
	t.Parallel()
	const from, to = 61001, 61002
	tests := []struct {
		name   string
		before bool // the repository moves before the run is created
	}{
		{"transferred while the request was out", false},
		{"run created under the old installation beside the transfer", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			e.sim.AddInstallation(from, "octo-org")
			e.sim.AddInstallation(to, "new-org")
			e.sim.AddRepository(from, 1, "octo-org/moving", map[string]githubsim.Workflow{"boardreadyops-release.yml": githubsim.ReleaseWorkflow()})
			if _, err := e.pool.Exec(e.ctx, `INSERT INTO installations (id, account_login, account_type) VALUES ($1, 'new-org', 'Organization')`, to); err != nil {
				t.Fatal(err)
			}
			transfer := func() {
				if err := e.sim.TransferRepository("octo-org/moving", to, "new-org/moving"); err != nil {
					t.Error(err)
				}
				if _, err := e.pool.Exec(e.ctx, `UPDATE repositories SET installation_id = $1, full_name = 'new-org/moving'
					WHERE full_name = 'octo-org/moving'`, to); err != nil {
					t.Error(err)
				}
			}
			var run string
			if tt.before {
				run = e.release(from, "octo-org/moving", "v1.0.0")
				transfer()
				// The push of the tag read the repository before the transfer committed.
				for _, q := range []string{`UPDATE release_runs SET installation_id = $1 WHERE id = $2`,
					`UPDATE control_plane_outbox SET installation_id = $1,
						payload = payload || jsonb_build_object('installation_id', $1::bigint, 'repository_full_name', 'octo-org/moving')
					WHERE release_run_id = $2`} {
					if _, err := e.pool.Exec(e.ctx, q, from, run); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				run = e.release(from, "octo-org/moving", "v1.0.0")
				// The check-run search under the old installation is answered late: the transfer
				// happens while it is out.
				e.sim.AddFault(githubsim.Fault{Operation: githubsim.OpListCheckRuns, InstallationID: from, Times: 1, Latency: 600 * time.Millisecond})
			}
			transferred := tt.before
			e.runUntil(e.dispatcher(10*time.Second), func() bool {
				if !transferred && e.count(`SELECT count(*) FROM control_plane_outbox WHERE status = 'leased'`) == 1 {
					transferred = true
					transfer()
				}
				s := e.statuses()
				return s["github.workflow.dispatch/completed"] == 1 || s["github.check_run.create/dead_letter"] == 1
			})
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
			if n := e.count(`SELECT count(*) FROM control_plane_outbox WHERE attempts <> 1`); n != 0 {
				t.Fatalf("%d effects spent more than one attempt: the refused one's was not given back", n)
			}
		})
	}
}
