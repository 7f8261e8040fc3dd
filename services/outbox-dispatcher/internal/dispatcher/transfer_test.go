package dispatcher_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/githubapp"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
	"github.com/boardreadyops/cloud/services/outbox-dispatcher/internal/dispatcher"
)

// A request GitHub refuses (404) because it was sent under the repository's previous installation
// goes out again under the current one (boardreadyops_outbox_reject, migration 00088), with the
// effect and its run moved and the attempt given back, instead of being dead-lettered:
//   - the repository is transferred while the check run's search is out;
//   - the transfer's transaction is still open when GitHub's refusal is recorded: the refusal waits
//     for the run's lock and reads the committed move;
//   - the run was created under the old installation beside the transfer (its push read the
//     repository before the transfer committed), so nothing moved it.
//
// The release then runs to its dispatch under the new installation.
func TestRefusalUnderTheOldInstallationIsSentAgainUnderTheNew(t *testing.T) {
	t.Parallel()
	const from, to = 61001, 61002
	tests := []struct {
		name string
		when string // the transfer: "out" while the search is out, "held" open across the refusal, "before" the run
	}{
		{"transferred while the request was out", "out"},
		{"transfer committing across the refusal", "held"},
		{"run created under the old installation beside the transfer", "before"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			gh, err := githubapp.New(githubapp.Config{AppID: appID, PrivateKey: e.key, BaseURL: e.apiURL, Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			e.sim.AddInstallation(from, "octo-org")
			e.sim.AddInstallation(to, "new-org")
			e.sim.AddRepository(from, 1, "octo-org/moving", map[string]githubsim.Workflow{"boardreadyops-release.yml": githubsim.ReleaseWorkflow()})
			if _, err := e.pool.Exec(e.ctx, `INSERT INTO installations (id, account_login, account_type) VALUES ($1, 'new-org', 'Organization')`, to); err != nil {
				t.Fatal(err)
			}
			// transfer moves the repository on GitHub and in the database, in tx when given.
			transfer := func(tx pgx.Tx) {
				if err := e.sim.TransferRepository("octo-org/moving", to, "new-org/moving"); err != nil {
					t.Error(err)
				}
				q := `UPDATE repositories SET installation_id = $1, full_name = 'new-org/moving' WHERE full_name = 'octo-org/moving'`
				if tx != nil {
					_, err = tx.Exec(e.ctx, q, to)
				} else {
					_, err = e.pool.Exec(e.ctx, q, to)
				}
				if err != nil {
					t.Error(err)
				}
			}
			run := e.release(from, "octo-org/moving", "v1.0.0")
			if tt.when == "before" {
				transfer(nil)
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
				// The check-run search under the old installation is answered late: the transfer
				// happens while it is out.
				e.sim.AddFault(githubsim.Fault{Operation: githubsim.OpListCheckRuns, InstallationID: from, Times: 1, Latency: 3 * time.Second})
			}
			transferred := tt.when == "before"
			var held pgx.Tx
			defer func() {
				if held != nil {
					_ = held.Rollback(e.ctx)
				}
			}()
			var refusedAt time.Time
			d := e.build(30*time.Second, func(*dispatcher.Config) {}, e.pool, gh)
			e.runUntil(d, func() bool {
				if !transferred && e.count(`SELECT count(*) FROM control_plane_outbox WHERE status = 'leased'`) == 1 {
					transferred = true
					if tt.when == "held" {
						if held, err = e.pool.Begin(e.ctx); err != nil {
							t.Fatal(err)
						}
					}
					transfer(held)
				}
				if held != nil && refusedAt.IsZero() && e.sim.Count(githubsim.OpListCheckRuns, http.StatusNotFound) == 1 {
					refusedAt = time.Now()
				}
				if held != nil && !refusedAt.IsZero() && time.Since(refusedAt) > 500*time.Millisecond {
					if err := held.Commit(e.ctx); err != nil {
						t.Fatal(err)
					}
					held = nil
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
			if n := e.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.check_run.create' AND attempts <> 1`); n != 0 {
				t.Fatal("the refused creation spent two attempts: its first was not given back")
			}
		})
	}
}
