// Package outbox is the Go face of the transactional outbox (control_plane_outbox). Every method
// calls one of the state-machine functions defined in schema/migrations; the invariants (lease
// ownership, effect types, reconciliation rules) are enforced there, not here. Errors the functions
// raise are classified by package sqlstate, so callers use errors.Is(err, sqlstate.ErrLeaseNotHeld)
// and friends.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/database"
	"github.com/boardreadyops/cloud/pkg/sqlstate"
)

// Effect types of version 1.
const (
	EffectCheckRunCreate   = "github.check_run.create"
	EffectWorkflowDispatch = "github.workflow.dispatch"
	EffectCheckRunComplete = "github.check_run.complete"
	// EffectWorkflowRunRead reads a workflow run's conclusion back from GitHub (migration 00022):
	// a GET, replay-safe.
	EffectWorkflowRunRead = "github.workflow_run.read"
	// EffectCollaboratorPermissionRead reads the permission of the user who pressed Retry on a
	// check run (migration 00030): a GET, replay-safe. Its completion replays the run's dead
	// letters only for write access or more.
	EffectCollaboratorPermissionRead = "github.collaborator_permission.read"
)

// EffectTypes lists every effect type, in pipeline order. It is a closed set, safe as a metric
// label.
var EffectTypes = []string{EffectCheckRunCreate, EffectWorkflowDispatch, EffectCheckRunComplete, EffectWorkflowRunRead,
	EffectCollaboratorPermissionRead}

// Statuses of an outbox record.
const (
	StatusAvailable              = "available"
	StatusLeased                 = "leased"
	StatusCompleted              = "completed"
	StatusDeadLetter             = "dead_letter"
	StatusReconciliationRequired = "reconciliation_required"
)

// Statuses lists every status of an outbox record (the table's row rule), in pipeline order.
var Statuses = []string{StatusAvailable, StatusLeased, StatusCompleted, StatusDeadLetter, StatusReconciliationRequired}

// Effect is one outbox record.
type Effect struct {
	ID                 int64           `db:"id" json:"id"`
	EffectType         string          `db:"effect_type" json:"effect_type"`
	IdempotencyKey     string          `db:"idempotency_key" json:"idempotency_key"`
	Generation         int             `db:"generation" json:"generation"`
	Payload            json.RawMessage `db:"payload" json:"payload"`
	Status             string          `db:"status" json:"status"`
	Attempts           int             `db:"attempts" json:"attempts"`
	MaxAttempts        int             `db:"max_attempts" json:"max_attempts"`
	AvailableAt        time.Time       `db:"available_at" json:"available_at"`
	LeaseOwner         *string         `db:"lease_owner" json:"lease_owner,omitempty"`
	LeaseExpiresAt     *time.Time      `db:"lease_expires_at" json:"lease_expires_at,omitempty"`
	DeliveryStartedAt  *time.Time      `db:"delivery_started_at" json:"delivery_started_at,omitempty"`
	CompletedAt        *time.Time      `db:"completed_at" json:"completed_at,omitempty"`
	LastError          *string         `db:"last_error" json:"last_error,omitempty"`
	Result             json.RawMessage `db:"result" json:"result,omitempty"`
	ReleaseRunID       string          `db:"release_run_id" json:"release_run_id"`
	ExecutionAttemptID *string         `db:"execution_attempt_id" json:"execution_attempt_id,omitempty"`
	InstallationID     int64           `db:"installation_id" json:"installation_id"`
	SupersededBy       *int64          `db:"superseded_by" json:"superseded_by,omitempty"`
	Traceparent        *string         `db:"traceparent" json:"traceparent,omitempty"`
	CreatedAt          time.Time       `db:"created_at" json:"created_at"`
	UpdatedAt          time.Time       `db:"updated_at" json:"updated_at"`
}

// Columns is the select list matching Effect.
const Columns = `id, effect_type, idempotency_key, generation, payload, status, attempts, max_attempts,
	available_at, lease_owner, lease_expires_at, delivery_started_at, completed_at, last_error, result,
	release_run_id::text AS release_run_id, execution_attempt_id::text AS execution_attempt_id,
	installation_id, superseded_by, traceparent, created_at, updated_at`

// ScanEffect scans a row of Columns, in order (pgx.RowTo-compatible). It is what the claim path
// uses: scanning by name matched the columns to the struct by reflection for every row, a
// fifth of the dispatcher's CPU at 20,000 effects/s.
//
// payload and result are jsonb, valid JSON by construction, so they are scanned as bytes: into a
// json.RawMessage pgx runs json.Unmarshal, which only validates and copies (half of the
// payload's JSON cost in the dispatcher, which decodes it once more anyway).
func ScanEffect(row pgx.CollectableRow) (Effect, error) {
	var e Effect
	err := row.Scan(&e.ID, &e.EffectType, &e.IdempotencyKey, &e.Generation, (*[]byte)(&e.Payload), &e.Status, &e.Attempts,
		&e.MaxAttempts, &e.AvailableAt, &e.LeaseOwner, &e.LeaseExpiresAt, &e.DeliveryStartedAt, &e.CompletedAt,
		&e.LastError, (*[]byte)(&e.Result), &e.ReleaseRunID, &e.ExecutionAttemptID, &e.InstallationID, &e.SupersededBy,
		&e.Traceparent, &e.CreatedAt, &e.UpdatedAt)
	return e, err
}

// Store runs the outbox functions on a pool, connection or transaction.
type Store struct {
	// Clock, when set, supplies the time the functions use instead of the database's now().
	// Tests set it to move time without sleeping; production leaves it nil. The database honours it
	// only for a login in boardreadyops_clock or boardreadyops_admin (migration 00016): a service
	// login's time is always now().
	Clock func() time.Time
}

func (s *Store) now() *time.Time {
	if s == nil || s.Clock == nil {
		return nil
	}
	t := s.Clock()
	return &t
}

// NewEffect describes an effect to enqueue.
type NewEffect struct {
	EffectType         string
	ReleaseRunID       string
	ExecutionAttemptID string // empty for github.check_run.create
	InstallationID     int64
	Payload            any // marshalled to a JSON object; at most 8 KiB
	Traceparent        string
	MaxAttempts        int // 0 means 10
}

// Enqueue inserts an effect under its deterministic idempotency key. It returns the new record's
// id and true, or 0 and false when the key already exists (nothing is inserted). Call it in the
// transaction of the state change the effect belongs to.
func (s *Store) Enqueue(ctx context.Context, db database.DBTX, e NewEffect) (int64, bool, error) {
	payload, err := json.Marshal(e.Payload)
	if err != nil {
		return 0, false, fmt.Errorf("enqueue %s: marshal payload: %w", e.EffectType, err)
	}
	maxAttempts := e.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = 10
	}
	var id *int64
	// The jsonb payload goes as a string: in the query modes that never describe a statement
	// (exec, simple_protocol: behind a transaction-pooling PgBouncer before 1.21) a []byte is
	// typed bytea and its text form is not JSON (SQLSTATE 22P02).
	err = db.QueryRow(ctx, `SELECT boardreadyops_outbox_enqueue($1, $2, $3, $4, $5, $6, $7, $8)`,
		e.EffectType, e.ReleaseRunID, nullIfEmpty(e.ExecutionAttemptID), e.InstallationID, string(payload),
		nullIfEmpty(e.Traceparent), maxAttempts, s.now()).Scan(&id)
	if err != nil {
		return 0, false, fmt.Errorf("enqueue %s: %w", e.EffectType, sqlstate.Classify(err))
	}
	if id == nil {
		return 0, false, nil
	}
	return *id, true, nil
}

// Claim leases up to limit due effects to worker for lease, unpaced (ClaimPaced). Effects of an
// installation blocked by a rate limit are not claimed. Each claim spends one attempt.
func (s *Store) Claim(ctx context.Context, db database.DBTX, worker string, limit int, lease time.Duration) ([]Effect, error) {
	return claim(ctx, db, `SELECT `+Columns+` FROM boardreadyops_outbox_claim($1, $2, $3, $4)`, worker, limit, lease, s.now())
}

// claim runs one claim function and scans the effects it leased.
func claim(ctx context.Context, db database.DBTX, sql string, args ...any) ([]Effect, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("claim outbox batch: %w", sqlstate.Classify(err))
	}
	effects, err := pgx.CollectRows(rows, ScanEffect)
	if err != nil {
		return nil, fmt.Errorf("claim outbox batch: %w", sqlstate.Classify(err))
	}
	return effects, nil
}

// StartDelivery durably records delivery_started_at just before the request is sent. It fails
// with sqlstate.ErrLeaseNotHeld when the lease is gone or already expired: the request must then
// not be sent.
func (s *Store) StartDelivery(ctx context.Context, db database.DBTX, id int64, worker string) (time.Time, error) {
	var t time.Time
	err := db.QueryRow(ctx, `SELECT boardreadyops_outbox_start_delivery($1, $2, $3)`,
		id, worker, s.now()).Scan(&t)
	if err != nil {
		return time.Time{}, fmt.Errorf("start delivery of effect %d: %w", id, sqlstate.Classify(err))
	}
	return t, nil
}

// CompleteCheckRunCreate records the check run and advances the release run; it returns the id
// of the workflow dispatch it enqueued, or 0 when the run was not waiting for its check run.
func (s *Store) CompleteCheckRunCreate(ctx context.Context, db database.DBTX, id int64, worker string, checkRunID int64) (int64, error) {
	var dispatchID *int64
	err := db.QueryRow(ctx, `SELECT boardreadyops_outbox_complete_check_run_create($1, $2, $3, $4)`,
		id, worker, checkRunID, s.now()).Scan(&dispatchID)
	if err != nil {
		return 0, fmt.Errorf("complete check run creation %d: %w", id, sqlstate.Classify(err))
	}
	if dispatchID == nil {
		return 0, nil
	}
	return *dispatchID, nil
}

// CompleteWorkflowDispatch persists the workflow run GitHub created and advances the attempt and
// the run. When they cannot advance (sqlstate.ErrCannotAdvance) nothing completes.
func (s *Store) CompleteWorkflowDispatch(ctx context.Context, db database.DBTX, id int64, worker string, workflowRunID int64) error {
	_, err := db.Exec(ctx, `SELECT boardreadyops_outbox_complete_workflow_dispatch_with_run($1, $2, $3, NULL, $4)`,
		id, worker, workflowRunID, s.now())
	if err != nil {
		return fmt.Errorf("complete workflow dispatch %d: %w", id, sqlstate.Classify(err))
	}
	return nil
}

// CompleteCheckRunComplete records that the check run was completed on GitHub.
func (s *Store) CompleteCheckRunComplete(ctx context.Context, db database.DBTX, id int64, worker string) error {
	_, err := db.Exec(ctx, `SELECT boardreadyops_outbox_complete_check_run_complete($1, $2, $3)`, id, worker, s.now())
	if err != nil {
		return fmt.Errorf("complete check run completion %d: %w", id, sqlstate.Classify(err))
	}
	return nil
}

// WorkflowRunRead is what GitHub answered for a github.workflow_run.read effect.
type WorkflowRunRead struct {
	Status, Conclusion string
	RunAttempt         int
	HTMLURL            string
	// HeadSHA is the commit the workflow ran: another than the release run's fails it (00080).
	HeadSHA string
}

// The counter of release workflow runs that ran another commit than their release run's (a tag
// moved between the dispatcher's tag read and the dispatch), each of which failed its run. Both
// services that find one register it: lifecycle from a workflow_run completion, the dispatcher from
// a read-back. One alert (BoardReadyOpsReleaseRanAnotherCommit) reads both.
const (
	OtherCommitMetric     = "boardreadyops_release_workflow_other_commit_total"
	OtherCommitMetricHelp = "Release workflow runs that ran another commit than their release run's (its tag moved just before the dispatch); each failed its release run."
)

// CompleteWorkflowRunRead records the answer: "finished" (the attempt finished from it),
// "other_commit" (finished as failed: the workflow ran another commit than the run's),
// "not_finished" or "stale" (the attempt finished meanwhile).
func (s *Store) CompleteWorkflowRunRead(ctx context.Context, db database.DBTX, id int64, worker string, r WorkflowRunRead) (string, error) {
	var outcome string
	err := db.QueryRow(ctx, `SELECT boardreadyops_outbox_complete_workflow_run_read_at($1, $2, $3, $4, $5, $6, $7, $8)`,
		id, worker, r.Status, r.Conclusion, r.RunAttempt, r.HTMLURL, nullIfEmpty(r.HeadSHA), s.now()).Scan(&outcome)
	if err != nil {
		return "", fmt.Errorf("complete workflow run read %d: %w", id, sqlstate.Classify(err))
	}
	return outcome, nil
}

// CollaboratorPermission is what GitHub answered for a github.collaborator_permission.read
// effect. Collaborator false (GitHub answered 404) means no permission at all.
type CollaboratorPermission struct {
	Collaborator         bool
	Permission, RoleName string
}

// args are the completion's permission and role name: NULL for a user who is not a collaborator.
func (p CollaboratorPermission) args() (permission, roleName *string) {
	if !p.Collaborator {
		return nil, nil
	}
	return &p.Permission, &p.RoleName
}

// CompleteCollaboratorPermissionRead records the answer: "retried" (write access or more: the
// run's dead letters were replayed), "refused" (less: audited, answered on the check run) or
// "nothing_to_retry" (write access, but the run moved on meanwhile).
func (s *Store) CompleteCollaboratorPermissionRead(ctx context.Context, db database.DBTX, id int64, worker string, p CollaboratorPermission) (string, error) {
	permission, roleName := p.args()
	var outcome string
	err := db.QueryRow(ctx, `SELECT boardreadyops_outbox_complete_collaborator_permission_read($1, $2, $3, $4, $5)`,
		id, worker, permission, roleName, s.now()).Scan(&outcome)
	if err != nil {
		return "", fmt.Errorf("complete collaborator permission read %d: %w", id, sqlstate.Classify(err))
	}
	return outcome, nil
}

// Retry returns the effect to the queue at retryAt after a transient failure, or dead-letters it
// when its attempts are exhausted; it returns the new status. For a workflow dispatch call it only
// when the request provably never reached GitHub. A check-run update that a newer update of its
// run replaced is completed as superseded instead (status completed): sent later, it would undo
// the newer one.
func (s *Store) Retry(ctx context.Context, db database.DBTX, id int64, worker, errText string, retryAt time.Time) (string, error) {
	var status string
	err := db.QueryRow(ctx, `SELECT boardreadyops_outbox_retry($1, $2, $3, $4, $5)`,
		id, worker, errText, retryAt, s.now()).Scan(&status)
	if err != nil {
		return "", fmt.Errorf("retry effect %d: %w", id, sqlstate.Classify(err))
	}
	return status, nil
}

// Defer returns a rate-limited effect to the queue at until without spending an attempt; a
// check-run update that a newer one replaced is completed as superseded instead.
func (s *Store) Defer(ctx context.Context, db database.DBTX, id int64, worker string, until time.Time, reason string) error {
	_, err := db.Exec(ctx, `SELECT boardreadyops_outbox_defer($1, $2, $3, $4, $5)`,
		id, worker, until, nullIfEmpty(reason), s.now())
	if err != nil {
		return fmt.Errorf("defer effect %d: %w", id, sqlstate.Classify(err))
	}
	return nil
}

// Release gives a leased effect back without spending an attempt (shutdown before delivery); a
// check-run update that a newer one replaced is completed as superseded instead.
func (s *Store) Release(ctx context.Context, db database.DBTX, id int64, worker string) error {
	_, err := db.Exec(ctx, `SELECT boardreadyops_outbox_release($1, $2, $3)`, id, worker, s.now())
	if err != nil {
		return fmt.Errorf("release effect %d: %w", id, sqlstate.Classify(err))
	}
	return nil
}

// DeadLetter records a permanent failure.
func (s *Store) DeadLetter(ctx context.Context, db database.DBTX, id int64, worker, errText string) error {
	_, err := db.Exec(ctx, `SELECT boardreadyops_outbox_dead_letter($1, $2, $3, $4)`,
		id, worker, errText, s.now())
	if err != nil {
		return fmt.Errorf("dead-letter effect %d: %w", id, sqlstate.Classify(err))
	}
	return nil
}

// Reject records a request GitHub refused, which was sent under installationID as repository
// (the effect's as claimed). When the repository's installation or name is no longer those (it
// was transferred or renamed: migration 00088), the effect and its run take the current ones, the
// attempt is given back and the effect is returned to the queue (StatusAvailable; StatusCompleted
// for a check-run update a newer one replaced); otherwise it is dead-lettered, marked with the
// installation that refused it (StatusDeadLetter). It returns the new status.
func (s *Store) Reject(ctx context.Context, db database.DBTX, id int64, worker, errText string, installationID int64, repository string) (string, error) {
	var status string
	err := db.QueryRow(ctx, `SELECT boardreadyops_outbox_reject($1, $2, $3, $4, $5, $6)`,
		id, worker, errText, installationID, nullIfEmpty(repository), s.now()).Scan(&status)
	if err != nil {
		return "", fmt.Errorf("reject effect %d: %w", id, sqlstate.Classify(err))
	}
	return status, nil
}

// RequireReconciliation parks a workflow dispatch whose outcome is unknown.
func (s *Store) RequireReconciliation(ctx context.Context, db database.DBTX, id int64, worker, errText string) error {
	_, err := db.Exec(ctx, `SELECT boardreadyops_outbox_require_reconciliation($1, $2, $3, $4)`,
		id, worker, errText, s.now())
	if err != nil {
		return fmt.Errorf("require reconciliation of effect %d: %w", id, sqlstate.Classify(err))
	}
	return nil
}

// Recovered is one expired lease that recovery moved on.
type Recovered struct {
	ID            int64  `db:"id"`
	EffectType    string `db:"effect_type"`
	PreviousOwner string `db:"previous_owner"`
	Status        string `db:"status"`
}

// RecoverLeases moves up to limit expired leases on: a started dispatch to
// reconciliation_required, a check-run update that a newer update of its run replaced to completed
// (superseded), anything else to available (or dead_letter when exhausted).
func (s *Store) RecoverLeases(ctx context.Context, db database.DBTX, limit int) ([]Recovered, error) {
	rows, err := db.Query(ctx, `SELECT id, effect_type, previous_owner, status
		FROM boardreadyops_outbox_recover_leases($1, $2)`, s.now(), limit)
	if err != nil {
		return nil, fmt.Errorf("recover outbox leases: %w", sqlstate.Classify(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[Recovered])
	if err != nil {
		return nil, fmt.Errorf("recover outbox leases: %w", sqlstate.Classify(err))
	}
	return out, nil
}

// Replay returns a dead letter to the queue, audited. It refuses reconciliation_required records
// with sqlstate.ErrReconciliationRequired.
func (s *Store) Replay(ctx context.Context, db database.DBTX, id int64, operator, reason string) (Effect, error) {
	rows, err := db.Query(ctx, `SELECT `+Columns+` FROM boardreadyops_outbox_replay($1, $2, $3, $4)`,
		id, operator, reason, s.now())
	if err != nil {
		return Effect{}, fmt.Errorf("replay effect %d: %w", id, sqlstate.Classify(err))
	}
	e, err := pgx.CollectExactlyOneRow(rows, ScanEffect)
	if err != nil {
		return Effect{}, fmt.Errorf("replay effect %d: %w", id, sqlstate.Classify(err))
	}
	return e, nil
}

// ResolveReconciliationRepair resolves a reconciliation_required dispatch for which GitHub did create
// workflowRunID: the run is recorded and the attempt advances, audited with evidence.
func (s *Store) ResolveReconciliationRepair(ctx context.Context, db database.DBTX, id int64, operator string, workflowRunID int64, evidence string) error {
	_, err := db.Exec(ctx, `SELECT boardreadyops_outbox_resolve_reconciliation($1, $2, $3, $4, $5)`,
		id, operator, workflowRunID, evidence, s.now())
	if err != nil {
		return fmt.Errorf("repair reconciliation of effect %d: %w", id, sqlstate.Classify(err))
	}
	return nil
}

// ResolveReconciliationSupersede resolves a reconciliation_required dispatch that GitHub did not
// act on: it is closed and a fresh dispatch is enqueued under a new key, whose id is returned.
func (s *Store) ResolveReconciliationSupersede(ctx context.Context, db database.DBTX, id int64, operator, evidence string) (int64, error) {
	var newID int64
	err := db.QueryRow(ctx, `SELECT boardreadyops_outbox_resolve_reconciliation($1, $2, NULL, $3, $4)`,
		id, operator, evidence, s.now()).Scan(&newID)
	if err != nil {
		return 0, fmt.Errorf("supersede reconciliation of effect %d: %w", id, sqlstate.Classify(err))
	}
	return newID, nil
}

// Stats are the aggregate queue figures the dispatcher exports as metrics.
type Stats struct {
	Available                 int64   `db:"available" json:"available"`
	Due                       int64   `db:"due" json:"due"`
	Leased                    int64   `db:"leased" json:"leased"`
	Retrying                  int64   `db:"retrying" json:"retrying"`
	DeadLetter                int64   `db:"dead_letter" json:"dead_letter"`
	ReconciliationRequired    int64   `db:"reconciliation_required" json:"reconciliation_required"`
	OldestAvailableAgeSeconds float64 `db:"oldest_available_age_seconds" json:"oldest_available_age_seconds"`
}

// Stats reads the aggregate queue figures in one statement.
func (s *Store) Stats(ctx context.Context, db database.DBTX) (Stats, error) {
	rows, err := db.Query(ctx, `SELECT * FROM boardreadyops_outbox_stats($1)`, s.now())
	if err != nil {
		return Stats{}, fmt.Errorf("outbox stats: %w", sqlstate.Classify(err))
	}
	st, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Stats])
	if err != nil {
		return Stats{}, fmt.Errorf("outbox stats: %w", err)
	}
	return st, nil
}

// Get reads one record.
func Get(ctx context.Context, db database.DBTX, id int64) (Effect, error) {
	rows, err := db.Query(ctx, `SELECT `+Columns+` FROM control_plane_outbox WHERE id = $1`, id)
	if err != nil {
		return Effect{}, fmt.Errorf("get effect %d: %w", id, err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, ScanEffect)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Effect{}, fmt.Errorf("get effect %d: %w", id, sqlstate.ErrNotFound)
		}
		return Effect{}, fmt.Errorf("get effect %d: %w", id, err)
	}
	return e, nil
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
