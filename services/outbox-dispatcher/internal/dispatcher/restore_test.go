package dispatcher_test

import (
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/checkrun"
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

// A release run lost by a restore created its check run; the run that the redelivered push
// creates afterwards has another id but the same repository, tag and commit. Its creation finds
// the lost run's check run by the release's identity and adopts it: one check run on the commit,
// recorded on the new run, which its later updates then change (nothing left in progress under
// an id no run has). A release of another tag on the same commit gets its own.
func TestCheckRunCreationAdoptsTheLostRunsCheckRun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const sha = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
	recreated := e.release(55501, "octo-org/hello-world", "v1.0.0")
	other := e.release(55501, "octo-org/hello-world", "v1.0.1")
	var repoID int64
	if err := e.pool.QueryRow(e.ctx, `SELECT repository_id FROM release_runs WHERE id = $1`, recreated).Scan(&repoID); err != nil {
		t.Fatal(err)
	}
	// What the old deployment's dispatcher did for the lost run (another id, the same release).
	lost, created, err := e.gh.FindOrCreateCheckRun(e.ctx, githubapp.CheckRun{InstallationID: 55501, Repository: "octo-org/hello-world",
		HeadSHA: sha, Name: "BoardReadyOps release", ExternalID: checkrun.ExternalID(repoID, "refs/tags/v1.0.0"),
		EarlierExternalIDs: []string{"0a0c5b8e-2a1d-4e6f-9b7a-1c2d3e4f5a6b"}, Title: "Release v1.0.0"})
	if err != nil || !created {
		t.Fatalf("the lost run's check run: %d %v %v", lost, created, err)
	}
	e.runUntil(e.dispatcher(10*time.Second), func() bool {
		return e.count(`SELECT count(*) FROM release_runs WHERE status = 'running'`) == 2 &&
			e.statuses()["github.check_run.complete/completed"] == 2
	})
	var recorded int64
	if err := e.pool.QueryRow(e.ctx, `SELECT check_run_id FROM release_runs WHERE id = $1`, recreated).Scan(&recorded); err != nil || recorded != lost {
		t.Fatalf("recreated run records check run %d (%v), want the lost run's %d", recorded, err, lost)
	}
	crs := e.checkRuns(recreated)
	if len(crs) != 1 || crs[0].ID != lost || crs[0].DetailsURL == "" {
		t.Fatalf("check runs of the release %+v, want only %d, updated with the workflow run", crs, lost)
	}
	if crs := e.checkRuns(other); len(crs) != 1 || crs[0].ID == lost || crs[0].HeadSHA != sha {
		t.Fatalf("check runs of the other tag %+v: want its own", crs)
	}
	if n := e.sim.CheckRunCount(); n != 2 {
		t.Fatalf("%d check runs on GitHub, want 2", n)
	}
}
