// Package jobs is the Go face of the lifecycle queue (control_plane_jobs). As with package outbox,
// every method calls one state-machine function from schema/migrations, where the lease discipline
// is enforced; errors are classified by package sqlstate.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/database"
	"github.com/boardreadyops/cloud/pkg/sqlstate"
)

// Statuses of a job.
const (
	StatusAvailable  = "available"
	StatusLeased     = "leased"
	StatusCompleted  = "completed"
	StatusDeadLetter = "dead_letter"
)

// Statuses lists every status of a job (the table's row rule), in pipeline order.
var Statuses = []string{StatusAvailable, StatusLeased, StatusCompleted, StatusDeadLetter}

// Job is one control_plane_jobs row.
type Job struct {
	ID             int64      `db:"id" json:"id"`
	Kind           string     `db:"kind" json:"kind"`
	InboxID        int64      `db:"inbox_id" json:"inbox_id"`
	Status         string     `db:"status" json:"status"`
	Attempts       int        `db:"attempts" json:"attempts"`
	MaxAttempts    int        `db:"max_attempts" json:"max_attempts"`
	AvailableAt    time.Time  `db:"available_at" json:"available_at"`
	LeaseOwner     *string    `db:"lease_owner" json:"lease_owner,omitempty"`
	LeaseExpiresAt *time.Time `db:"lease_expires_at" json:"lease_expires_at,omitempty"`
	LastError      *string    `db:"last_error" json:"last_error,omitempty"`
	CreatedAt      time.Time  `db:"created_at" json:"created_at"`
	UpdatedAt      time.Time  `db:"updated_at" json:"updated_at"`
	CompletedAt    *time.Time `db:"completed_at" json:"completed_at,omitempty"`
	Traceparent    *string    `db:"traceparent" json:"traceparent,omitempty"`
}

// Columns is the select list matching Job.
const Columns = `id, kind, inbox_id, status, attempts, max_attempts, available_at, lease_owner,
	lease_expires_at, last_error, created_at, updated_at, completed_at, traceparent`

// Store runs the job functions on a pool, connection or transaction.
type Store struct {
	// Clock, when set, supplies the time instead of the database's now() (tests). The database
	// honours it only for a login in boardreadyops_clock or boardreadyops_admin (migration 00016).
	Clock func() time.Time
}

func (s *Store) now() *time.Time {
	if s == nil || s.Clock == nil {
		return nil
	}
	t := s.Clock()
	return &t
}

// Claim leases up to limit due jobs to worker. Each claim spends one attempt.
func (s *Store) Claim(ctx context.Context, db database.DBTX, worker string, limit int, lease time.Duration) ([]Job, error) {
	rows, err := db.Query(ctx, `SELECT `+Columns+` FROM boardreadyops_job_claim($1, $2, $3, $4)`,
		worker, limit, lease, s.now())
	if err != nil {
		return nil, fmt.Errorf("claim job batch: %w", sqlstate.Classify(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[Job])
	if err != nil {
		return nil, fmt.Errorf("claim job batch: %w", sqlstate.Classify(err))
	}
	return out, nil
}

// Complete marks a leased job done. Call it in the transaction of the job's state change.
func (s *Store) Complete(ctx context.Context, db database.DBTX, id int64, worker string) error {
	if _, err := db.Exec(ctx, `SELECT boardreadyops_job_complete($1, $2, $3)`, id, worker, s.now()); err != nil {
		return fmt.Errorf("complete job %d: %w", id, sqlstate.Classify(err))
	}
	return nil
}

// Retry returns the job to the queue at retryAt, or dead-letters it when its attempts are
// exhausted; it returns the new status.
func (s *Store) Retry(ctx context.Context, db database.DBTX, id int64, worker, errText string, retryAt time.Time) (string, error) {
	var status string
	err := db.QueryRow(ctx, `SELECT boardreadyops_job_retry($1, $2, $3, $4, $5)`,
		id, worker, errText, retryAt, s.now()).Scan(&status)
	if err != nil {
		return "", fmt.Errorf("retry job %d: %w", id, sqlstate.Classify(err))
	}
	return status, nil
}

// DeadLetter records a permanent failure.
func (s *Store) DeadLetter(ctx context.Context, db database.DBTX, id int64, worker, errText string) error {
	if _, err := db.Exec(ctx, `SELECT boardreadyops_job_dead_letter($1, $2, $3, $4)`, id, worker, errText, s.now()); err != nil {
		return fmt.Errorf("dead-letter job %d: %w", id, sqlstate.Classify(err))
	}
	return nil
}

// Release gives a leased job back without spending an attempt (shutdown before it ran).
func (s *Store) Release(ctx context.Context, db database.DBTX, id int64, worker string) error {
	if _, err := db.Exec(ctx, `SELECT boardreadyops_job_release($1, $2, $3)`, id, worker, s.now()); err != nil {
		return fmt.Errorf("release job %d: %w", id, sqlstate.Classify(err))
	}
	return nil
}

// Recovered is one expired job lease that recovery moved on.
type Recovered struct {
	ID            int64  `db:"id"`
	Kind          string `db:"kind"`
	PreviousOwner string `db:"previous_owner"`
	Status        string `db:"status"`
}

// RecoverLeases returns up to limit expired leases to the queue (or dead_letter when exhausted).
func (s *Store) RecoverLeases(ctx context.Context, db database.DBTX, limit int) ([]Recovered, error) {
	rows, err := db.Query(ctx, `SELECT id, kind, previous_owner, status FROM boardreadyops_job_recover_leases($1, $2)`,
		s.now(), limit)
	if err != nil {
		return nil, fmt.Errorf("recover job leases: %w", sqlstate.Classify(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[Recovered])
	if err != nil {
		return nil, fmt.Errorf("recover job leases: %w", sqlstate.Classify(err))
	}
	return out, nil
}

// Replay returns a dead-lettered job to the queue, audited.
func (s *Store) Replay(ctx context.Context, db database.DBTX, id int64, operator, reason string) (Job, error) {
	rows, err := db.Query(ctx, `SELECT `+Columns+` FROM boardreadyops_job_replay($1, $2, $3, $4)`,
		id, operator, reason, s.now())
	if err != nil {
		return Job{}, fmt.Errorf("replay job %d: %w", id, sqlstate.Classify(err))
	}
	j, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Job])
	if err != nil {
		return Job{}, fmt.Errorf("replay job %d: %w", id, sqlstate.Classify(err))
	}
	return j, nil
}

// Stats are the aggregate queue figures of the lifecycle queue.
type Stats struct {
	Available                 int64   `db:"available" json:"available"`
	Due                       int64   `db:"due" json:"due"`
	Leased                    int64   `db:"leased" json:"leased"`
	Retrying                  int64   `db:"retrying" json:"retrying"`
	DeadLetter                int64   `db:"dead_letter" json:"dead_letter"`
	OldestAvailableAgeSeconds float64 `db:"oldest_available_age_seconds" json:"oldest_available_age_seconds"`
}

// Stats reads the aggregate queue figures in one statement.
func (s *Store) Stats(ctx context.Context, db database.DBTX) (Stats, error) {
	rows, err := db.Query(ctx, `SELECT * FROM boardreadyops_job_stats($1)`, s.now())
	if err != nil {
		return Stats{}, fmt.Errorf("job stats: %w", sqlstate.Classify(err))
	}
	st, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Stats])
	if err != nil {
		return Stats{}, fmt.Errorf("job stats: %w", err)
	}
	return st, nil
}

// Get reads one job.
func Get(ctx context.Context, db database.DBTX, id int64) (Job, error) {
	rows, err := db.Query(ctx, `SELECT `+Columns+` FROM control_plane_jobs WHERE id = $1`, id)
	if err != nil {
		return Job{}, fmt.Errorf("get job %d: %w", id, err)
	}
	j, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Job])
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Job{}, fmt.Errorf("get job %d: %w", id, sqlstate.ErrNotFound)
		}
		return Job{}, fmt.Errorf("get job %d: %w", id, err)
	}
	return j, nil
}

// Defer returns a leased job to the queue at until without spending an attempt (at most an hour
// ahead): for work that waits on something else, not for failures.
func (s *Store) Defer(ctx context.Context, db database.DBTX, id int64, worker string, until time.Time, reason string) error {
	if _, err := db.Exec(ctx, `SELECT boardreadyops_job_defer($1, $2, $3, $4, $5)`, id, worker, until, reason, s.now()); err != nil {
		return fmt.Errorf("defer job %d: %w", id, sqlstate.Classify(err))
	}
	return nil
}

// CompleteBatch marks a batch of leased jobs done in one call. When any is not leased by worker
// (sqlstate.ErrLeaseNotHeld) none is completed.
func (s *Store) CompleteBatch(ctx context.Context, db database.DBTX, ids []int64, worker string) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := db.Exec(ctx, `SELECT boardreadyops_job_complete_batch($1, $2, $3)`, ids, worker, s.now()); err != nil {
		return fmt.Errorf("complete %d jobs: %w", len(ids), sqlstate.Classify(err))
	}
	return nil
}
