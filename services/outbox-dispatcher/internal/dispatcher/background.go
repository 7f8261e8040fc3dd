package dispatcher

import (
	"context"
	"time"

	"github.com/boardreadyops/cloud/pkg/notify"
)

// listen wakes the loop on every NOTIFY boardreadyops_outbox (pkg/notify reconnects with backoff).
func (d *Dispatcher) listen(ctx context.Context) {
	notify.Listen(ctx, d.pool.Config().ConnConfig, notify.Outbox, d.Wake, d.logger)
}

// recoverLoop runs boardreadyops_recover_control_plane_outbox_leases periodically: a started
// dispatch whose worker died goes to reconciliation_required, anything else back to the queue.
func (d *Dispatcher) recoverLoop(ctx context.Context) {
	t := time.NewTicker(d.cfg.RecoverInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rec, err := d.store.RecoverLeases(ctx, d.pool, 1000)
		if err != nil {
			if ctx.Err() == nil {
				d.logger.Warn("recover outbox leases failed", "error", err)
			}
			continue
		}
		for _, r := range rec {
			d.logger.Warn("recovered expired outbox lease", "outbox_id", r.ID, "effect_type", r.EffectType,
				"previous_owner", r.PreviousOwner, "status", r.Status)
			d.metrics.recovered.WithLabelValues(r.Status).Inc()
		}
		if len(rec) > 0 {
			d.Wake()
		}
	}
}

// statsLoop refreshes the queue gauges with one query per interval.
func (d *Dispatcher) statsLoop(ctx context.Context) {
	t := time.NewTicker(d.cfg.StatsInterval)
	defer t.Stop()
	for {
		st, err := d.store.Stats(ctx, d.pool)
		if err == nil {
			d.metrics.setStats(st)
		} else if ctx.Err() == nil {
			d.logger.Warn("read outbox statistics failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
