package retention

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/database"
	"github.com/boardreadyops/cloud/pkg/sqlstate"
)

// Table classes, named for the table whose rows are counted. Deleting a control_plane_jobs row
// deletes its webhook_inbox row; deleting a release_runs row deletes its execution attempts and
// completed effects. A webhook_body_digests row (a body's replay defence) goes only once its
// delivery has left the inbox.
const (
	TableJobs        = "control_plane_jobs"
	TableDigests     = "webhook_body_digests"
	TableEffects     = "control_plane_outbox"
	TableReleaseRuns = "release_runs"
	TableAudit       = "control_plane_audit"
)

// Tables lists the table classes in the order a pass deletes them: jobs first, so that the
// digests of the deliveries they take out of the inbox may go in the same pass; effects before
// release runs, so that the runs behind them have nothing left but completed effects.
var Tables = []string{TableJobs, TableDigests, TableEffects, TableReleaseRuns, TableAudit}

// Periods are the retention periods per table class; zero means never.
type Periods struct {
	Jobs time.Duration
	// Digests is the replay window: a body's digest is kept this long, and in any case as long
	// as its delivery's inbox row (Settings.Validate keeps it at least Jobs and MinSafeJobs).
	Digests     time.Duration
	Effects     time.Duration
	ReleaseRuns time.Duration
	Audit       time.Duration
}

// Of returns the period of table (zero for an unknown one).
func (p Periods) Of(table string) time.Duration {
	switch table {
	case TableJobs:
		return p.Jobs
	case TableDigests:
		return p.Digests
	case TableEffects:
		return p.Effects
	case TableReleaseRuns:
		return p.ReleaseRuns
	case TableAudit:
		return p.Audit
	}
	return 0
}

// Store runs the retention functions on a pool, connection or transaction.
type Store struct {
	// Clock, when set, supplies the time instead of the database's now() (tests); honoured only
	// for a login in boardreadyops_clock or boardreadyops_admin (migration 00016).
	Clock func() time.Time
}

func (s *Store) now() *time.Time {
	if s == nil || s.Clock == nil {
		return nil
	}
	t := s.Clock()
	return &t
}

// Lease is the retention lease as one acquire left it.
type Lease struct {
	Acquired  bool      `db:"acquired"`
	Holder    string    `db:"holder"`
	HeldUntil time.Time `db:"held_until"`
}

// Acquire takes or renews the retention lease for owner for ttl (1 s to 1 h). It succeeds when
// the lease is free, expired or already owner's; otherwise Acquired is false and Holder says who
// has it. It waits at most for the holder's batch in flight.
func (s *Store) Acquire(ctx context.Context, db database.DBTX, owner string, ttl time.Duration) (Lease, error) {
	rows, err := db.Query(ctx, `SELECT acquired, holder, held_until FROM boardreadyops_retention_lease_acquire($1, $2, $3)`,
		owner, ttl, s.now())
	if err != nil {
		return Lease{}, fmt.Errorf("acquire retention lease: %w", sqlstate.Classify(err))
	}
	l, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Lease])
	if err != nil {
		return Lease{}, fmt.Errorf("acquire retention lease: %w", sqlstate.Classify(err))
	}
	return l, nil
}

// Release gives the lease up if owner holds it, so that another replica takes over at once.
func (s *Store) Release(ctx context.Context, db database.DBTX, owner string) error {
	if _, err := db.Exec(ctx, `SELECT boardreadyops_retention_lease_release($1)`, owner); err != nil {
		return fmt.Errorf("release retention lease: %w", sqlstate.Classify(err))
	}
	return nil
}

// Delete deletes up to batch rows of table older than period and returns how many went. It fails
// with sqlstate.ErrLeaseNotHeld unless owner holds the retention lease.
func (s *Store) Delete(ctx context.Context, db database.DBTX, table, owner string, period time.Duration, batch int) (int64, error) {
	var n int64
	if err := db.QueryRow(ctx, `SELECT boardreadyops_retention_delete($1, $2, $3, $4, $5)`,
		table, owner, period, batch, s.now()).Scan(&n); err != nil {
		return 0, fmt.Errorf("delete expired %s: %w", table, sqlstate.Classify(err))
	}
	return n, nil
}

// TableStatus is what retention would delete from one table class.
type TableStatus struct {
	Table string `db:"table_name" json:"table"`
	// Retention is the period; nil means never.
	Retention *time.Duration `db:"retention" json:"retention,omitempty"`
	// Expired counts the rows past the period; nil when not counted or never deleted.
	Expired *int64 `db:"expired" json:"expired,omitempty"`
	// OldestExpiredAt is the oldest row past the period; nil when none.
	OldestExpiredAt *time.Time `db:"oldest_expired_at" json:"oldest_expired_at,omitempty"`
	// OldestAt is the oldest row in a deletable state, past its period or not; nil when none.
	// For webhook_body_digests it is the oldest digest at all, its delivery in the inbox or not.
	OldestAt *time.Time `db:"oldest_at" json:"oldest_at,omitempty"`
}

// Overdue is how long the oldest row past the period has been past it at now: how far deletion is
// behind. It is 0 when no row is past the period. A row becomes deletable when it is older than
// the period, so its own age (at least the period, days) says nothing about retention keeping
// up; the time since it crossed the period does.
func (t TableStatus) Overdue(now time.Time) time.Duration {
	if t.OldestExpiredAt == nil || t.Retention == nil {
		return 0
	}
	return max(now.Sub(t.OldestExpiredAt.Add(*t.Retention)), 0)
}

// Status reports, per table class in Tables order, what p would delete. count also counts the
// expired rows (it reads their index entries; the service leaves it off).
func (s *Store) Status(ctx context.Context, db database.DBTX, p Periods, count bool) ([]TableStatus, error) {
	period := func(d time.Duration) *time.Duration {
		if d <= 0 {
			return nil
		}
		return &d
	}
	rows, err := db.Query(ctx, `SELECT table_name, retention, expired, oldest_expired_at, oldest_at
		FROM boardreadyops_retention_status($1, $2, $3, $4, $5, $6, $7)`,
		period(p.Jobs), period(p.Effects), period(p.ReleaseRuns), period(p.Audit), count, s.now(), period(p.Digests))
	if err != nil {
		return nil, fmt.Errorf("read retention status: %w", sqlstate.Classify(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[TableStatus])
	if err != nil {
		return nil, fmt.Errorf("read retention status: %w", sqlstate.Classify(err))
	}
	return out, nil
}

// IndexBloat is one partial claim or lease index against what its live entries need.
type IndexBloat struct {
	Index     string `db:"index_name" json:"index"`
	Table     string `db:"table_name" json:"table"`
	SizeBytes int64  `db:"size_bytes" json:"size_bytes"`
	// LiveEntries and NeededBytes are nil before the index's first VACUUM or ANALYZE.
	LiveEntries *int64 `db:"live_entries" json:"live_entries,omitempty"`
	NeededBytes *int64 `db:"needed_bytes" json:"needed_bytes,omitempty"`
}

// Ratio is SizeBytes / NeededBytes, or 0 when unknown.
func (b IndexBloat) Ratio() float64 {
	if b.NeededBytes == nil || *b.NeededBytes <= 0 {
		return 0
	}
	return float64(b.SizeBytes) / float64(*b.NeededBytes)
}

// Bloated reports whether the index is worth rebuilding: at least minRatio times what it needs
// and at least minBytes large (a small index is cheap to scan whatever its ratio).
func (b IndexBloat) Bloated(minRatio float64, minBytes int64) bool {
	return b.SizeBytes >= minBytes && b.Ratio() >= minRatio
}

// IndexBloat reads the estimate for every partial claim and lease index.
func (s *Store) IndexBloat(ctx context.Context, db database.DBTX) ([]IndexBloat, error) {
	rows, err := db.Query(ctx, `SELECT index_name, table_name, size_bytes, live_entries, needed_bytes
		FROM boardreadyops_retention_index_bloat()`)
	if err != nil {
		return nil, fmt.Errorf("read claim index bloat: %w", sqlstate.Classify(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[IndexBloat])
	if err != nil {
		return nil, fmt.Errorf("read claim index bloat: %w", sqlstate.Classify(err))
	}
	return out, nil
}
