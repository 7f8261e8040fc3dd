package migrate_test

import (
	"context"
	"testing"
)

// TestOutboxStatsReadsBacklogOnce: the outbox gauges read each available effect once. Counting
// the available, due and retrying effects in three subqueries read the backlog three times; in a
// 50,000-run burst each dispatcher's call every 5 s read 23,177 buffers and took 6 % of
// PostgreSQL's time, growing with the backlog (migration 00048). Without it, this test reads
// 3 × 3,000 rows and more.
func TestOutboxStatsReadsBacklogOnce(t *testing.T) {
	t.Parallel()
	const backlog = 3000
	ctx := context.Background()
	_, conn := oneRunRepository(t)
	fillOutbox(t, conn.Conn(), 1, backlog)
	if _, err := conn.Exec(ctx, `ANALYZE control_plane_outbox`); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	before := rowsRead(t, tx, "control_plane_outbox")
	var available, due int
	if err := tx.QueryRow(ctx, `SELECT available, due FROM boardreadyops_outbox_stats()`).Scan(&available, &due); err != nil {
		t.Fatal(err)
	}
	if available != backlog || due != backlog {
		t.Fatalf("stats: %d available, %d due; want %d of each", available, due, backlog)
	}
	if n, most := rowsRead(t, tx, "control_plane_outbox")-before, backlog+100; n > most {
		t.Errorf("the outbox gauges read %d rows of a backlog of %d, want at most %d", n, backlog, most)
	}
}
