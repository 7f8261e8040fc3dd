package migrate_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// TestOutboxIndexes: the outbox has the indexes its statements need and no more. No outbox
// transition is HOT (each changes status), so every row version enters every index whose
// predicate it meets: an index here is a cost of every claim and every completion (docs/
// performance.md, "One index fewer per outbox row version"). Migration 00049 dropped
// control_plane_outbox_execution_attempt_idx, whose lookups the effect key serves once the run is
// named; a new index belongs in this list only with the statement it serves and what it costs.
func TestOutboxIndexes(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	rows, err := pool.Query(context.Background(), `SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = 'public.control_plane_outbox'::regclass ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"control_plane_outbox_attention_idx",     // brops and the gauges: dead letters, reconciliations
		"control_plane_outbox_claim_idx",         // the claims
		"control_plane_outbox_completed_idx",     // retention of completed effects
		"control_plane_outbox_effect_key",        // an effect's identity; a run's and an attempt's effects
		"control_plane_outbox_lease_idx",         // lease recovery
		"control_plane_outbox_pkey",              // the transitions
		"control_plane_outbox_superseded_by_idx", // retention (ON DELETE SET NULL)
	}
	if !slices.Equal(got, want) {
		t.Errorf("control_plane_outbox has indexes %q, want %q", got, want)
	}
}

// TestAttemptEffectLookupsNameTheRun: the lookups of an attempt's effects (the next generation of
// a check-run update, a read-back or a permission check; one read-back at a time) read the few
// effects of that attempt through the effect key, however many effects the outbox holds. Without
// the run in their conditions (before 00049) they needed the attempt index 00049 dropped: without
// it they read the whole outbox, 20,002–40,008 rows and 670–1,353 blocks per call here.
func TestAttemptEffectLookupsNameTheRun(t *testing.T) {
	t.Parallel()
	const others = 20000
	ctx := context.Background()
	// 20,000 effects of another run's attempts, then the run whose effects are looked up, its
	// attempt running, with its check run.
	pool, conn := oneRunRepository(t)
	fillOutbox(t, conn.Conn(), 1, others)
	if _, err := conn.Exec(ctx, `SELECT boardreadyops_release_run_create(1, 1, 'refs/tags/v2.0.0', repeat('b', 40),
		'boardreadyops-release.yml', 'BoardReadyOps release')`); err != nil {
		t.Fatal(err)
	}
	var run, attempt string
	if err := pool.QueryRow(ctx, `
		WITH r AS (UPDATE release_runs SET status = 'running', check_run_id = 7, current_attempt = 1
		           WHERE ref = 'refs/tags/v2.0.0' RETURNING id)
		UPDATE execution_attempts a SET status = 'running', workflow_run_id = 42, dispatched_at = now()
		FROM r WHERE a.release_run_id = r.id RETURNING r.id::text, a.id::text`).Scan(&run, &attempt); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE control_plane_outbox`); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, sql string
		arg       string
	}{
		{"check-run update", `SELECT boardreadyops_release_run_enqueue_check_run($1::uuid, 'running', NULL, NULL)`, run},
		{"workflow run read", `SELECT boardreadyops_outbox_enqueue_workflow_run_read($1::uuid)`, attempt},
		{"permission read", `SELECT boardreadyops_outbox_enqueue_collaborator_permission_read($1::uuid, 'octocat', 1, 'd-1', NULL)`, run},
	}
	for _, tt := range tests {
		// Twice: the second call finds the first one's effect (a generation, or one at a time).
		for call := 1; call <= 2; call++ {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rows, blocks := rowsRead(t, tx, "control_plane_outbox"), outboxBlocks(t, tx)
			if _, err := tx.Exec(ctx, tt.sql, tt.arg); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			rows, blocks = rowsRead(t, tx, "control_plane_outbox")-rows, outboxBlocks(t, tx)-blocks
			t.Logf("%s, call %d: %d rows, %d blocks", tt.name, call, rows, blocks)
			if rows > 20 || blocks > 60 {
				t.Errorf("%s, call %d: read %d rows and %d blocks of an outbox of %d other effects, want at most 20 and 60",
					tt.name, call, rows, blocks, others)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// outboxBlocks is the blocks of the outbox and its indexes this transaction has read (a scan
// of an index that checks its conditions inside the index fetches few rows but every page).
func outboxBlocks(t *testing.T, tx pgx.Tx) int {
	t.Helper()
	var n int
	if err := tx.QueryRow(context.Background(), `SELECT sum(pg_stat_get_xact_blocks_fetched(c.oid))::int FROM pg_class c
		WHERE c.oid = 'public.control_plane_outbox'::regclass
		   OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'public.control_plane_outbox'::regclass)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
