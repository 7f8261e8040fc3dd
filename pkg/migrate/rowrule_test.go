package migrate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// outboxRow creates one valid outbox row: a release run's check-run creation.
func outboxRow(t *testing.T, ctx context.Context, pool interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}) {
	t.Helper()
	for _, s := range []string{
		`INSERT INTO installations (id, account_login, account_type) VALUES (1, 'acme', 'Organization')`,
		`INSERT INTO repositories (id, installation_id, full_name) VALUES (1, 1, 'acme/app')`,
		`SELECT boardreadyops_release_run_create(1, 1, 'refs/tags/v1', '0123456789abcdef0123456789abcdef01234567', 'release.yml', 'Release')`,
	} {
		if _, err := pool.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
}

// The row rules hold whatever the writer's search path: an operator planted ahead of pg_catalog
// that makes every text comparison true (here, by a superuser; in a database upgraded from
// PostgreSQL 14, anyone who may create in some schema) does not let a broken row through,
// because the row-rule functions run on a pinned search path (migration 00016).
func TestOutboxRowRulesIgnoreTheSearchPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	outboxRow(t, ctx, pool)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, s := range []string{
		`CREATE SCHEMA planted`,
		`CREATE FUNCTION planted.always(text, text) RETURNS boolean LANGUAGE sql IMMUTABLE RETURN true`,
		`CREATE OPERATOR planted.= (LEFTARG = text, RIGHTARG = text, FUNCTION = planted.always)`,
		`SET LOCAL search_path = planted, pg_catalog, public`,
	} {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	var planted bool
	if err := tx.QueryRow(ctx, `SELECT 'a'::text = 'b'::text`).Scan(&planted); err != nil || !planted {
		t.Fatalf("the planted operator does not shadow pg_catalog's (%v, %v): the test proves nothing", planted, err)
	}
	_, err = tx.Exec(ctx, `UPDATE public.control_plane_outbox SET status = 'paused'`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23514" || pgErr.ConstraintName != "control_plane_outbox_status_check" {
		t.Fatalf("a broken status under a planted search path: %v, want control_plane_outbox_status_check", err)
	}
}
