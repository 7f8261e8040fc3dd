package dispatcher

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/boardreadyops/cloud/pkg/githubapp"
	"github.com/boardreadyops/cloud/pkg/groupcommit"
	"github.com/boardreadyops/cloud/pkg/outbox"
)

// maxBlock bounds a rate-limit block: GitHub's primary window is an hour.
const maxBlock = 110 * time.Minute

// pace is the claim's per-installation bound (the zero Pace when pacing is off).
func (d *Dispatcher) pace() outbox.Pace {
	if d.cfg.Unpaced {
		return outbox.Pace{}
	}
	return outbox.Pace{PerInstallation: d.cfg.PerInstallation, MutationInterval: d.cfg.MutationInterval}
}

// withRelease adds the end of a paced delivery to its completion's transaction: its
// installation's slot is freed and its next claim waits the mutation interval from the commit.
// One statement more in the same group commit, shared by the batch's completions, instead of a
// transaction of its own. If the completion fails, so does the release (handle then releases
// alone).
func (d *Dispatcher) withRelease(e outbox.Effect, queue func(b *groupcommit.Batch, report func(error))) func(b *groupcommit.Batch, report func(error)) {
	if d.cfg.Unpaced {
		return queue
	}
	return func(b *groupcommit.Batch, report func(error)) {
		queue(b, report)
		// Its failure fails the transaction, which the completion's outcome reports.
		d.store.QueueRelease(b, e.InstallationID, d.cfg.MutationInterval, func(error) {})
	}
}

// releasePace ends a paced delivery that did not complete (deferred, retried, dead-lettered, …)
// in a transaction of its own. If it fails, the slot frees itself when the claim's lease ends.
func (d *Dispatcher) releasePace(ctx context.Context, e outbox.Effect) {
	if d.cfg.Unpaced {
		return
	}
	if err := d.commit(ctx, "boardreadyops_outbox_release_installation_batch", func(b *groupcommit.Batch, report func(error)) {
		d.store.QueueRelease(b, e.InstallationID, d.cfg.MutationInterval, report)
	}); err != nil {
		d.logger.Warn("release installation pace failed; it frees itself when the lease ends", "installation_id", e.InstallationID,
			"outbox_id", e.ID, "error", err)
		return
	}
	d.paceReleased()
}

// paceReleased: an installation's next effect becomes claimable one mutation interval from now;
// look then, rather than at the next poll (up to a poll interval later, for every paced effect).
func (d *Dispatcher) paceReleased() {
	switch {
	case d.cfg.Unpaced:
	case d.cfg.MutationInterval > 0:
		time.AfterFunc(d.cfg.MutationInterval+time.Millisecond, d.Wake)
	default:
		d.Wake()
	}
}

// rateLimited blocks the effect's installation for every replica — until GitHub's retry-after or
// reset, else for the installation's exponential backoff — and defers the effect to the block's
// end without spending an attempt.
func (d *Dispatcher) rateLimited(ctx context.Context, e outbox.Effect, err error) string {
	var ge *githubapp.Error
	errors.As(err, &ge)
	until := ge.Limit.RetryAt
	if latest := time.Now().Add(maxBlock); until.After(latest) {
		until = latest
	}
	end, berr := d.store.Block(ctx, d.pool, e.InstallationID, until, d.cfg.RateLimitBackoff, d.cfg.RateLimitMaxBackoff)
	if berr != nil {
		d.logger.Warn("recording the installation's rate-limit block failed; deferring the effect alone", "installation_id", e.InstallationID,
			"outbox_id", e.ID, "error", berr)
		end = until
		if end.IsZero() {
			end = time.Now().Add(d.cfg.RateLimitBackoff)
		}
	}
	d.metrics.deferrals.WithLabelValues(e.EffectType).Inc()
	return d.record(ctx, e, d.outcomeOf(e, d.store.Defer(ctx, d.pool, e.ID, d.cfg.WorkerID, end, err.Error()), OutcomeDeferred))
}

// budgets holds the latest primary budget GitHub reported per installation until the stats loop
// records them (bounded: one entry per installation seen since the last recording).
type budgets struct {
	mu     sync.Mutex
	latest map[int64]outbox.Budget
}

// ObserveRate is githubapp.Config.ObserveRate: it keeps the installation's latest budget.
func (d *Dispatcher) ObserveRate(installationID int64, r githubapp.Rate) {
	d.budgets.mu.Lock()
	defer d.budgets.mu.Unlock()
	if d.budgets.latest == nil {
		d.budgets.latest = map[int64]outbox.Budget{}
	}
	prev, seen := d.budgets.latest[installationID]
	// Responses can arrive out of order: keep the one of the latest window with the least left.
	if !seen || r.Reset.After(prev.Reset) || (r.Reset.Equal(prev.Reset) && r.Remaining < prev.Remaining) {
		d.budgets.latest[installationID] = outbox.Budget{InstallationID: installationID, Limit: r.Limit, Remaining: r.Remaining, Reset: r.Reset}
	}
}

// recordBudgets stores the budgets observed since the last call and refreshes the rate-limit
// gauges from PostgreSQL (the same figures on every replica).
func (d *Dispatcher) recordBudgets(ctx context.Context) {
	d.budgets.mu.Lock()
	var batch []outbox.Budget
	for _, b := range d.budgets.latest {
		batch = append(batch, b)
	}
	d.budgets.latest = nil
	d.budgets.mu.Unlock()
	if err := d.store.RecordBudgets(ctx, d.pool, batch); err != nil && ctx.Err() == nil {
		d.logger.Warn("record GitHub budgets failed", "installations", len(batch), "error", err)
	}
	st, err := d.store.LimitStats(ctx, d.pool, d.cfg.PerInstallation)
	if err != nil {
		if ctx.Err() == nil {
			d.logger.Warn("read installation limit statistics failed", "error", err)
		}
		return
	}
	d.metrics.setLimitStats(st)
}
