package migrate_test

import (
	"context"
	"slices"
	"testing"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// The queue tables carry the autovacuum settings of migration 00025: vacuumed after a fixed
// number of dead rows whatever their size (docs/reliability.md, "Bloat control").
func TestQueueTablesAutovacuumSettings(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	queue := []string{"autovacuum_vacuum_scale_factor=0", "autovacuum_vacuum_threshold=2000",
		"autovacuum_analyze_scale_factor=0", "autovacuum_analyze_threshold=10000", "autovacuum_vacuum_cost_delay=0"}
	inbox := []string{"autovacuum_vacuum_scale_factor=0", "autovacuum_vacuum_threshold=10000",
		"autovacuum_vacuum_insert_scale_factor=0", "autovacuum_vacuum_insert_threshold=50000",
		"autovacuum_analyze_scale_factor=0", "autovacuum_analyze_threshold=50000"}
	tests := []struct {
		table string
		want  []string
	}{
		{"control_plane_jobs", queue},
		{"control_plane_outbox", queue},
		{"webhook_inbox", inbox},
		{"webhook_body_digests", inbox},
	}
	for _, tt := range tests {
		t.Run(tt.table, func(t *testing.T) {
			t.Parallel()
			var got []string
			if err := pool.QueryRow(context.Background(), `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = $1::regclass`,
				"public."+tt.table).Scan(&got); err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(got, want) {
				t.Fatalf("reloptions %v, want %v", got, want)
			}
		})
	}
}
