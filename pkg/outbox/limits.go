package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/database"
	"github.com/boardreadyops/cloud/pkg/groupcommit"
	"github.com/boardreadyops/cloud/pkg/sqlstate"
)

// GitHub's rate limits are shared by every dispatcher replica through github_installation_limits
// (migration 00018): a block per installation that every claim honours, and a pace — deliveries
// in flight and the earliest next claim — that the claim and Release advance.

// Pace bounds the claim per installation. The zero Pace claims unpaced (rate-limit blocks are
// honoured either way); a paced claim must be followed by a release of each effect it returned.
type Pace struct {
	// PerInstallation is the most deliveries of one installation in flight at once.
	PerInstallation int
	// MutationInterval is the least time between the end of one delivery of an installation and
	// its next claim (0: none).
	MutationInterval time.Duration
}

// ClaimPaced is Claim under pace (the zero Pace: Claim).
func (s *Store) ClaimPaced(ctx context.Context, db database.DBTX, worker string, limit int, lease time.Duration, pace Pace) ([]Effect, error) {
	if pace.PerInstallation <= 0 {
		return s.Claim(ctx, db, worker, limit, lease)
	}
	return claim(ctx, db, `SELECT `+Columns+` FROM boardreadyops_outbox_claim_paced($1, $2, $3, $4, $5, $6)`,
		worker, limit, lease, pace.PerInstallation, pace.MutationInterval, s.now())
}

// Block blocks an installation for every replica after GitHub rate-limited it: until until, or,
// when until is zero (GitHub named no time), for backoff doubled per repeated limit, at most
// maxBackoff, with jitter. It returns the block's end.
func (s *Store) Block(ctx context.Context, db database.DBTX, installationID int64, until time.Time, backoff, maxBackoff time.Duration) (time.Time, error) {
	var at *time.Time
	if !until.IsZero() {
		at = &until
	}
	var end time.Time
	err := db.QueryRow(ctx, `SELECT boardreadyops_outbox_block_installation($1, $2, $3, $4, $5)`,
		installationID, at, backoff, maxBackoff, s.now()).Scan(&end)
	if err != nil {
		return time.Time{}, fmt.Errorf("block installation %d: %w", installationID, sqlstate.Classify(err))
	}
	return end, nil
}

// QueueRelease adds the end of one delivery of installationID to a group commit: its in-flight
// slot is freed and the installation's next claim waits interval from the commit.
func (s *Store) QueueRelease(b *groupcommit.Batch, installationID int64, interval time.Duration, done func(error)) {
	set, ok := b.Join("boardreadyops_outbox_release_installation_batch\x00"+interval.String(), func() groupcommit.Set {
		return &releaseSet{interval: interval, now: s.now()}
	})
	if ok {
		rs := set.(*releaseSet)
		rs.ids = append(rs.ids, installationID)
		rs.done = append(rs.done, done)
		return
	}
	queueVoid(b, "release installation", installationID, done,
		`SELECT count(*)::integer FROM boardreadyops_outbox_release_installation_batch(ARRAY[$1::bigint], $2, $3)`, installationID, interval, s.now())
}

// releaseSet is one set-based release of a batch. An installation without a row (never claimed
// paced) is simply not released: there is nothing to free.
type releaseSet struct {
	interval time.Duration
	now      any
	ids      []int64
	done     []func(error)
}

func (r *releaseSet) Queue(b *pgx.Batch) {
	b.Queue(`SELECT count(*) FROM boardreadyops_outbox_release_installation_batch($1, $2, $3)`, r.ids, r.interval, r.now).
		QueryRow(func(row pgx.Row) error {
			var n int
			err := row.Scan(&n)
			if err != nil {
				err = fmt.Errorf("release installations: %w", sqlstate.Classify(err))
			}
			for _, d := range r.done {
				d(err)
			}
			return err
		})
}

// Budget is the primary budget GitHub last reported for an installation.
type Budget struct {
	InstallationID int64
	Limit          int
	Remaining      int
	Reset          time.Time
}

// RecordBudgets stores the budgets GitHub reported; an installation with none left is blocked
// until its reset.
func (s *Store) RecordBudgets(ctx context.Context, db database.DBTX, budgets []Budget) error {
	if len(budgets) == 0 {
		return nil
	}
	ids, limits, remaining, resets := make([]int64, len(budgets)), make([]int32, len(budgets)), make([]int32, len(budgets)), make([]*time.Time, len(budgets))
	for i, b := range budgets {
		ids[i], limits[i], remaining[i] = b.InstallationID, int32(min(b.Limit, 1<<30)), int32(min(b.Remaining, 1<<30))
		if !b.Reset.IsZero() {
			resets[i] = &budgets[i].Reset
		}
	}
	_, err := db.Exec(ctx, `SELECT count(*) FROM boardreadyops_outbox_record_budget_batch($1, $2, $3, $4, $5)`,
		ids, limits, remaining, resets, s.now())
	if err != nil {
		return fmt.Errorf("record %d installation budgets: %w", len(budgets), sqlstate.Classify(err))
	}
	return nil
}

// LimitStats are the aggregate rate-limit figures (no installation named).
type LimitStats struct {
	// LowestRemainingFraction of the primary budgets whose window has not reset; nil when none
	// is known.
	LowestRemainingFraction *float64 `db:"lowest_remaining_fraction"`
	Blocked                 int64    `db:"blocked"`
	Paced                   int64    `db:"paced"`
}

// LimitStats reads the aggregate rate-limit figures; perInstallation is the dispatchers' limit.
func (s *Store) LimitStats(ctx context.Context, db database.DBTX, perInstallation int) (LimitStats, error) {
	rows, err := db.Query(ctx, `SELECT * FROM boardreadyops_outbox_limit_stats($1, $2)`, max(perInstallation, 1), s.now())
	if err != nil {
		return LimitStats{}, fmt.Errorf("installation limit stats: %w", sqlstate.Classify(err))
	}
	st, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[LimitStats])
	if err != nil {
		return LimitStats{}, fmt.Errorf("installation limit stats: %w", sqlstate.Classify(err))
	}
	return st, nil
}
