package migrate_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/migrate"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// bootstrapSQL returns the statements of the first sql block under "### Bootstrap" in
// docs/operations.md.
func bootstrapSQL(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	stmts, err := pgtest.DocSQL(doc, "### Bootstrap")
	if err != nil {
		t.Fatalf("docs/operations.md: %v", err)
	}
	return stmts
}

// TestDocumentedBootstrap runs docs/operations.md's bootstrap as written (with its logins and
// database renamed for this test), migrates as its migration user, and shows what that user is
// left with: it cannot grant itself pg_execute_server_program or any role attribute, directly or
// through the owner role, and the services work as their logins.
func TestDocumentedBootstrap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewDocDatabase(t, bootstrapSQL(t))
	suffix := db.Suffix
	urlFor := func(user string) string { return db.URL(t, user) }

	r, err := migrate.Open(urlFor("br_migrate"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Up(ctx); err != nil {
		t.Fatalf("migrate as the documented migration user: %v", err)
	}

	migrator, err := pgx.Connect(ctx, urlFor("br_migrate"))
	if err != nil {
		t.Fatal(err)
	}
	defer migrator.Close(ctx)
	var createRole, createDB, super bool
	if err := migrator.QueryRow(ctx, `SELECT rolcreaterole, rolcreatedb, rolsuper FROM pg_roles WHERE rolname = current_user`).
		Scan(&createRole, &createDB, &super); err != nil {
		t.Fatal(err)
	}
	if createRole || createDB || super {
		t.Errorf("migration user: createrole %v, createdb %v, superuser %v; want none", createRole, createDB, super)
	}
	me := pgx.Identifier{"br_migrate_" + suffix}.Sanitize()
	for _, stmt := range []string{
		"GRANT pg_execute_server_program TO " + me,
		"GRANT pg_read_server_files TO " + me,
		"GRANT boardreadyops_admin TO " + me,
		"ALTER ROLE " + me + " CREATEROLE",
		"CREATE ROLE brboot_evil_" + suffix + " SUPERUSER",
		"COPY (SELECT 1) TO PROGRAM 'true'",
		"SET ROLE boardreadyops_schema_owner; GRANT pg_execute_server_program TO boardreadyops_schema_owner",
	} {
		tx, err := migrator.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(ctx, stmt)
		_ = tx.Rollback(ctx)
		if !isDenied(err) {
			t.Errorf("migration user: %s: err %v, want permission denied", stmt, err)
		}
	}

	// The services work as their documented logins.
	for _, c := range []struct{ login, stmt string }{
		{"br_ingest", `SELECT * FROM boardreadyops_accept_webhook('d-1', 'ping', NULL, NULL, NULL, '{}', sha256('x'::bytea), NULL)`},
		{"br_dispatcher", `SELECT * FROM boardreadyops_claim_control_plane_outbox('w', 1, '1 minute')`},
		{"br_lifecycle", `SELECT * FROM boardreadyops_claim_control_plane_jobs('w', 1, '1 minute')`},
		{"br_redeliver", `SELECT delivery_id FROM webhook_inbox`},
		{"br_operator", `SELECT * FROM boardreadyops_control_plane_outbox_stats()`},
		{"br_admin", `SELECT * FROM boardreadyops_sweep_control_plane_retention('7 days')`},
	} {
		conn, err := pgx.Connect(ctx, urlFor(c.login))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, c.stmt); err != nil {
			t.Errorf("%s: %s: %v", c.login, c.stmt, err)
		}
		conn.Close(ctx)
	}
}
