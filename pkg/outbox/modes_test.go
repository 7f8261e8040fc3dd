package outbox_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// Enqueue works in the query modes that never describe a statement (exec, simple_protocol: the
// modes for a transaction-pooling PgBouncer before 1.21), where a []byte payload would be typed
// bytea and refused by jsonb (SQLSTATE 22P02).
func TestEnqueueInUndescribedQueryModes(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx, b := setup(t)
			pool, err := pgxpool.New(ctx, pgtest.NewURL(t)+"&default_query_exec_mode="+mode)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			b.pool = pool
			r := createRun(t, ctx, b)
			id, ok, err := b.store.Enqueue(context.Background(), pool, outbox.NewEffect{EffectType: outbox.EffectCheckRunCreate,
				ReleaseRunID: r.ID, InstallationID: r.InstallationID, Payload: map[string]any{"head_sha": "abc"}})
			if err != nil || !ok || id == 0 {
				t.Fatalf("enqueue: %d %v %v", id, ok, err)
			}
			var sha string
			if err := pool.QueryRow(ctx, `SELECT payload->>'head_sha' FROM control_plane_outbox WHERE id = $1`, id).Scan(&sha); err != nil || sha != "abc" {
				t.Fatalf("stored payload: %q %v", sha, err)
			}
		})
	}
}
