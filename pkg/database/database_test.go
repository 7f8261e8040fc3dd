package database_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/database"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Readiness is honest about a primary that stopped taking writes (a default_transaction_read_only
// switchover): not ready while it lasts, ready again after.
func TestCheckReadyRefusesAReadOnlyDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	if err := database.CheckReady(ctx, pool); err != nil {
		t.Fatalf("writable database: %v", err)
	}
	var name string
	if err := pool.QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	// The switch is itself a write, so each session lifts the default for itself first.
	set := func(v string) {
		t.Helper()
		err := pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
			if _, err := c.Exec(ctx, "SET default_transaction_read_only = off"); err != nil {
				return err
			}
			_, err := c.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" SET default_transaction_read_only = "+v)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		pool.Reset() // sessions take database settings when they start
	}
	set("on")
	if err := database.CheckReady(ctx, pool); !errors.Is(err, database.ErrReadOnly) {
		t.Fatalf("read-only database: %v, want ErrReadOnly", err)
	}
	set("off")
	if err := database.CheckReady(ctx, pool); err != nil {
		t.Fatalf("writable again: %v", err)
	}
}
