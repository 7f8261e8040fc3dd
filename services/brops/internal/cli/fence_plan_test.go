package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// TestRestoreFenceReadsOnlyUndeliveredEffects: the fence's statement reads the outbox through the
// partial indexes of its available and leased effects (migration 00082), not by a scan of the
// table or of an index over every effect, which would read every completed effect retention keeps
// during the restore's downtime. 20,000 finished runs with three completed effects each, and five
// dispatches not delivered (three available, two leased); a generic plan, as PL/pgSQL settles on.
func TestRestoreFenceReadsOnlyUndeliveredEffects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewURL(t)
	setup := pgtest.NewPlans(t, url)
	if _, err := setup.Conn.Exec(ctx, `
		INSERT INTO installations (id, account_login, account_type) VALUES (1, 'org-1', 'Organization');
		INSERT INTO repositories (id, installation_id, full_name) SELECT r, 1, 'org-1/repo-' || r FROM generate_series(1, 20) r;
		INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status, created_at, updated_at, completed_at)
		SELECT 1 + g % 20, 1, 'refs/tags/v' || g, substr(md5(g::text) || md5(g::text || 'x'), 1, 40),
			'boardreadyops-release.yml', 'succeeded', now() - interval '3 hours', now(), now()
		FROM generate_series(1, 20000) g;
		INSERT INTO execution_attempts (release_run_id, number, status, conclusion, workflow_run_id, dispatched_at, completed_at, updated_at)
		SELECT id, 1, 'succeeded', 'success', 900000 + row_number() OVER (ORDER BY id), created_at, now(), now() FROM release_runs;
		INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, status, completed_at, release_run_id,
			execution_attempt_id, installation_id)
		SELECT e, e || ':' || a.release_run_id || CASE WHEN e = 'github.check_run.create' THEN '' ELSE ':' || a.id END, '{}',
			'completed', now() - interval '2 hours', a.release_run_id, CASE WHEN e = 'github.check_run.create' THEN NULL ELSE a.id END, 1
		FROM execution_attempts a
		CROSS JOIN unnest(ARRAY['github.check_run.create', 'github.workflow.dispatch', 'github.check_run.complete']) e;
		UPDATE control_plane_outbox SET status = 'available', completed_at = NULL
		WHERE id IN (SELECT id FROM control_plane_outbox WHERE effect_type = 'github.workflow.dispatch' ORDER BY id LIMIT 3);
		UPDATE control_plane_outbox SET status = 'leased', completed_at = NULL, lease_owner = 'dispatcher-1', lease_expires_at = now() + interval '1 minute'
		WHERE id IN (SELECT id FROM control_plane_outbox WHERE effect_type = 'github.workflow.dispatch' ORDER BY id DESC LIMIT 2);
		ANALYZE`); err != nil {
		t.Fatal(err)
	}
	plans := pgtest.NewPlans(t, url)
	var fenced int
	if err := plans.Conn.QueryRow(ctx, `SELECT count(*) FROM boardreadyops_outbox_fence_restored($1, 'alice', 'plan test')`, time.Now()).Scan(&fenced); err != nil {
		t.Fatal(err)
	}
	if fenced != 5 {
		t.Fatalf("fenced %d dispatches, want the 5 undelivered", fenced)
	}
	plan, all := plans.Find("CTE fenced")
	if plan == "" {
		t.Fatalf("no plan of the fence's statement among %q", all)
	}
	// The fenced CTE's part of the plan: up to the next CTE.
	_, fence, _ := strings.Cut(plan, "CTE fenced")
	fence, _, _ = strings.Cut(fence, "CTE moved")
	for _, index := range []string{"control_plane_outbox_claim_idx", "control_plane_outbox_lease_idx"} {
		if !strings.Contains(fence, index) {
			t.Errorf("the fence does not read %s:\n%s", index, fence)
		}
	}
	for _, whole := range []string{"Seq Scan", "control_plane_outbox_effect_key", "control_plane_outbox_pkey"} {
		if strings.Contains(fence, whole) {
			t.Errorf("the fence reads every effect (%s):\n%s", whole, fence)
		}
	}
}
