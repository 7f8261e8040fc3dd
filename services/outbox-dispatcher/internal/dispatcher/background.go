package dispatcher

import (
	"context"

	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/queuerun"
)

// recovery runs boardreadyops_outbox_recover_leases periodically: a started
// dispatch whose worker died goes to reconciliation_required, anything else back to the queue.
func (d *Dispatcher) recovery() queuerun.Recovery[outbox.Recovered] {
	return queuerun.Recovery[outbox.Recovered]{
		Name: "recover outbox leases", Interval: d.cfg.RecoverInterval, Message: "recovered expired outbox lease",
		Recover: func(ctx context.Context) ([]outbox.Recovered, error) { return d.store.RecoverLeases(ctx, d.pool, 1000) },
		Describe: func(r outbox.Recovered) (string, []any) {
			return r.Status, []any{"outbox_id", r.ID, "effect_type", r.EffectType, "previous_owner", r.PreviousOwner}
		},
	}
}

// stats refreshes the effect gauges (states in effectStates' order) and, first, records the
// GitHub budgets and refreshes the rate-limit gauges.
func (d *Dispatcher) stats() queuerun.Stats {
	return queuerun.Stats{Name: "read outbox statistics", Interval: d.cfg.StatsInterval,
		Read: func(ctx context.Context) (float64, []int64, error) {
			d.recordBudgets(ctx) // the GitHub budgets observed, and the rate-limit gauges, each round
			st, err := d.store.Stats(ctx, d.pool)
			return st.OldestAvailableAgeSeconds, []int64{st.Available, st.Leased, st.Retrying, st.DeadLetter, st.ReconciliationRequired}, err
		}}
}
