package dispatcher_test

import (
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/testkit/metricstest"
)

// The release SLO histograms observe a check run's creation and its completion, once each, when
// the effect is committed, measured from the effect's created_at in the database: an effect
// created 90 s before it is delivered misses the 60 s objective; a completion enqueued 20 s
// before meets the 300 s one.
func TestSLOHistogramsObserveCommittedCheckRuns(t *testing.T) {
	t.Parallel()
	e := setup(t)
	run := e.release(55501, "octo-org/hello-world", "v1.0.0")
	// The release run was created 90 s ago, say while every dispatcher was down.
	if _, err := e.pool.Exec(e.ctx, `UPDATE control_plane_outbox SET created_at = created_at - interval '90 seconds' WHERE release_run_id = $1`, run); err != nil {
		t.Fatal(err)
	}
	d := e.dispatcher(10 * time.Second)
	e.runUntil(d, func() bool { return e.count(`SELECT count(*) FROM release_runs WHERE status = 'running'`) == 1 })
	got := metricstest.Scrape(t, e.reg)
	for series, want := range map[string]float64{
		`boardreadyops_release_check_run_visible_seconds_count{}`:          1,
		`boardreadyops_release_check_run_visible_seconds_bucket{le="60"}`:  0,
		`boardreadyops_release_check_run_visible_seconds_bucket{le="90"}`:  0,
		`boardreadyops_release_check_run_visible_seconds_bucket{le="120"}`: 1,
		`boardreadyops_release_conclusion_shown_seconds_count{}`:           0,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v", series, got[series], want)
		}
	}

	var attempt string
	var checkRun int64
	if err := e.pool.QueryRow(e.ctx, `SELECT a.id::text, r.check_run_id FROM execution_attempts a
		JOIN release_runs r ON r.id = a.release_run_id WHERE r.id = $1`, run).Scan(&attempt, &checkRun); err != nil {
		t.Fatal(err)
	}
	id, _, err := (&outbox.Store{}).Enqueue(e.ctx, e.pool, outbox.NewEffect{EffectType: outbox.EffectCheckRunComplete,
		ReleaseRunID: run, ExecutionAttemptID: attempt, InstallationID: 55501, Payload: map[string]any{
			"repository_full_name": "octo-org/hello-world", "check_run_id": checkRun, "conclusion": "success",
			"title": "Release succeeded", "summary": "Attempt 1 succeeded."}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `UPDATE control_plane_outbox SET created_at = created_at - interval '20 seconds' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	e.runUntil(d, func() bool { return e.statuses()["github.check_run.complete/completed"] == 1 })
	got = metricstest.Scrape(t, e.reg)
	for series, want := range map[string]float64{
		`boardreadyops_release_check_run_visible_seconds_count{}`:         1,
		`boardreadyops_release_conclusion_shown_seconds_count{}`:          1,
		`boardreadyops_release_conclusion_shown_seconds_bucket{le="10"}`:  0,
		`boardreadyops_release_conclusion_shown_seconds_bucket{le="30"}`:  1,
		`boardreadyops_release_conclusion_shown_seconds_bucket{le="300"}`: 1,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v", series, got[series], want)
		}
	}
}
