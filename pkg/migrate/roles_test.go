package migrate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// TestServiceRolePrivileges checks, for each service role, what it must be able to do and what it
// must be denied. Each statement runs in its own rolled-back transaction under SET ROLE.
func TestServiceRolePrivileges(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	const (
		insertInbox   = `INSERT INTO webhook_inbox (delivery_id, event, payload, payload_sha256) VALUES ('d-1', 'ping', '{}', sha256('x'::bytea))`
		insertJob     = `WITH i AS (INSERT INTO webhook_inbox (delivery_id, event, payload, payload_sha256) VALUES ('d-2', 'ping', '{}', sha256('x'::bytea)) RETURNING id) INSERT INTO control_plane_jobs (kind, inbox_id) SELECT 'ping', id FROM i`
		readOutbox    = `SELECT count(*) FROM control_plane_outbox`
		writeOutbox   = `UPDATE control_plane_outbox SET status = 'available'`
		insertOutbox  = `INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, release_run_id, installation_id) VALUES ('github.check_run.create', 'github.check_run.create:00000000-0000-0000-0000-000000000000', '{}', '00000000-0000-0000-0000-000000000000', 1)`
		claimOutbox   = `SELECT * FROM boardreadyops_outbox_claim('w', 1, '1 minute')`
		recoverOut    = `SELECT * FROM boardreadyops_outbox_recover_leases()`
		outboxStats   = `SELECT * FROM boardreadyops_outbox_stats()`
		jobStats      = `SELECT * FROM boardreadyops_job_stats()`
		replayOutbox  = `SELECT boardreadyops_outbox_replay(1, 'op', 'why')`
		resolve       = `SELECT boardreadyops_outbox_resolve_reconciliation(1, 'op', NULL, 'evidence')`
		claimJobs     = `SELECT * FROM boardreadyops_job_claim('w', 1, '1 minute')`
		replayJob     = `SELECT boardreadyops_job_replay(1, 'op', 'why')`
		enqueue       = `SELECT boardreadyops_outbox_enqueue('github.check_run.create', gen_random_uuid(), NULL, 1, '{}')`
		readInbox     = `SELECT count(*) FROM webhook_inbox`
		readRuns      = `SELECT count(*) FROM release_runs`
		writeRuns     = `UPDATE release_runs SET status = 'failed'`
		writeInst     = `INSERT INTO installations (id, account_login, account_type) VALUES (1, 'a', 'User')`
		readAudit     = `SELECT count(*) FROM control_plane_audit`
		writeAudit    = `DELETE FROM control_plane_audit`
		sweep         = `SELECT * FROM boardreadyops_retention_sweep('7 days')`
		leaseRet      = `SELECT * FROM boardreadyops_retention_lease_acquire('w', '30 seconds')`
		statusRet     = `SELECT * FROM boardreadyops_retention_status('7 days', NULL, NULL, NULL, false)`
		statusDigests = `SELECT * FROM boardreadyops_retention_status('7 days', NULL, NULL, NULL, false, NULL, '30 days')`
		sweepDigests  = `SELECT boardreadyops_retention_delete('webhook_body_digests', 'w', '30 days')`
		version       = `SELECT boardreadyops_schema_version()`
		accept        = `SELECT * FROM boardreadyops_webhook_accept('d-3', 'ping', NULL, NULL, NULL, '{}', sha256('x'::bytea), NULL)`
		nextAttempt   = `SELECT * FROM boardreadyops_execution_attempt_start_next(gen_random_uuid())`
		deadInst      = `SELECT boardreadyops_outbox_dead_letter_installation(1, 'gone')`
		deferJob      = `SELECT boardreadyops_job_defer(1, 'w', now(), 'wait')`
		completeSet   = `SELECT * FROM boardreadyops_outbox_complete_check_run_complete_batch('{1,2}', 'w')`
		startSet      = `SELECT * FROM boardreadyops_outbox_start_delivery_batch('{1,2}', 'w')`
		createSet     = `SELECT * FROM boardreadyops_outbox_complete_check_run_create_batch('{1,2}', '{3,4}', 'w')`
		dispatchSet   = `SELECT * FROM boardreadyops_outbox_complete_workflow_dispatch_batch('{1,2}', '{3,4}', '{NULL,NULL}', 'w')`
		runFromPush   = `SELECT boardreadyops_release_run_create_from_push(1, 'w', 'release.yml', 'BoardReadyOps release')`
		finishAttempt = `SELECT * FROM boardreadyops_execution_attempt_finish(1, 'w', 'BoardReadyOps release')`
		finishSet     = `SELECT * FROM boardreadyops_execution_attempt_finish_batch('{1,2}', 'w', 'BoardReadyOps release', '{NULL,NULL}')`
		pushSet       = `SELECT * FROM boardreadyops_release_run_create_from_push_batch('{1,2}', 'w', 'release.yml', 'BoardReadyOps release', '{NULL,NULL}')`
		checkRunsSet  = `SELECT * FROM boardreadyops_release_run_enqueue_check_runs('{00000000-0000-0000-0000-000000000001}', '{running}', '{NULL}', '{NULL}')`
		createRun     = `SELECT boardreadyops_release_run_create(1, 1, 'refs/tags/v1', repeat('a', 40), 'release.yml', 'BoardReadyOps release')`
		acceptSet     = `SELECT * FROM boardreadyops_webhook_accept_batch('{d-9}', '{ping}', '{NULL}', '{NULL}', '{NULL}', '{"{}"}', ARRAY[sha256('x'::bytea)], '{NULL}')`
	)
	tests := []struct {
		role    string
		allowed []string
		denied  []string
	}{
		{"boardreadyops_ingest",
			[]string{accept, acceptSet, version},
			[]string{completeSet, createSet, dispatchSet, startSet, finishSet, pushSet, checkRunsSet, nextAttempt, deadInst, deferJob, insertInbox, insertJob, readInbox, readOutbox, writeOutbox, insertOutbox, claimOutbox, enqueue, claimJobs, readRuns, writeRuns, writeInst, readAudit, replayOutbox, sweep, leaseRet, statusRet, statusDigests, sweepDigests}},
		{"boardreadyops_lifecycle",
			[]string{readInbox, readRuns, writeInst, claimJobs, jobStats, version, nextAttempt, deadInst, deferJob, runFromPush, finishAttempt, finishSet, pushSet, leaseRet, statusRet,
				statusDigests, sweepDigests},
			[]string{readOutbox, writeOutbox, insertOutbox, claimOutbox, completeSet, createSet, dispatchSet, startSet, replayOutbox, resolve, replayJob, readAudit, writeAudit, sweep, insertInbox, accept, acceptSet,
				enqueue, writeRuns, createRun, checkRunsSet}},
		{"boardreadyops_dispatcher",
			[]string{claimOutbox, completeSet, createSet, dispatchSet, startSet, recoverOut, outboxStats, version},
			[]string{finishSet, pushSet, checkRunsSet, readOutbox, writeOutbox, insertOutbox, replayOutbox, resolve, claimJobs, enqueue, readInbox, readRuns, writeRuns, readAudit, sweep, accept, acceptSet, nextAttempt, deadInst, deferJob, leaseRet, statusRet,
				statusDigests, sweepDigests}},
		{"boardreadyops_operator",
			[]string{outboxStats, jobStats, version},
			[]string{readOutbox, claimOutbox, completeSet, createSet, dispatchSet, startSet, finishSet, pushSet, checkRunsSet, acceptSet, recoverOut, claimJobs, readInbox, readRuns, replayOutbox, insertInbox, leaseRet, statusRet, statusDigests, sweepDigests}},
		{"boardreadyops_admin",
			[]string{readOutbox, readInbox, readRuns, readAudit, outboxStats, sweep, version, claimOutbox, completeSet, createSet, dispatchSet, startSet, finishSet, pushSet, checkRunsSet, accept, acceptSet, leaseRet,
				statusRet, statusDigests, sweepDigests},
			nil},
	}
	// The deprecated names of migration 00014 grant exactly what the new names do: pods of the
	// previous release keep their privileges during a rolling upgrade, and gain none.
	for _, names := range []struct {
		label   string
		rewrite func(string) string
	}{
		{"new names", func(s string) string { return s }},
		{"deprecated names", oldNames().Replace},
	} {
		for _, tt := range tests {
			t.Run(names.label+"/"+tt.role, func(t *testing.T) {
				t.Parallel()
				for _, stmt := range tt.allowed {
					stmt = names.rewrite(stmt)
					if err := asRole(t, pool, tt.role, stmt); isDenied(err) {
						t.Errorf("%s denied: %s: %v", tt.role, stmt, err)
					}
				}
				for _, stmt := range tt.denied {
					stmt = names.rewrite(stmt)
					if err := asRole(t, pool, tt.role, stmt); !isDenied(err) {
						t.Errorf("%s allowed: %s (err %v)", tt.role, stmt, err)
					}
				}
			})
		}
	}
}

func asRole(t *testing.T, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, role, stmt string) error {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // rollback of a test transaction
	if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{role}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, stmt)
	return err
}

func isDenied(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}
