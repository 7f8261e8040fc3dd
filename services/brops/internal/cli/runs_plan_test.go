package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// TestReleaseRunListUsesIndexes runs every form of list's statement (generic plans, as after
// five executions) over 6,000 runs (3,000 repositories) and checks that each reads release_runs
// through an index of migration 00023, never a scan of the table or an id::text comparison, and
// lists the runs one plain statement over the whole table lists, in its order.
func TestReleaseRunListUsesIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewURL(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `
		INSERT INTO installations (id, account_login, account_type) SELECT i, 'org-' || i, 'Organization' FROM generate_series(1, 5) i;
		INSERT INTO repositories (id, installation_id, full_name) SELECT r, 1 + r % 5, 'org-' || (1 + r % 5) || '/repo-' || r FROM generate_series(1, 3000) r;
		INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status, created_at, updated_at, completed_at)
		SELECT 1 + g % 100, 1 + (1 + g % 100) % 5, 'refs/tags/v' || g, substr(md5(g::text) || md5(g::text || 'x'), 1, 40), 'release.yml',
		       CASE WHEN g % 200 = 0 THEN 'running' ELSE 'succeeded' END, now() - g * interval '1 minute',
		       least(now(), now() - g * interval '1 minute' + (g / 200 % 4) * interval '40 minutes'),
		       CASE WHEN g % 200 = 0 THEN NULL ELSE now() END
		FROM generate_series(1, 6000) g;
		ANALYZE release_runs; ANALYZE repositories;`); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tests := []struct {
		name  string
		f     runFilter
		index string
	}{
		{"repository", runFilter{repository: "org-2/repo-1", limit: 50}, "release_runs_repository_created_idx"},
		{"repository and age", runFilter{repository: "org-2/repo-1", olderThan: time.Hour, limit: 50}, "release_runs_repository_created_idx"},
		{"status", runFilter{status: "running", limit: 50}, "release_runs_status_created_idx"},
		{"status and age", runFilter{status: "running", olderThan: time.Hour, newerThan: 48 * time.Hour, limit: 50}, "release_runs_status_created_idx"},
		{"every run", runFilter{limit: 50}, "release_runs_status_created_idx"},
		{"every run of an age", runFilter{olderThan: time.Hour, newerThan: 48 * time.Hour, limit: 50}, "release_runs_status_created_idx"},
		{"status, unchanged", runFilter{status: "running", unchangedFor: time.Hour, limit: 50}, "release_runs_status_created_idx"},
		{"every run unchanged", runFilter{unchangedFor: time.Hour, limit: 50}, "release_runs_status_created_idx"},
	}
	for _, tt := range tests {
		plans := pgtest.NewPlans(t, url)
		sql, args := tt.f.query(now)
		if strings.Contains(sql, "::text =") {
			t.Fatalf("%s: %s compares as text", tt.name, sql)
		}
		rows, err := plans.Conn.Query(ctx, sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowToStructByName[runRow])
		if err != nil {
			t.Fatal(err)
		}
		// The same runs, newest first, as one plain statement over the whole table.
		want := newestRuns(t, pool, tt.f, now)
		if len(got) != len(want) {
			t.Fatalf("%s: %d runs, want %d", tt.name, len(got), len(want))
		}
		for i := range got {
			if got[i].ID != want[i] {
				t.Fatalf("%s: run %d is %s, want %s", tt.name, i, got[i].ID, want[i])
			}
		}
		plan, all := plans.Find("release_runs")
		if !strings.Contains(plan, tt.index) || strings.Contains(plan, "Seq Scan on release_runs") {
			t.Errorf("%s: the plan does not read %s:\n%s\n(all plans: %q)", tt.name, tt.index, plan, all)
		}
		if tt.f.repository != "" && !strings.Contains(plan, "repositories_full_name_idx") {
			t.Errorf("%s: the repository is not found by repositories_full_name_idx:\n%s", tt.name, plan)
		}
	}
}

// newestRuns is what list must return for f: the ids of its runs, newest first, read by one plain
// statement.
func newestRuns(t *testing.T, pool *pgxpool.Pool, f runFilter, now time.Time) []string {
	t.Helper()
	sql := `SELECT r.id::text FROM release_runs r JOIN repositories p ON p.id = r.repository_id
		WHERE ($1 = '' OR p.full_name = $1) AND ($2 = '' OR r.status = $2)
		  AND (NOT $3 OR r.created_at < $4) AND (NOT $5 OR r.created_at >= $6) AND (NOT $8 OR r.updated_at < $9)
		ORDER BY r.created_at DESC LIMIT $7`
	rows, err := pool.Query(context.Background(), sql, f.repository, f.status, f.olderThan > 0, now.Add(-f.olderThan),
		f.newerThan > 0, now.Add(-f.newerThan), f.limit, f.unchangedFor > 0, now.Add(-f.unchangedFor))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}
