package dispatcher

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/notify"
)

// listen holds a dedicated connection LISTENing on the outbox channel; a lost connection is
// re-established with backoff while the loop polls, and every (re)connect wakes the loop once.
func (d *Dispatcher) listen(ctx context.Context) {
	delay := time.Second
	for ctx.Err() == nil {
		err := d.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		d.logger.Warn("LISTEN connection lost; polling until it is back", "error", err, "retry_in", delay)
		sleep(ctx, delay, nil)
		delay = min(delay*2, 30*time.Second)
	}
}

func (d *Dispatcher) listenOnce(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, d.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+notify.Outbox); err != nil {
		return err
	}
	d.Wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		d.Wake()
	}
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
