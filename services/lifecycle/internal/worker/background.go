package worker

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/notify"
)

// listen holds a dedicated connection LISTENing on the jobs channel and wakes the loops on each
// notification. A lost connection is re-established with backoff; the loops poll meanwhile, and
// every (re)connect wakes them once, since notifications may have been missed.
func (w *Worker) listen(ctx context.Context) {
	delay := time.Second
	for ctx.Err() == nil {
		err := w.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		w.logger.Warn("LISTEN connection lost; polling until it is back", "error", err, "retry_in", delay)
		sleep(ctx, delay, nil)
		delay = min(delay*2, 30*time.Second)
	}
}

func (w *Worker) listenOnce(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, w.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+notify.Jobs); err != nil {
		return err
	}
	w.Wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		w.Wake()
	}
}

// recoverLoop returns expired job leases (a lifecycle process died mid-batch) to the queue.
func (w *Worker) recoverLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.RecoverInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rec, err := w.jobs.RecoverLeases(ctx, w.pool, 1000)
		if err != nil {
			if ctx.Err() == nil {
				w.logger.Warn("recover job leases failed", "error", err)
			}
			continue
		}
		for _, r := range rec {
			w.logger.Warn("recovered expired job lease", "job_id", r.ID, "kind", r.Kind, "previous_owner", r.PreviousOwner, "status", r.Status)
			w.metrics.recovered.WithLabelValues(r.Status).Inc()
		}
		if len(rec) > 0 {
			w.Wake()
		}
	}
}

// statsLoop refreshes the queue gauges with one cheap query per interval (not per scrape).
func (w *Worker) statsLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.StatsInterval)
	defer t.Stop()
	for {
		st, err := w.jobs.Stats(ctx, w.pool)
		if err == nil {
			w.metrics.setStats(st)
		} else if ctx.Err() == nil {
			w.logger.Warn("read job queue statistics failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
