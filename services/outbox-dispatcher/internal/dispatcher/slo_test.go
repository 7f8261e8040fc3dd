package dispatcher_test

import (
	"testing"
	"time"

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

	// The dispatch's own check-run update (state running) shows no conclusion: not counted.
	e.runUntil(d, func() bool { return e.statuses()["github.check_run.complete/completed"] == 1 })
	if got := metricstest.Scrape(t, e.reg); got[`boardreadyops_release_conclusion_shown_seconds_count{}`] != 0 {
		t.Fatalf("a running update counted as a conclusion shown: %v", got[`boardreadyops_release_conclusion_shown_seconds_count{}`])
	}
	// The workflow run finished: lifecycle enqueues the update in state succeeded (as
	// boardreadyops_execution_attempt_finish does), 20 s before a dispatcher delivers it.
	if _, err := e.pool.Exec(e.ctx, `UPDATE release_runs SET status = 'succeeded', completed_at = now() WHERE id = $1`, run); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := e.pool.QueryRow(e.ctx, `SELECT boardreadyops_release_run_enqueue_check_run($1, 'succeeded', NULL, NULL)`, run).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `UPDATE control_plane_outbox SET created_at = created_at - interval '20 seconds' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	e.runUntil(d, func() bool { return e.statuses()["github.check_run.complete/completed"] == 2 })
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
