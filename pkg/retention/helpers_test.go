package retention_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/retention"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const day = 24 * time.Hour

// now is the fixtures' time; the retention functions are called at it (Store.Clock).
var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

var deliveries atomic.Int64

// rows builds control-plane rows directly (as the test's superuser) in any state, at an age.
type rows struct {
	t    testing.TB
	pool *pgxpool.Pool
}

func newRows(t testing.TB) (*rows, *retention.Store) {
	t.Helper()
	return &rows{t: t, pool: pgtest.NewPool(t)}, &retention.Store{Clock: func() time.Time { return now }}
}

func randomID() int64 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint32(b[:])>>1) + 1
}

func (r *rows) exec(sql string, args ...any) {
	r.t.Helper()
	if _, err := r.pool.Exec(context.Background(), sql, args...); err != nil {
		r.t.Fatalf("%s: %v", sql, err)
	}
}

func (r *rows) scan(dst any, sql string, args ...any) {
	r.t.Helper()
	if err := r.pool.QueryRow(context.Background(), sql, args...).Scan(dst); err != nil {
		r.t.Fatalf("%s: %v", sql, err)
	}
}

// job inserts an inbox row and its job in status, completed (when completed) ago before now.
func (r *rows) job(status string, ago time.Duration) (inboxID int64) {
	r.t.Helper()
	at := now.Add(-ago)
	var completed, leaseOwner, leaseUntil any
	switch status {
	case "completed":
		completed = at
	case "leased":
		leaseOwner, leaseUntil = "w", now.Add(time.Minute)
	}
	r.scan(&inboxID, `INSERT INTO webhook_inbox (delivery_id, event, payload, payload_sha256, received_at)
		VALUES ($1, 'ping', '{}', sha256(convert_to($1::text, 'UTF8')), $2) RETURNING id`, fmt.Sprintf("d-%d-%d", randomID(), deliveries.Add(1)), at)
	r.exec(`INSERT INTO control_plane_jobs (kind, inbox_id, status, completed_at, lease_owner, lease_expires_at, created_at, updated_at)
		VALUES ('ping', $1, $2, $3, $4, $5, $6, $6)`, inboxID, status, completed, leaseOwner, leaseUntil, at)
	return inboxID
}

// run inserts an installation, a repository, a release run in status (completed ago before now
// when terminal) and its attempt 1 in the matching state.
func (r *rows) run(status string, ago time.Duration) (runID, attemptID string) {
	r.t.Helper()
	inst, repo := randomID(), randomID()
	r.exec(`INSERT INTO installations (id, account_login, account_type) VALUES ($1, 'octo-org', 'Organization')`, inst)
	r.exec(`INSERT INTO repositories (id, installation_id, full_name) VALUES ($1, $2, $3)`, repo, inst, fmt.Sprintf("octo-org/repo-%d", repo))
	at := now.Add(-ago)
	var completed any
	attempt := "pending"
	if status == "succeeded" || status == "failed" || status == "cancelled" {
		completed, attempt = at, status
	}
	r.scan(&runID, `INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status, completed_at, created_at, updated_at)
		VALUES ($1, $2, 'refs/tags/v1.0.0', repeat('a', 40), 'boardreadyops-release.yml', $3, $4, $5, $5) RETURNING id::text`,
		repo, inst, status, completed, at.Add(-time.Hour))
	r.scan(&attemptID, `INSERT INTO execution_attempts (release_run_id, number, status, completed_at) VALUES ($1, 1, $2, $3) RETURNING id::text`,
		runID, attempt, completed)
	return runID, attemptID
}

// effect inserts an effect of run in status (completed ago before now when completed). kind picks
// one of the three effect types, so a run has up to three.
func (r *rows) effect(runID, attemptID, effectType, status string, ago time.Duration) (id int64) {
	r.t.Helper()
	at := now.Add(-ago)
	key := effectType + ":" + runID
	var attempt, completed, started, leaseOwner, leaseUntil any
	if effectType != "github.check_run.create" {
		attempt, key = attemptID, key+":"+attemptID
	}
	switch status {
	case "completed":
		completed = at
	case "reconciliation_required":
		started = at
	case "leased":
		leaseOwner, leaseUntil = "w", now.Add(time.Minute)
	}
	r.scan(&id, `INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, status, completed_at, delivery_started_at,
			lease_owner, lease_expires_at, release_run_id, execution_attempt_id, installation_id, created_at, updated_at)
		VALUES ($1, $2, '{}', $3, $4, $5, $6, $7, $8, $9, 1, $10, $10) RETURNING id`,
		effectType, key, status, completed, started, leaseOwner, leaseUntil, runID, attempt, at)
	return id
}

// workflowRun records the workflow run that attempt attemptID dispatched (the row that
// execution_attempt_workflow_runs keeps per dispatched attempt).
func (r *rows) workflowRun(attemptID string) string {
	r.t.Helper()
	r.exec(`INSERT INTO execution_attempt_workflow_runs (execution_attempt_id, workflow_run_url, updated_at)
		VALUES ($1, 'https://github.example/octo-org/repo/actions/runs/1', now())`, attemptID)
	return attemptID
}

// digest inserts the body digest of a delivery that is not in the inbox (an ignored event, or
// one whose inbox row retention removed), received ago before now, and returns its delivery id.
func (r *rows) digest(ago time.Duration) (deliveryID string) {
	r.t.Helper()
	deliveryID = fmt.Sprintf("ignored-%d-%d", randomID(), deliveries.Add(1))
	r.exec(`INSERT INTO webhook_body_digests (payload_sha256, delivery_id, received_at)
		VALUES (sha256(convert_to($1::text, 'UTF8')), $1, $2)`, deliveryID, now.Add(-ago))
	return deliveryID
}

// digestOf inserts the body digest of the delivery of inbox row inboxID, received ago before now
// (the inbox row's own received_at is its job's time), and returns the delivery id.
func (r *rows) digestOf(inboxID int64, ago time.Duration) (deliveryID string) {
	r.t.Helper()
	r.scan(&deliveryID, `INSERT INTO webhook_body_digests (payload_sha256, delivery_id, received_at)
		SELECT payload_sha256, delivery_id, $2 FROM webhook_inbox WHERE id = $1 RETURNING delivery_id`, inboxID, now.Add(-ago))
	return deliveryID
}

// audit inserts an audit row that occurred ago before now.
func (r *rows) audit(ago time.Duration) (id int64) {
	r.t.Helper()
	r.scan(&id, `INSERT INTO control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, from_status, to_status)
		VALUES ($1, 'alice', 'job.replay', 'job', 1, 'why', 'dead_letter', 'available') RETURNING id`, now.Add(-ago))
	return id
}

func (r *rows) exists(table, idColumn string, id any) bool {
	r.t.Helper()
	var ok bool
	r.scan(&ok, `SELECT EXISTS (SELECT 1 FROM `+table+` WHERE `+idColumn+`::text = $1::text)`, fmt.Sprint(id))
	return ok
}

// sweep takes the lease as owner and deletes every table class down to nothing past p.
func sweep(t testing.TB, r *rows, s *retention.Store, p retention.Periods) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	if l, err := s.Acquire(ctx, r.pool, "test", time.Minute); err != nil || !l.Acquired {
		t.Fatalf("acquire: %+v %v", l, err)
	}
	deleted := map[string]int64{}
	for _, table := range retention.Tables {
		if p.Of(table) <= 0 {
			continue
		}
		for {
			n, err := s.Delete(ctx, r.pool, table, "test", p.Of(table), 2)
			if err != nil {
				t.Fatal(err)
			}
			deleted[table] += n
			if n < 2 {
				break
			}
		}
	}
	return deleted
}
