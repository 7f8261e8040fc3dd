package migrate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// TestRowChecks breaks every rule of the hot tables' row checks (migration 00009) once and
// expects a check violation naming the rule, on INSERT and on UPDATE, and proves that a NULL rule
// passes as in a plain CHECK constraint. A rule missing from a check function makes its case
// succeed; a misnamed one reports another constraint.
func TestRowChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	const (
		run     = `'11111111-1111-1111-1111-111111111111'`
		attempt = `'22222222-2222-2222-2222-222222222222'`
		sha     = `'0123456789abcdef0123456789abcdef01234567'`
		tp      = `'00-0123456789abcdef0123456789abcdef-0123456789abcdef-01'`
	)
	// Valid rows of every table, with every nullable column NULL where a rule reads it.
	fixture := []string{
		`INSERT INTO installations (id, account_login, account_type) VALUES (1, 'acme', 'Organization')`,
		`INSERT INTO repositories (id, installation_id, full_name) VALUES (1, 1, 'acme/app')`,
		`INSERT INTO webhook_inbox (delivery_id, event, payload, payload_sha256) VALUES ('d-1', 'ping', '{}', sha256('x'::bytea))`,
		`INSERT INTO control_plane_jobs (kind, inbox_id) SELECT 'ping', id FROM webhook_inbox WHERE delivery_id = 'd-1'`,
		`INSERT INTO release_runs (id, repository_id, installation_id, ref, head_sha, workflow_file) VALUES (` + run + `, 1, 1, 'refs/tags/v1', ` + sha + `, 'release.yml')`,
		`INSERT INTO execution_attempts (id, release_run_id, number) VALUES (` + attempt + `, ` + run + `, 1)`,
		`INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, release_run_id, installation_id)
			VALUES ('github.check_run.create', 'github.check_run.create:' || ` + run + `, '{}', ` + run + `, 1)`,
	}
	for _, s := range fixture {
		if _, err := pool.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	const (
		inbox  = `INSERT INTO webhook_inbox (delivery_id, event, action, installation_id, repository_id, payload, payload_sha256, traceparent) VALUES `
		job    = `UPDATE control_plane_jobs SET `
		runSet = `UPDATE release_runs SET `
		attSet = `UPDATE execution_attempts SET `
		outSet = `UPDATE control_plane_outbox SET `
		outIns = `INSERT INTO control_plane_outbox (effect_type, idempotency_key, generation, payload, release_run_id, execution_attempt_id, installation_id, traceparent) VALUES `
	)
	tests := []struct {
		constraint string
		sql        string
	}{
		{"webhook_inbox_delivery_id_check", inbox + `('', 'ping', NULL, NULL, NULL, '{}', sha256('x'::bytea), NULL)`},
		{"webhook_inbox_event_check", inbox + `('d-2', 'Ping!', NULL, NULL, NULL, '{}', sha256('x'::bytea), NULL)`},
		{"webhook_inbox_action_check", inbox + `('d-2', 'ping', 'a b', NULL, NULL, '{}', sha256('x'::bytea), NULL)`},
		{"webhook_inbox_installation_id_check", inbox + `('d-2', 'ping', NULL, 0, NULL, '{}', sha256('x'::bytea), NULL)`},
		{"webhook_inbox_repository_id_check", inbox + `('d-2', 'ping', NULL, NULL, -1, '{}', sha256('x'::bytea), NULL)`},
		{"webhook_inbox_payload_check", inbox + `('d-2', 'ping', NULL, NULL, NULL, '[]', sha256('x'::bytea), NULL)`},
		{"webhook_inbox_payload_check", inbox + `('d-2', 'ping', NULL, NULL, NULL, jsonb_build_object('x', repeat('y', 1100000)), sha256('x'::bytea), NULL)`},
		{"webhook_inbox_payload_sha256_check", inbox + `('d-2', 'ping', NULL, NULL, NULL, '{}', 'short'::bytea, NULL)`},
		{"webhook_inbox_traceparent_check", inbox + `('d-2', 'ping', NULL, NULL, NULL, '{}', sha256('x'::bytea), 'nope')`},

		{"control_plane_jobs_kind_check", job + `kind = 'Bad Kind'`},
		{"control_plane_jobs_status_check", job + `status = 'paused'`},
		{"control_plane_jobs_attempts_check", job + `attempts = -1`},
		{"control_plane_jobs_max_attempts_check", job + `max_attempts = 0`},
		{"control_plane_jobs_max_attempts_check", job + `max_attempts = 1001`},
		{"control_plane_jobs_lease_owner_check", job + `status = 'leased', lease_owner = '', lease_expires_at = now()`},
		{"control_plane_jobs_last_error_check", job + `last_error = repeat('e', 4097)`},
		{"control_plane_jobs_traceparent_check", job + `traceparent = '00-xyz'`},
		{"control_plane_jobs_lease_check", job + `status = 'leased'`},
		{"control_plane_jobs_lease_check", job + `lease_owner = 'w', lease_expires_at = now()`},
		{"control_plane_jobs_lease_check", job + `status = 'leased', lease_owner = 'w'`},
		{"control_plane_jobs_completed_check", job + `status = 'completed'`},
		{"control_plane_jobs_completed_check", job + `completed_at = now()`},

		{"release_runs_ref_check", runSet + `ref = 'refs/heads/main'`},
		{"release_runs_ref_check", runSet + `ref = 'refs/tags/' || repeat('v', 510)`},
		{"release_runs_head_sha_check", runSet + `head_sha = 'abc'`},
		{"release_runs_workflow_file_check", runSet + `workflow_file = '../x.yml'`},
		{"release_runs_status_check", runSet + `status = 'paused'`},
		{"release_runs_check_run_id_check", runSet + `check_run_id = 0`},
		{"release_runs_current_attempt_check", runSet + `current_attempt = 0`},
		{"release_runs_completed_check", runSet + `status = 'succeeded'`},
		{"release_runs_completed_check", runSet + `completed_at = now()`},

		{"execution_attempts_number_check", attSet + `number = 0`},
		{"execution_attempts_status_check", attSet + `status = 'paused'`},
		{"execution_attempts_workflow_run_id_check", attSet + `workflow_run_id = -5, dispatched_at = now()`},
		{"execution_attempts_conclusion_check", attSet + `conclusion = ''`},
		{"execution_attempts_dispatched_check", attSet + `workflow_run_id = 5`},
		{"execution_attempts_dispatched_check", attSet + `dispatched_at = now()`},
		{"execution_attempts_completed_check", attSet + `status = 'failed'`},
		{"execution_attempts_completed_check", attSet + `completed_at = now()`},

		{"control_plane_outbox_effect_type_check", outIns + `('github.issue.create', 'github.issue.create:' || ` + run + `, 0, '{}', ` + run + `, NULL, 1, NULL)`},
		{"control_plane_outbox_generation_check", outSet + `generation = -1`},
		{"control_plane_outbox_payload_check", outSet + `payload = '"text"'`},
		{"control_plane_outbox_payload_check", outSet + `payload = jsonb_build_object('x', repeat('y', 9000))`},
		{"control_plane_outbox_status_check", outSet + `status = 'paused'`},
		{"control_plane_outbox_attempts_check", outSet + `attempts = -1`},
		{"control_plane_outbox_max_attempts_check", outSet + `max_attempts = 0`},
		{"control_plane_outbox_lease_owner_check", outSet + `status = 'leased', lease_owner = repeat('w', 201), lease_expires_at = now()`},
		{"control_plane_outbox_last_error_check", outSet + `last_error = repeat('e', 4097)`},
		{"control_plane_outbox_result_check", outSet + `result = '[]'`},
		{"control_plane_outbox_result_check", outSet + `result = jsonb_build_object('x', repeat('y', 5000))`},
		{"control_plane_outbox_installation_id_check", outSet + `installation_id = 0`},
		{"control_plane_outbox_traceparent_check", outSet + `traceparent = upper(` + tp + `)`},
		{"control_plane_outbox_idempotency_key_check", outSet + `idempotency_key = 'my-own-key'`},
		{"control_plane_outbox_idempotency_key_check", outIns + `('github.workflow.dispatch', 'github.workflow.dispatch:' || ` + run + ` || ':' || ` + attempt + `, 2, '{}', ` + run + `, ` + attempt + `, 1, NULL)`},
		{"control_plane_outbox_attempt_check", outIns + `('github.check_run.create', 'github.check_run.create:' || ` + run + ` || ':' || ` + attempt + `, 0, '{}', ` + run + `, ` + attempt + `, 1, NULL)`},
		{"control_plane_outbox_attempt_check", outIns + `('github.check_run.complete', 'github.check_run.complete:' || ` + run + `, 0, '{}', ` + run + `, NULL, 1, NULL)`},
		// Generations: superseding dispatches and successive check-run updates (00021), never a creation.
		{"control_plane_outbox_generation_effect_check", outIns + `('github.check_run.create', 'github.check_run.create:' || ` + run + ` || ':g1', 1, '{}', ` + run + `, NULL, 1, NULL)`},
		{"control_plane_outbox_lease_check", outSet + `status = 'leased'`},
		{"control_plane_outbox_lease_check", outSet + `lease_owner = 'w', lease_expires_at = now()`},
		{"control_plane_outbox_completed_check", outSet + `status = 'completed'`},
		{"control_plane_outbox_completed_check", outSet + `completed_at = now()`},
		{"control_plane_outbox_reconciliation_check", outSet + `status = 'reconciliation_required', delivery_started_at = now()`},
	}
	for _, tt := range tests {
		t.Run(tt.constraint, func(t *testing.T) {
			err := inRolledBackTx(ctx, pool, tt.sql)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "23514" || pgErr.ConstraintName != tt.constraint {
				t.Fatalf("%s:\n  error %v, want a check violation of %s", tt.sql, err, tt.constraint)
			}
			if pgErr.TableName == "" || pgErr.SchemaName != "public" {
				t.Errorf("error names table %q schema %q", pgErr.TableName, pgErr.SchemaName)
			}
		})
	}

	// Valid transitions pass: these are the shapes the SQL functions write.
	valid := []string{
		inbox + `('d-3', 'workflow_run', 'completed', 7, 8, '{"a": 1}', sha256('y'::bytea), ` + tp + `)`,
		job + `status = 'leased', lease_owner = 'w', lease_expires_at = now(), attempts = 1, traceparent = ` + tp,
		job + `status = 'completed', completed_at = now()`,
		runSet + `status = 'succeeded', completed_at = now(), check_run_id = 9, current_attempt = 2`,
		attSet + `status = 'running', workflow_run_id = 5, dispatched_at = now(), conclusion = 'success'`,
		outSet + `status = 'leased', lease_owner = 'w', lease_expires_at = now(), delivery_started_at = now()`,
		outSet + `status = 'completed', completed_at = now(), result = '{"check_run_id": 1}'`,
		outIns + `('github.workflow.dispatch', 'github.workflow.dispatch:' || ` + run + ` || ':' || ` + attempt + ` || ':g2', 2, '{}', ` + run + `, ` + attempt + `, 1, ` + tp + `)`,
	}
	for _, s := range valid {
		if err := inRolledBackTx(ctx, pool, s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	// A reconciliation-required dispatch with a delivery start is valid.
	if err := inRolledBackTx(ctx, pool, outIns+`('github.workflow.dispatch', 'github.workflow.dispatch:' || `+run+` || ':' || `+attempt+`, 0, '{}', `+run+`, `+attempt+`, 1, NULL)`,
		`UPDATE control_plane_outbox SET status = 'reconciliation_required', delivery_started_at = now() WHERE effect_type = 'github.workflow.dispatch'`); err != nil {
		t.Errorf("reconciliation_required dispatch: %v", err)
	}
}

// inRolledBackTx runs the statements in one transaction and rolls it back.
func inRolledBackTx(ctx context.Context, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, statements ...string) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, s := range statements {
		if _, err := tx.Exec(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// TestEffectKeyIsUnique: an effect's idempotency key is unique. Since migration 00035 the unique
// index is on the columns the key is made of (release run, effect type, attempt, generation),
// with a NULL attempt — a check-run creation — equal to another: a second row with the key of an
// existing one is refused whatever its other columns, and a row that differs in one of the four is
// accepted. boardreadyops_outbox_enqueue's ON CONFLICT names the same index: a second enqueue
// returns no id and writes nothing.
func TestEffectKeyIsUnique(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	const (
		run     = `'11111111-1111-1111-1111-111111111111'`
		run2    = `'33333333-3333-3333-3333-333333333333'`
		attempt = `'22222222-2222-2222-2222-222222222222'`
		attemp2 = `'44444444-4444-4444-4444-444444444444'`
		sha     = `'0123456789abcdef0123456789abcdef01234567'`
		ins     = `INSERT INTO control_plane_outbox (effect_type, idempotency_key, generation, payload, status, release_run_id, execution_attempt_id, installation_id) VALUES `
	)
	for _, s := range []string{
		`INSERT INTO installations (id, account_login, account_type) VALUES (1, 'acme', 'Organization')`,
		`INSERT INTO repositories (id, installation_id, full_name) VALUES (1, 1, 'acme/app')`,
		`INSERT INTO release_runs (id, repository_id, installation_id, ref, head_sha, workflow_file) VALUES
			(` + run + `, 1, 1, 'refs/tags/v1', ` + sha + `, 'release.yml'), (` + run2 + `, 1, 1, 'refs/tags/v2', ` + sha + `, 'release.yml')`,
		`INSERT INTO execution_attempts (id, release_run_id, number) VALUES (` + attempt + `, ` + run + `, 1), (` + attemp2 + `, ` + run + `, 2)`,
		ins + `('github.check_run.create', 'github.check_run.create:' || ` + run + `, 0, '{}', 'dead_letter', ` + run + `, NULL, 1)`,
		ins + `('github.workflow.dispatch', 'github.workflow.dispatch:' || ` + run + ` || ':' || ` + attempt + `, 0, '{}', 'available', ` + run + `, ` + attempt + `, 1)`,
		ins + `('github.workflow.dispatch', 'github.workflow.dispatch:' || ` + run + ` || ':' || ` + attempt + ` || ':g2', 2, '{}', 'available', ` + run + `, ` + attempt + `, 1)`,
	} {
		if _, err := pool.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	tests := []struct {
		name      string
		sql       string
		duplicate bool
	}{
		{"check-run creation again (NULL attempt)", ins + `('github.check_run.create', 'github.check_run.create:' || ` + run + `, 0, '{"x": 1}', 'available', ` + run + `, NULL, 1)`, true},
		{"dispatch again", ins + `('github.workflow.dispatch', 'github.workflow.dispatch:' || ` + run + ` || ':' || ` + attempt + `, 0, '{}', 'dead_letter', ` + run + `, ` + attempt + `, 1)`, true},
		{"dispatch generation again", ins + `('github.workflow.dispatch', 'github.workflow.dispatch:' || ` + run + ` || ':' || ` + attempt + ` || ':g2', 2, '{}', 'available', ` + run + `, ` + attempt + `, 1)`, true},
		{"check-run creation of another run", ins + `('github.check_run.create', 'github.check_run.create:' || ` + run2 + `, 0, '{}', 'available', ` + run2 + `, NULL, 1)`, false},
		{"dispatch of another attempt", ins + `('github.workflow.dispatch', 'github.workflow.dispatch:' || ` + run + ` || ':' || ` + attemp2 + `, 0, '{}', 'available', ` + run + `, ` + attemp2 + `, 1)`, false},
		{"dispatch of another generation", ins + `('github.workflow.dispatch', 'github.workflow.dispatch:' || ` + run + ` || ':' || ` + attempt + ` || ':g1', 1, '{}', 'available', ` + run + `, ` + attempt + `, 1)`, false},
		{"another effect type", ins + `('github.check_run.complete', 'github.check_run.complete:' || ` + run + ` || ':' || ` + attempt + `, 0, '{}', 'available', ` + run + `, ` + attempt + `, 1)`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := inRolledBackTx(ctx, pool, tt.sql)
			var pgErr *pgconn.PgError
			isDuplicate := errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "control_plane_outbox_effect_key"
			if tt.duplicate != isDuplicate || (!tt.duplicate && err != nil) {
				t.Fatalf("%s:\n  error %v, want duplicate %v", tt.sql, err, tt.duplicate)
			}
		})
	}
	var first, second *int64
	var rows int
	if err := pool.QueryRow(ctx, `SELECT boardreadyops_outbox_enqueue('github.check_run.create', `+run2+`, NULL, 1, '{}')`).Scan(&first); err != nil || first == nil {
		t.Fatalf("first enqueue: id %v, %v", first, err)
	}
	if err := pool.QueryRow(ctx, `SELECT boardreadyops_outbox_enqueue('github.check_run.create', `+run2+`, NULL, 1, '{"other": true}')`).Scan(&second); err != nil || second != nil {
		t.Fatalf("second enqueue: id %v, %v; want no id", second, err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM control_plane_outbox WHERE release_run_id = `+run2).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("effects of the run: %d, %v; want 1", rows, err)
	}
}
