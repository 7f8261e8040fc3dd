package migrate_test

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// TestStaleCountsReadTheStatusIndex: the stale-runs gauge (lifecycle, every 5 s on every replica)
// counts the unfinished runs of each state through release_runs_status_created_idx, however many
// finished runs the table holds and however far behind its vacuum is. Its state is a parameter,
// so it is planned for an average state: with the runs' updates not yet vacuumed (no page
// all-visible) the planner chose a sequential scan of the whole table for each of the five
// states. On 300,000 runs that had just finished, 100,000 buffers and 270 ms per call instead of
// 2,700 buffers and 27 ms (migration 00060 pins it to the index).
func TestStaleCountsReadTheStatusIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	setup := pgtest.NewPool(t)
	// Runs that have finished since the last vacuum: every page has dead versions, none is
	// all-visible; the statistics are fresh (autoanalyze runs long before autovacuum).
	if _, err := setup.Exec(ctx, `
		ALTER TABLE release_runs SET (autovacuum_enabled = false);
		INSERT INTO installations (id, account_login, account_type) VALUES (1, 'org-1', 'Organization');
		INSERT INTO repositories (id, installation_id, full_name) SELECT r, 1, 'org-1/repo-' || r FROM generate_series(1, 20) r;
		INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status, created_at)
		SELECT 1 + g % 20, 1, 'refs/tags/v' || g, substr(md5(g::text) || md5(g::text || 'x'), 1, 40),
			'boardreadyops-release.yml', 'running', now() - interval '3 hours' + g * interval '100 ms'
		FROM generate_series(1, 30000) g;
		UPDATE release_runs SET status = 'succeeded', completed_at = now(), updated_at = now();
		-- Among them, three runs still running for an hour and one started a minute ago.
		INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status, created_at, updated_at)
		SELECT 1, 1, 'refs/tags/live-' || g, repeat(g::text, 40), 'boardreadyops-release.yml', 'running', t, t
		FROM generate_series(1, 4) g, LATERAL (SELECT now() - CASE WHEN g < 4 THEN interval '1 hour' ELSE interval '1 minute' END AS t) a;
		ANALYZE release_runs`); err != nil {
		t.Fatal(err)
	}
	pool, plans := pgtest.NewPlansPool(t, setup.Config().ConnString(), 1)
	got := staleCounts(t, pool, "15 minutes")
	want := map[string]int64{"requested": 0, "check_pending": 0, "dispatching": 0, "running": 3, "blocked": 0}
	if !maps.Equal(got, want) {
		t.Errorf("stale counts %v, want %v", got, want)
	}
	count, all := plans.Find("FROM public.release_runs r WHERE r.status = s.state")
	if count == "" {
		t.Fatalf("no plan of the stale count among %d plans", len(all))
	}
	if strings.Contains(count, "Seq Scan on release_runs") || !strings.Contains(count, "release_runs_status_created_idx") {
		t.Errorf("the stale count does not read the status index:\n%s", count)
	}
}

// TestStaleCountsCountFromTheLastChange: a run is stale when its state has not changed for the
// threshold (migration 00072), not when it was created longer ago. A run re-run or retried hours
// after its tag was pushed is not stale while its new attempt moves; one blocked for hours is.
func TestStaleCountsCountFromTheLastChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(ctx, `
		INSERT INTO installations (id, account_login, account_type) VALUES (1, 'org-1', 'Organization');
		INSERT INTO repositories (id, installation_id, full_name) VALUES (1, 1, 'org-1/repo')`); err != nil {
		t.Fatal(err)
	}
	runs := []struct {
		name             string
		status           string
		created, changed string // ages, as intervals
		stale            bool
	}{
		{"never moved since its creation", "check_pending", "2 hours", "2 hours", true},
		{"blocked for two hours", "blocked", "3 hours", "2 hours", true},
		{"running for ninety minutes", "running", "100 minutes", "90 minutes", true},
		{"re-run ten minutes ago, tag pushed days ago", "dispatching", "3 days", "10 minutes", false},
		{"retried five minutes ago", "dispatching", "5 hours", "5 minutes", false},
		{"running, its attempt started half an hour ago", "running", "4 hours", "30 minutes", false},
		{"young", "requested", "5 minutes", "5 minutes", false},
		{"finished long ago", "succeeded", "5 hours", "4 hours", false},
	}
	want := map[string]int64{"requested": 0, "check_pending": 0, "dispatching": 0, "running": 0, "blocked": 0}
	for i, r := range runs {
		completed := "NULL"
		if r.status == "succeeded" {
			completed = "now() - interval '" + r.changed + "'"
		}
		if _, err := pool.Exec(ctx, `INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status,
			current_attempt, check_run_id, created_at, updated_at, completed_at)
			VALUES (1, 1, $1, repeat('a', 40), 'boardreadyops-release.yml', $2, 1, CASE WHEN $2 IN ('requested', 'check_pending') THEN NULL ELSE $3::bigint END,
				now() - $4::interval, now() - $5::interval, `+completed+`)`,
			"refs/tags/v"+strconv.Itoa(i), r.status, int64(100+i), r.created, r.changed); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if r.stale {
			want[r.status]++
		}
	}
	if got := staleCounts(t, pool, "1 hour"); !maps.Equal(got, want) {
		t.Errorf("stale counts %v, want %v", got, want)
	}
}

// staleCounts is boardreadyops_release_run_stale_counts(threshold) by state.
func staleCounts(t *testing.T, pool *pgxpool.Pool, threshold string) map[string]int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT status, stale FROM boardreadyops_release_run_stale_counts($1::interval)`, threshold)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var state string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error { got[state] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}
