package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/jobs"
	"github.com/boardreadyops/cloud/pkg/queuerun"
)

// recovery returns expired job leases (a lifecycle process died mid-batch) to the queue.
func (w *Worker) recovery() queuerun.Recovery[jobs.Recovered] {
	return queuerun.Recovery[jobs.Recovered]{
		Name: "recover job leases", Interval: w.cfg.RecoverInterval, Message: "recovered expired job lease",
		Recover: func(ctx context.Context) ([]jobs.Recovered, error) { return w.jobs.RecoverLeases(ctx, w.pool, 1000) },
		Describe: func(r jobs.Recovered) (string, []any) {
			return r.Status, []any{"job_id", r.ID, "kind", r.Kind, "previous_owner", r.PreviousOwner}
		},
	}
}

// stats refreshes the job gauges (states in jobStates' order).
func (w *Worker) stats() queuerun.Stats {
	return queuerun.Stats{Name: "read job queue statistics", Interval: w.cfg.StatsInterval,
		Read: func(ctx context.Context) (float64, []int64, error) {
			st, err := w.jobs.Stats(ctx, w.pool)
			return st.OldestAvailableAgeSeconds, []int64{st.Available, st.Leased, st.Retrying, st.DeadLetter}, err
		}}
}

// staleRuns refreshes boardreadyops_release_runs_stale: non-terminal runs whose state has not
// changed for StaleAfter, by state (aggregate counts only; brops release-runs list
// --unchanged-for names them).
func (w *Worker) staleRuns() queuerun.Task {
	return queuerun.Task{Name: "count stale release runs", Interval: w.cfg.StatsInterval, Immediately: true,
		Run: func(ctx context.Context) error {
			rows, err := w.pool.Query(ctx, `SELECT status, stale FROM boardreadyops_release_run_stale_counts($1)`, w.cfg.StaleAfter)
			if err != nil {
				return fmt.Errorf("count stale release runs: %w", err)
			}
			counts := map[string]int64{}
			var state string
			var n int64
			if _, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error { counts[state] = n; return nil }); err != nil {
				return fmt.Errorf("count stale release runs: %w", err)
			}
			for _, s := range staleStates {
				w.metrics.stale.WithLabelValues(s).Set(float64(counts[s]))
			}
			return nil
		}}
}

// readBackQuiet enqueues a read of the workflow run of every running release run quiet for
// ReadBackAfter (a lost workflow_run.completed webhook): the dispatcher performs the GET and
// finishes the run from GitHub's answer, so lifecycle itself makes no GitHub request. Each
// replica runs it; the attempts it reads are locked SKIP LOCKED, so two never read one twice.
func (w *Worker) readBackQuiet() queuerun.Task {
	return queuerun.Task{Name: "read back quiet release runs", Interval: time.Minute, Immediately: true,
		Run: func(ctx context.Context) error {
			var n int
			if err := w.pool.QueryRow(ctx, `SELECT boardreadyops_release_run_read_back_quiet($1, 100)`, w.cfg.ReadBackAfter).Scan(&n); err != nil {
				return fmt.Errorf("read back quiet release runs: %w", err)
			}
			if n > 0 {
				w.cfg.Logger.InfoContext(ctx, "reading quiet workflow runs back from GitHub", "runs", n, "quiet_for", w.cfg.ReadBackAfter.String())
				if w.cfg.OnEffects != nil {
					w.cfg.OnEffects()
				}
			}
			return nil
		}}
}
