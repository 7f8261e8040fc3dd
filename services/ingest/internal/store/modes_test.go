package store

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// Every pgx query mode stores a delivery, also those that never describe a statement (exec,
// simple_protocol: the modes for a transaction-pooling PgBouncer older than 1.21). Those send a
// parameter's type from its Go type, so a jsonb document passed as []byte would arrive as bytea
// text and fail with SQLSTATE 22P02.
func TestAcceptInEveryQueryMode(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool, err := pgxpool.New(ctx, pgtest.NewURL(t)+"&default_query_exec_mode="+mode)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			s := &Store{DB: pool}
			out, err := s.Accept(ctx, delivery("d-"+mode), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
			if err != nil || out.InboxID == 0 || out.Duplicate {
				t.Fatalf("accept: %+v, %v", out, err)
			}
			var zen string
			if err := pool.QueryRow(ctx, `SELECT payload #>> '{ping,zen}' FROM webhook_inbox WHERE id = $1`, out.InboxID).Scan(&zen); err != nil || zen != "z" {
				t.Fatalf("stored payload: zen %q, %v", zen, err)
			}
		})
	}
}
