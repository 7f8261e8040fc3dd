package worker

import (
	"context"

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
