package worker

import (
	"context"

	"github.com/boardreadyops/cloud/pkg/daemon"
	"github.com/boardreadyops/cloud/pkg/notify"
)

// listen wakes the loops on every NOTIFY boardreadyops_jobs (pkg/notify reconnects with backoff).
func (w *Worker) listen(ctx context.Context) {
	notify.Listen(ctx, w.pool.Config().ConnConfig, notify.Jobs, w.Wake, w.logger)
}

// recoverLoop returns expired job leases (a lifecycle process died mid-batch) to the queue.
func (w *Worker) recoverLoop(ctx context.Context) {
	daemon.Every(ctx, w.cfg.RecoverInterval, false, func(ctx context.Context) {
		rec, err := w.jobs.RecoverLeases(ctx, w.pool, 1000)
		if err != nil {
			if ctx.Err() == nil {
				w.logger.Warn("recover job leases failed", "error", err)
			}
			return
		}
		for _, r := range rec {
			w.logger.Warn("recovered expired job lease", "job_id", r.ID, "kind", r.Kind, "previous_owner", r.PreviousOwner, "status", r.Status)
			w.metrics.recovered.WithLabelValues(r.Status).Inc()
		}
		if len(rec) > 0 {
			w.Wake()
		}
	})
}

// statsLoop refreshes the queue gauges with one cheap query per interval (not per scrape).
func (w *Worker) statsLoop(ctx context.Context) {
	daemon.Every(ctx, w.cfg.StatsInterval, true, func(ctx context.Context) {
		st, err := w.jobs.Stats(ctx, w.pool)
		if err == nil {
			w.metrics.setStats(st)
		} else if ctx.Err() == nil {
			w.logger.Warn("read job queue statistics failed", "error", err)
		}
	})
}
