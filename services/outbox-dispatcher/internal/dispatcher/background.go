package dispatcher

import (
	"context"

	"github.com/boardreadyops/cloud/pkg/daemon"
	"github.com/boardreadyops/cloud/pkg/notify"
)

// listen wakes the loop on every NOTIFY boardreadyops_outbox (pkg/notify reconnects with backoff).
func (d *Dispatcher) listen(ctx context.Context) {
	notify.Listen(ctx, d.pool.Config().ConnConfig, notify.Outbox, d.Wake, d.logger)
}

// recoverLoop runs boardreadyops_outbox_recover_leases periodically: a started dispatch whose worker died goes to reconciliation_required, anything else back to the queue.
func (d *Dispatcher) recoverLoop(ctx context.Context) {
	daemon.Every(ctx, d.cfg.RecoverInterval, false, func(ctx context.Context) {
		rec, err := d.store.RecoverLeases(ctx, d.pool, 1000)
		if err != nil {
			if ctx.Err() == nil {
				d.logger.Warn("recover outbox leases failed", "error", err)
			}
			return
		}
		for _, r := range rec {
			d.logger.Warn("recovered expired outbox lease", "outbox_id", r.ID, "effect_type", r.EffectType, "previous_owner", r.PreviousOwner, "status", r.Status)
			d.metrics.recovered.WithLabelValues(r.Status).Inc()
		}
		if len(rec) > 0 {
			d.Wake()
		}
	})
}

// statsLoop refreshes the queue gauges with one cheap query per interval (not per scrape).
func (d *Dispatcher) statsLoop(ctx context.Context) {
	daemon.Every(ctx, d.cfg.StatsInterval, true, func(ctx context.Context) {
		st, err := d.store.Stats(ctx, d.pool)
		if err == nil {
			d.metrics.setStats(st)
		} else if ctx.Err() == nil {
			d.logger.Warn("read outbox statistics failed", "error", err)
		}
	})
}
