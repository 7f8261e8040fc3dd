package migrate_test

import (
	"context"
	"testing"
	"time"
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
