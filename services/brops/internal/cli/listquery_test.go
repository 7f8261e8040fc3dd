package cli

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/jobs"
	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// TestQueueListsUseTheirIndexes runs outbox list's and jobs list's statement for each status
// over queues of 20,000 rows that are nearly all completed, as after weeks of service, on a
// connection forced onto generic plans (what a pooler's shared prepared statement may settle on
// after five executions): each rare status is found through its partial index, never by reading
// the whole table. With the status a parameter, as before, every one of them was a sequential
// scan and a sort. The completed rows, newest first, are read through the completed indexes,
// by completed_at (the outbox's, ordered by updated_at, were read whole and sorted).
func TestQueueListsUseTheirIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewURL(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `
		INSERT INTO installations (id, account_login, account_type) VALUES (1, 'octo-org', 'Organization');
		INSERT INTO repositories (id, installation_id, full_name) VALUES (1, 1, 'octo-org/repo');
		INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status, completed_at)
		SELECT 1, 1, 'refs/tags/v' || g, lpad(to_hex(g), 40, '0'), 'release.yml', 'succeeded', now() FROM generate_series(1, 20000) g;
		INSERT INTO execution_attempts (release_run_id, number, status)
		SELECT id, 1, 'dispatching' FROM release_runs WHERE ref LIKE '%00';
		INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, status, updated_at, completed_at, lease_owner,
			lease_expires_at, last_error, release_run_id, installation_id)
		SELECT 'github.check_run.create', 'github.check_run.create:' || id, '{}', s, now() - n * interval '1 second',
		       CASE WHEN s = 'completed' THEN now() - n * interval '1 second' END,
		       CASE WHEN s = 'leased' THEN 'w1' END, CASE WHEN s = 'leased' THEN now() + interval '1 minute' END,
		       CASE WHEN s = 'dead_letter' THEN 'boom' END, id, 1
		FROM (SELECT id, n, CASE WHEN n % 200 = 1 THEN 'available' WHEN n % 300 = 2 THEN 'dead_letter' WHEN n % 500 = 3 THEN 'leased'
		                         ELSE 'completed' END AS s
		      FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM release_runs) r) x;
		INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, status, updated_at, delivery_started_at,
			release_run_id, execution_attempt_id, installation_id)
		SELECT 'github.workflow.dispatch', 'github.workflow.dispatch:' || release_run_id || ':' || id, '{}', 'reconciliation_required',
		       now() - interval '30 seconds', now(), release_run_id, id, 1 FROM execution_attempts;
		WITH i AS (
			INSERT INTO webhook_inbox (delivery_id, event, payload, payload_sha256)
			SELECT 'd-' || g, 'push', '{}', sha256(('d-' || g)::bytea) FROM generate_series(1, 20000) g RETURNING id
		)
		INSERT INTO control_plane_jobs (kind, inbox_id, status, updated_at, completed_at, lease_owner, lease_expires_at)
		SELECT 'push', id, s, now() - id * interval '1 second', CASE WHEN s = 'completed' THEN now() - id * interval '1 second' END,
		       CASE WHEN s = 'leased' THEN 'w1' END,
		       CASE WHEN s = 'leased' THEN now() + interval '1 minute' END
		FROM (SELECT id, CASE WHEN id % 200 = 1 THEN 'available' WHEN id % 300 = 2 THEN 'dead_letter' WHEN id % 500 = 3 THEN 'leased'
		                      ELSE 'completed' END AS s FROM i) x;
		ANALYZE;`); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		list  queueList
		index string // the index the plan must read, and no sequential scan of the table
	}{
		{queueList{status: outbox.StatusAvailable}, "control_plane_outbox_claim_idx"},
		{queueList{status: outbox.StatusLeased}, "control_plane_outbox_lease_idx"},
		{queueList{status: outbox.StatusDeadLetter}, "control_plane_outbox_attention_idx"},
		{queueList{status: outbox.StatusReconciliationRequired, effectType: outbox.EffectWorkflowDispatch}, "control_plane_outbox_attention_idx"},
		{queueList{status: outbox.StatusCompleted}, "control_plane_outbox_completed_idx"},
		{queueList{effectType: outbox.EffectCheckRunCreate}, "control_plane_outbox_completed_idx"},
		{queueList{}, "control_plane_outbox_completed_idx"},
		{queueList{table: "control_plane_jobs", status: jobs.StatusAvailable}, "control_plane_jobs_claim_idx"},
		{queueList{table: "control_plane_jobs", status: jobs.StatusLeased}, "control_plane_jobs_lease_idx"},
		{queueList{table: "control_plane_jobs", status: jobs.StatusDeadLetter}, "control_plane_jobs_dead_letter_idx"},
		{queueList{table: "control_plane_jobs", status: jobs.StatusCompleted}, "control_plane_jobs_completed_idx"},
		{queueList{table: "control_plane_jobs"}, "control_plane_jobs_completed_idx"},
	}
	want := map[string]int{"available": 100, "leased": 40, "dead_letter": 67, "reconciliation_required": 200}
	for _, tt := range tests {
		q := tt.list
		q.limit = 1000
		if q.table == "" {
			q.table, q.columns, q.statuses = "control_plane_outbox", outbox.Columns, outbox.Statuses
		} else {
			q.columns, q.statuses = jobs.Columns, jobs.Statuses
		}
		name := q.table + " " + q.status + " " + q.effectType
		sql, args, err := q.query()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Contains(sql, "LIMIT $") {
			t.Errorf("%s: the limit is a parameter, which a generic plan takes for a tenth of the rows: %s", name, sql)
		}
		plans := pgtest.NewPlans(t, url)
		rows, err := plans.Conn.Query(ctx, sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []int64
		for rows.Next() {
			vals, err := rows.Values() // the id first, as in both tables' column lists
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got = append(got, vals[0].(int64))
		}
		if rows.Close(); rows.Err() != nil {
			t.Fatalf("%s: %v", name, rows.Err())
		}
		if w, ok := want[q.status]; ok && len(got) != w {
			t.Errorf("%s: %d rows, want %d", name, len(got), w)
		}
		// The same rows in the same order as the plain statement: newest updated first.
		if ref := newestUpdated(t, pool, q); !slices.Equal(got, ref) {
			t.Errorf("%s: %d rows, not the %d newest updated in their order (first %v, want %v)", name, len(got), len(ref),
				got[:min(len(got), 5)], ref[:min(len(ref), 5)])
		}
		plan, all := plans.Find(q.table)
		if !strings.Contains(plan, tt.index) || strings.Contains(plan, "Seq Scan on "+q.table) {
			t.Errorf("%s: the plan does not read %s:\n%s\n(all plans: %q)", name, tt.index, plan, all)
		}
	}
	// The lifecycle's gauges count the dead letters through their index too, every few seconds.
	plans := pgtest.NewPlans(t, url)
	var deadLetters int
	if err := plans.Conn.QueryRow(ctx, `SELECT dead_letter FROM boardreadyops_job_stats()`).Scan(&deadLetters); err != nil {
		t.Fatal(err)
	}
	if deadLetters != want[jobs.StatusDeadLetter] {
		t.Errorf("job stats: %d dead letters, want %d", deadLetters, want[jobs.StatusDeadLetter])
	}
	if plan, all := plans.Find("control_plane_jobs"); !strings.Contains(plan, "control_plane_jobs_dead_letter_idx") ||
		strings.Contains(plan, "Seq Scan on control_plane_jobs") {
		t.Errorf("job stats do not count dead letters through control_plane_jobs_dead_letter_idx:\n%s\n(all plans: %q)", plan, all)
	}
}

// newestUpdated is what a list must return: the ids of q's rows, newest updated first, read by one
// plain statement over the whole table.
func newestUpdated(t *testing.T, pool *pgxpool.Pool, q queueList) []int64 {
	t.Helper()
	sql, args := "SELECT id FROM "+q.table+" WHERE true", []any{}
	if q.status != "" {
		args = append(args, q.status)
		sql += fmt.Sprintf(" AND status = $%d", len(args))
	}
	if q.effectType != "" {
		args = append(args, q.effectType)
		sql += fmt.Sprintf(" AND effect_type = $%d", len(args))
	}
	rows, err := pool.Query(context.Background(), sql+fmt.Sprintf(" ORDER BY updated_at DESC, id DESC LIMIT %d", q.limit), args...)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestQueueListRefusesUnknownStatus: the status is written into the statement, so only a member
// of the table's closed set gets there; anything else is a usage error naming the set.
func TestQueueListRefusesUnknownStatus(t *testing.T) {
	t.Parallel()
	for _, status := range []string{"x' OR true --", "Completed", "superseded", "completed "} {
		_, _, err := queueList{table: "control_plane_outbox", columns: outbox.Columns, statuses: outbox.Statuses,
			status: status, limit: 10}.query()
		var usage usageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), "reconciliation_required") {
			t.Errorf("status %q: %v, want a usage error naming the statuses", status, err)
		}
	}
	if _, _, err := (queueList{table: "control_plane_jobs", statuses: jobs.Statuses, limit: 1001}).query(); err == nil {
		t.Error("--limit 1001 accepted")
	}
	// A caller's own set is no way around the form either.
	if _, _, err := (queueList{table: "control_plane_jobs", statuses: []string{"x' OR true --"}, status: "x' OR true --",
		limit: 10}).query(); err == nil {
		t.Error("a status with a quote became a literal")
	}
}

// TestQueueStatusesAreTheRowRules: outbox.Statuses and jobs.Statuses, which the lists accept, are
// exactly the states the tables' row rules allow, so that a state a migration adds is not refused
// by brops.
func TestQueueStatusesAreTheRowRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.NewURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for fn, want := range map[string][]string{
		"boardreadyops_outbox_validate_row_pinned": outbox.Statuses,
		"boardreadyops_job_validate_row_pinned":    jobs.Statuses,
		// runs list without a status unites one read per status: a status missing here would
		// never be listed.
		"boardreadyops_release_run_validate_row_pinned": runStatuses,
	} {
		var def string
		if err := pool.QueryRow(ctx, `SELECT pg_get_functiondef(p.oid) FROM pg_proc p WHERE p.proname = $1`, fn).Scan(&def); err != nil {
			t.Fatalf("%s: %v", fn, err)
		}
		m := regexp.MustCompile(`p_status IN \(([^)]*)\)`).FindStringSubmatch(def)
		if m == nil {
			t.Fatalf("%s: no status rule in\n%s", fn, def)
		}
		var got []string
		for _, s := range strings.Split(m[1], ",") {
			got = append(got, strings.Trim(strings.TrimSpace(s), "'"))
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s allows %v; the list accepts %v", fn, got, want)
		}
	}
}
