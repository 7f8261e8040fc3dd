package migrate_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	adminURL := pgtest.NewEmptyURL(t) // a superuser connection to create the roles and database from
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	suffix := hex.EncodeToString(b[:])
	database := "brboot_" + suffix
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)

	login := regexp.MustCompile(`\bbr_([a-z]+)\b`)
	var logins []string
	for _, stmt := range bootstrapSQL(t) {
		stmt = login.ReplaceAllStringFunc(stmt, func(s string) string {
			name := s + "_" + suffix
			logins = append(logins, name)
			return name
		})
		stmt = strings.ReplaceAll(stmt, "PASSWORD '…'", "PASSWORD 'generated-"+suffix+"'")
		stmt = strings.Replace(stmt, "CREATE DATABASE boardreadyops ", "CREATE DATABASE "+database+" ", 1)
		_, err := admin.Exec(ctx, stmt)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42710" && strings.HasPrefix(stmt, "CREATE ROLE boardreadyops_") {
			continue // a group role of this server's other test databases
		}
		if err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		admin, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+database+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database: %v", err)
		}
		for _, l := range logins {
			if _, err := admin.Exec(ctx, "DROP ROLE IF EXISTS "+l); err != nil {
				t.Errorf("drop %s: %v", l, err)
			}
		}
	})
	urlFor := func(user string) string {
		u, err := url.Parse(adminURL)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(user+"_"+suffix, "generated-"+suffix)
		u.Path = "/" + database
		return u.String()
	}

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
