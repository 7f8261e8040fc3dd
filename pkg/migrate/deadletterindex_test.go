package migrate_test

import (
	"context"
	"strings"
	"testing"
)

// deadLetterIndexVersion is migration 00063, which moves the jobs' dead letters to
// control_plane_jobs_dead_letter_idx and drops control_plane_jobs_terminal_idx. It runs outside a
// transaction, so a failure part way leaves some of its steps done and goose runs all of them
// again.
const deadLetterIndexVersion = 63

// TestDeadLetterIndexMigrationRunsAgain: 00063 run again never rebuilds a valid dead-letter index
// (the lifecycle's gauges count dead letters through it) and never drops the terminal index with
// only an INVALID one in its place. Run again after it completed (its version row lost), it keeps
// the index it built. After an interrupted build, it stops before the drop, says what to do, and
// succeeds once that is done.
func TestDeadLetterIndexMigrationRunsAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const index = "control_plane_jobs_dead_letter_idx"

	t.Run("after it completed", func(t *testing.T) {
		t.Parallel()
		r, conn := migratedTo(t, deadLetterIndexVersion)
		before := indexOf(t, conn, index)
		if _, err := conn.Exec(ctx, `DELETE FROM goose_db_version WHERE version_id = $1`, deadLetterIndexVersion); err != nil {
			t.Fatal(err)
		}
		if _, err := r.UpTo(ctx, deadLetterIndexVersion); err != nil {
			t.Fatalf("00063 again: %v", err)
		}
		if after := indexOf(t, conn, index); after != before || !after.valid {
			t.Fatalf("index after the second run %+v, want the first run's %+v (kept, not rebuilt)", after, before)
		}
		if s := indexOf(t, conn, "control_plane_jobs_terminal_idx"); s.exists {
			t.Fatalf("control_plane_jobs_terminal_idx is still there: %+v", s)
		}
	})

	t.Run("after an interrupted index build", func(t *testing.T) {
		t.Parallel()
		r, conn := migratedTo(t, deadLetterIndexVersion-1)
		interruptedBuild(t, conn, "control_plane_jobs", index,
			`CREATE INDEX CONCURRENTLY `+index+` ON public.control_plane_jobs (updated_at) WHERE status = 'dead_letter'`)

		_, err := r.UpTo(ctx, deadLetterIndexVersion)
		if err == nil || !strings.Contains(err.Error(), "INVALID") || !strings.Contains(err.Error(), "DROP INDEX CONCURRENTLY public."+index) {
			t.Fatalf("00063 over an INVALID index: %v; want the INVALID error with its fix", err)
		}
		if s := indexOf(t, conn, "control_plane_jobs_terminal_idx"); !s.exists || !s.valid {
			t.Fatalf("the terminal index was dropped with only an INVALID dead-letter index left: %+v", s)
		}

		if _, err := conn.Exec(ctx, `DROP INDEX CONCURRENTLY public.`+index); err != nil {
			t.Fatal(err)
		}
		if _, err := r.UpTo(ctx, deadLetterIndexVersion); err != nil {
			t.Fatalf("00063 after the fix: %v", err)
		}
		if s := indexOf(t, conn, index); !s.exists || !s.valid {
			t.Fatalf("%s after the fix: %+v, want a valid index", index, s)
		}
		if s := indexOf(t, conn, "control_plane_jobs_terminal_idx"); s.exists {
			t.Fatalf("control_plane_jobs_terminal_idx is still there: %+v", s)
		}
	})
}
