package migrate_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestLeaseExpiryMessagesInUTC: the reason a recovered lease gives in last_error names its
// times in UTC, ISO 8601, whatever the recovering session's DateStyle and TimeZone (migration
// 00058). Before, format('%s') rendered them in the session's settings ("06/12/2026 00:06:06.…
// EST" here).
func TestLeaseExpiryMessagesInUTC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, conn := oneRunRepository(t)
	fillOutbox(t, conn.Conn(), 1, 1)
	if _, err := conn.Exec(ctx, `SELECT boardreadyops_webhook_accept('d-1', 'push', NULL, 1, 1,
		'{"event": "push"}', sha256(convert_to('d-1', 'UTF8')), NULL)`); err != nil {
		t.Fatal(err)
	}
	// A minute ahead of the database's clock, so that both rows are due; microseconds, as stored.
	claimedAt := time.Now().UTC().Add(time.Minute).Truncate(time.Microsecond)
	var effect, job int64
	if err := conn.QueryRow(ctx, `SELECT id FROM boardreadyops_outbox_claim('w-effects', 1, '1 minute', $1)`, claimedAt).Scan(&effect); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT id FROM boardreadyops_job_claim('w-jobs', 1, '1 minute', $1)`, claimedAt).Scan(&job); err != nil {
		t.Fatal(err)
	}
	// A session far from UTC, with another date style.
	if _, err := conn.Exec(ctx, `SET DateStyle = 'SQL, DMY'; SET TimeZone = 'America/New_York'`); err != nil {
		t.Fatal(err)
	}
	later := claimedAt.Add(2 * time.Minute)
	for _, sql := range []string{`SELECT count(*) FROM boardreadyops_outbox_recover_leases($1)`, `SELECT count(*) FROM boardreadyops_job_recover_leases($1)`} {
		var n int
		if err := conn.QueryRow(ctx, sql, later).Scan(&n); err != nil || n != 1 {
			t.Fatalf("%s: recovered %d, %v", sql, n, err)
		}
	}
	utc := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }
	expired := claimedAt.Add(time.Minute)
	for _, q := range []struct {
		name, sql string
		id        int64
		want      string
	}{
		// A check-run update's claim records its delivery start.
		{"effect", `SELECT last_error FROM control_plane_outbox WHERE id = $1`, effect,
			"lease of worker w-effects expired at " + utc(expired) + " after delivery started at " + utc(claimedAt) + "; returned to the queue"},
		{"job", `SELECT last_error FROM control_plane_jobs WHERE id = $1`, job,
			"lease of worker w-jobs expired at " + utc(expired) + "; returned to the queue"},
	} {
		var got string
		if err := conn.QueryRow(ctx, q.sql, q.id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != q.want {
			t.Errorf("the recovered %s's last_error is\n%q, want\n%q", q.name, got, q.want)
		}
	}
}

// TestTimeErrorsInUTC: an error that names a time gives it in UTC, ISO 8601, whatever the
// calling session's DateStyle and TimeZone (migration 00059): a lease that expired before the
// delivery started (BR001, which a dispatcher logs), the refused defer times and rate-limit block
// (22023), and the delivery start in a refused replay's detail (BR004). Before, they followed the
// session's settings ("06/12/2026 02:26:56.276517 EST" here).
func TestTimeErrorsInUTC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, conn := oneRunRepository(t)
	fillOutbox(t, conn.Conn(), 1, 1)
	now := time.Now().UTC().Add(time.Minute).Truncate(time.Microsecond)
	var effect int64
	if err := conn.QueryRow(ctx, `SELECT id FROM boardreadyops_outbox_claim('w-1', 1, '1 minute', $1)`, now).Scan(&effect); err != nil {
		t.Fatal(err)
	}
	// A dispatch that may have reached GitHub: replay refuses it and says when its delivery started.
	var unsure int64
	if err := conn.QueryRow(ctx, `INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, status,
			release_run_id, execution_attempt_id, installation_id, delivery_started_at)
		SELECT 'github.workflow.dispatch', 'github.workflow.dispatch:' || a.release_run_id || ':' || a.id, '{}',
			'reconciliation_required', a.release_run_id, a.id, 1, $1
		FROM execution_attempts a LIMIT 1 RETURNING id`, now).Scan(&unsure); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SET DateStyle = 'SQL, DMY'; SET TimeZone = 'America/New_York'`); err != nil {
		t.Fatal(err)
	}
	utc := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }
	far := now.Add(25 * time.Hour)
	for _, c := range []struct {
		name, sql    string
		args         []any
		code         string
		want, detail string
	}{
		{"expired lease at delivery start", `SELECT boardreadyops_outbox_start_delivery($1, 'w-1', $2)`,
			[]any{effect, now.Add(2 * time.Minute)}, "BR001",
			"outbox record " + strconv.FormatInt(effect, 10) + ": lease of worker w-1 expired at " + utc(now.Add(time.Minute)), ""},
		{"job defer too far", `SELECT boardreadyops_job_defer(1, 'w-1', $1, 'later', $2)`,
			[]any{far, now}, "22023", "defer time must be set and at most 1 hour ahead, got " + utc(far), ""},
		{"effect defer too far", `SELECT boardreadyops_outbox_defer($1, 'w-1', $2, 'later', $3)`,
			[]any{effect, far, now}, "22023", "defer time must be set and at most 2 hours ahead, got " + utc(far), ""},
		{"rate-limit block too long", `SELECT boardreadyops_outbox_block_installation(1, $1, '1 second', '1 minute', $2)`,
			[]any{far, now}, "22023", "a rate-limit block ends within a day, got " + utc(far), ""},
		{"replay of a dispatch that may have been delivered", `SELECT boardreadyops_outbox_replay($1, 'ops@example.com', 'retry it', $2)`,
			[]any{unsure, now}, "BR004", "outbox record " + strconv.FormatInt(unsure, 10) + " requires reconciliation and cannot be replayed",
			"GitHub may already have created a workflow run for this dispatch (delivery started at " + utc(now) + ")"},
	} {
		_, err := conn.Exec(ctx, c.sql, c.args...)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			t.Errorf("%s: %v, want error %s", c.name, err, c.code)
			continue
		}
		if pgErr.Code != c.code || pgErr.Message != c.want || pgErr.Detail != c.detail {
			t.Errorf("%s: %s %q (detail %q), want %s %q (detail %q)", c.name, pgErr.Code, pgErr.Message, pgErr.Detail, c.code, c.want, c.detail)
		}
	}
}
