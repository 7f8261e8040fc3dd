package retention_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/retention"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// TestDeletesUseTheirIndexes reads the plans (auto_explain, generic plans as PL/pgSQL settles on,
// foreign-key actions included) of one batch of each retention delete, and of the older
// boardreadyops_retention_sweep, over tables of tens of thousands of rows in every state: each
// finds its rows through the index migration 00026 built for it (the digests: 00019's, with the
// inbox's delivery_id key for the rows whose delivery is still there), with no sequential scan of
// the table and no sort.
func TestDeletesUseTheirIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, s := newRows(t)
	r.exec(`WITH i AS (
			INSERT INTO webhook_inbox (delivery_id, event, payload, payload_sha256, received_at)
			SELECT 'bulk-' || g, 'push', '{}', sha256('x'::bytea), $1::timestamptz - g * interval '1 minute'
			FROM generate_series(1, 30000) g RETURNING id, received_at
		)
		INSERT INTO control_plane_jobs (kind, inbox_id, status, completed_at, last_error)
		SELECT 'push', id, CASE WHEN id % 10 = 0 THEN 'dead_letter' WHEN id % 10 = 1 THEN 'available' ELSE 'completed' END,
		       CASE WHEN id % 10 > 1 THEN received_at END, NULL FROM i`, now)
	r.exec(`INSERT INTO installations (id, account_login, account_type) VALUES (1, 'octo-org', 'Organization')`)
	r.exec(`INSERT INTO repositories (id, installation_id, full_name) VALUES (1, 1, 'octo-org/repo')`)
	// Runs as in service: nearly all finished (one in 500 still running). This test passed with a
	// fifth of them running; with few unfinished effects, before migration 00061, the pick's NOT
	// EXISTS became an anti join against a sequential scan of the whole outbox.
	r.exec(`INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status, completed_at)
		SELECT 1, 1, 'refs/tags/v' || g, lpad(to_hex(g), 40, '0'), 'boardreadyops-release.yml',
		       CASE WHEN g % 500 = 0 THEN 'running' ELSE 'succeeded' END,
		       CASE WHEN g % 500 <> 0 THEN $1::timestamptz - g * interval '1 hour' END
		FROM generate_series(1, 10000) g`, now)
	r.exec(`INSERT INTO execution_attempts (release_run_id, number, status, completed_at)
		SELECT id, 1, CASE WHEN status = 'running' THEN 'pending' ELSE status END, completed_at FROM release_runs`)
	r.exec(`INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, status, completed_at, release_run_id, installation_id)
		SELECT 'github.check_run.create', 'github.check_run.create:' || id, '{}',
		       CASE WHEN completed_at IS NULL THEN 'available' ELSE 'completed' END, completed_at, id, 1 FROM release_runs`)
	r.exec(`INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, status, completed_at, release_run_id,
			execution_attempt_id, installation_id)
		SELECT 'github.workflow.dispatch', 'github.workflow.dispatch:' || a.release_run_id || ':' || a.id, '{}', 'completed',
		       coalesce(a.completed_at, $1::timestamptz), a.release_run_id, a.id, 1 FROM execution_attempts a`, now)
	r.exec(`INSERT INTO control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, from_status, to_status)
		SELECT $1::timestamptz - g * interval '1 hour', 'alice', 'job.replay', 'job', g, 'why', 'dead_letter', 'available'
		FROM generate_series(1, 20000) g`, now)
	// Digests: one per bulk delivery (all still in the inbox; the oldest are past the period), and
	// as many of deliveries no longer in it, half of them past the period.
	r.exec(`INSERT INTO webhook_body_digests (payload_sha256, delivery_id, received_at)
		SELECT sha256(convert_to(delivery_id, 'UTF8')), delivery_id, received_at - interval '20 days' FROM webhook_inbox`)
	r.exec(`INSERT INTO webhook_body_digests (payload_sha256, delivery_id, received_at)
		SELECT sha256(convert_to('gone-' || g, 'UTF8')), 'gone-' || g, $1::timestamptz - g * interval '2 minutes'
		FROM generate_series(1, 30000) g`, now)
	r.exec(`ANALYZE`)
	if _, err := s.Acquire(ctx, r.pool, "plans", time.Minute); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		table, node, index string
		period             time.Duration
		// also names a further index the plan must use (a lookup per row).
		also string
	}{
		{retention.TableJobs, "Delete on webhook_inbox", "control_plane_jobs_completed_idx", 7 * day, ""},
		{retention.TableDigests, "Delete on webhook_body_digests", "webhook_body_digests_received_at_idx", 30 * day, "webhook_inbox_delivery_id_key"},
		{retention.TableEffects, "Delete on control_plane_outbox", "control_plane_outbox_completed_idx", 7 * day, ""},
		{retention.TableReleaseRuns, "LockRows", "release_runs_completed_idx", 90 * day, "control_plane_outbox_effect_key"},
		{retention.TableAudit, "Delete on control_plane_audit", "control_plane_audit_occurred_at_idx", 365 * day, ""},
	}
	for _, tt := range tests {
		plans := pgtest.NewPlans(t, r.pool.Config().ConnString())
		// Six calls: PL/pgSQL's plan cache is forced generic, as it would settle after five.
		for range 6 {
			if _, err := s.Delete(ctx, plans.Conn, tt.table, "plans", tt.period, 100); err != nil {
				t.Fatal(err)
			}
		}
		plan, all := plans.Find(tt.index)
		if plan == "" || !strings.Contains(plan, tt.node) {
			t.Errorf("%s: no plan of %q uses %s:\n%s", tt.table, tt.node, tt.index, strings.Join(all, "\n---\n"))
			continue
		}
		if tt.also != "" && !strings.Contains(plan, tt.also) {
			t.Errorf("%s: the plan does not use %s:\n%s", tt.table, tt.also, plan)
		}
		for _, p := range all {
			for _, bad := range []string{"Seq Scan on " + tt.table, "Seq Scan on control_plane_outbox", "Seq Scan on execution_attempts",
				"Seq Scan on webhook_inbox", "Seq Scan on webhook_body_digests", "Sort  "} {
				if strings.Contains(p, bad) && !strings.Contains(p, "pg_") {
					t.Errorf("%s: a plan has %q:\n%s", tt.table, bad, p)
				}
			}
		}
	}

	// The gauges' reads (every replica, every 10 s): the oldest finished run with no unfinished
	// effect is found through release_runs_completed_idx and a probe of the effect key per run,
	// never by reading the outbox whole (it was, before migration 00062, at every call).
	plans := pgtest.NewPlans(t, r.pool.Config().ConnString())
	if _, err := s.Status(ctx, plans.Conn, retention.Periods{Jobs: 7 * day, Digests: 30 * day, Effects: 7 * day,
		ReleaseRuns: 90 * day, Audit: 365 * day}, false); err != nil {
		t.Fatal(err)
	}
	// (The counts, planned but not run without p_count, are brops retention status's.)
	plan, all := plans.Find("SELECT r.completed_at")
	if !strings.Contains(plan, "release_runs_completed_idx") || !strings.Contains(plan, "control_plane_outbox_effect_key") ||
		strings.Contains(plan, "Seq Scan on control_plane_outbox") {
		t.Errorf("the status's oldest finished run is not found through the completed and effect-key indexes alone:\n%s\n(all: %q)", plan, all)
	}

	// The older sweep's jobs half: the same index, no sort (it was a sequential scan and an
	// external sort before 00026).
	plans = pgtest.NewPlans(t, r.pool.Config().ConnString())
	if _, err := plans.Conn.Exec(ctx, `SELECT * FROM boardreadyops_retention_sweep('7 days', 100, $1)`, now); err != nil {
		t.Fatal(err)
	}
	plan, all = plans.Find("Delete on webhook_inbox")
	if !strings.Contains(plan, "control_plane_jobs_completed_idx") || strings.Contains(plan, "Sort") || strings.Contains(plan, "Seq Scan") {
		t.Errorf("boardreadyops_retention_sweep's jobs half does not use control_plane_jobs_completed_idx alone:\n%s\n(all: %q)", plan, all)
	}
	if plan, _ := plans.Find("Delete on control_plane_outbox"); !strings.Contains(plan, "control_plane_outbox_completed_idx") || strings.Contains(plan, "Seq Scan") {
		t.Errorf("boardreadyops_retention_sweep's outbox half:\n%s", plan)
	}
}
