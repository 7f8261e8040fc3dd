package dispatcher_test

import (
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/githubapp"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
)

// After a point-in-time restore, a check-run creation can be back at its first claim (one
// attempt, no last_error) although the check run was created on GitHub after the restore point.
// The creation lists before it creates on every attempt, so it finds that check run and creates
// none: exactly one check run, and exactly one list request for the release run.
func TestCheckRunCreationAfterRestoreFindsTheCheckRun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	run := e.release(55501, "octo-org/hello-world", "v1.0.0")
	// What the dispatcher did before the backup was restored: the check run exists on GitHub,
	// while the restored effect has never been claimed.
	existing, created, err := e.gh.FindOrCreateCheckRun(e.ctx, githubapp.CheckRun{InstallationID: 55501, Repository: "octo-org/hello-world",
		HeadSHA: "6dcb09b5b57875f334f61aebed695e2e4193db5e", Name: "BoardReadyOps release", ExternalID: run, Title: "Release v1.0.0"})
	if err != nil || !created {
		t.Fatalf("check run before the restore: %d %v %v", existing, created, err)
	}
	lists := e.sim.Count(githubsim.OpListCheckRuns, 200)
	e.runUntil(e.dispatcher(10*time.Second), func() bool {
		return e.statuses()["github.check_run.create/completed"] == 1
	})
	if crs := e.sim.CheckRuns(run); len(crs) != 1 || crs[0].ID != existing {
		t.Fatalf("check runs %+v, want only %d", crs, existing)
	}
	var recorded int64
	if err := e.pool.QueryRow(e.ctx, `SELECT check_run_id FROM release_runs WHERE id = $1`, run).Scan(&recorded); err != nil || recorded != existing {
		t.Fatalf("release run records check run %d (%v), want %d", recorded, err, existing)
	}
	if n := e.sim.Count(githubsim.OpListCheckRuns, 200) - lists; n != 1 {
		t.Fatalf("%d list requests by the dispatcher, want 1 (one GET per release run)", n)
	}
}
