package migrate_test

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/migrate"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
	"github.com/boardreadyops/cloud/schema"
)

// hotTables are written on every delivery: an ACCESS EXCLUSIVE lock on one stops ingest,
// lifecycle or the dispatchers for as long as the migration holds it.
var hotTables = []string{"webhook_inbox", "control_plane_jobs", "control_plane_outbox", "release_runs", "execution_attempts"}

// accessExclusiveAllowed lists the migrations that lock a hot table ACCESS EXCLUSIVE, each with
// why (docs/operations.md, "Upgrades that lock tables"). A new migration does not go here: it
// uses the online forms (ADD CONSTRAINT … NOT VALID then VALIDATE CONSTRAINT in its own
// migration, CREATE INDEX CONCURRENTLY in a -- +goose NO TRANSACTION migration).
var accessExclusiveAllowed = map[string]string{
	"00001 *":                    "creates the tables",
	"00009 *":                    "replaced every CHECK with a validated row rule (before the online-forms rule)",
	"00011 control_plane_outbox": "DROP INDEX (no scan)",
	"00015 *":                    "ALTER TABLE … OWNER TO boardreadyops_schema_owner and the audit triggers: catalog-only, no scan or rewrite, held for milliseconds (issue 17 §3 e, f)",
	"00035 control_plane_outbox": "DROP CONSTRAINT of the idempotency key's UNIQUE index once the composite key replaces it (catalog only, no scan)",
	"00049 control_plane_outbox": "the attempt foreign key swapped for the run-and-attempt key in one ALTER TABLE (catalog only, no scan; 10 s lock timeout)",
	"00049 execution_attempts":   "the same swap: a dropped foreign key's triggers are on the table it references",
}

// TestNoNewAccessExclusiveOnHotTables runs every migration's Up section inside a transaction on a
// database migrated to the version before it, reads the locks it holds from pg_locks, rolls
// back, then applies it. A migration that takes ACCESS EXCLUSIVE on a hot table fails unless it
// is allowed above.
func TestNoNewAccessExclusiveOnHotTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewEmptyURL(t)
	r, err := migrate.Open(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	status, err := r.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range status {
		body, err := fs.ReadFile(schema.Migrations(), s.Name)
		if err != nil {
			t.Fatal(err)
		}
		version := fmt.Sprintf("%05d", s.Version)
		var locked []string
		if strings.Contains(string(body), "-- +goose NO TRANSACTION") {
			for _, l := range migrate.Locks(migrate.UpSQL(string(body))) {
				if l.Mode == "ACCESS EXCLUSIVE" {
					locked = append(locked, l.Table)
				}
			}
		} else {
			locked = heldAccessExclusive(t, conn, migrate.UpSQL(string(body)))
		}
		for _, table := range locked {
			if !contains(hotTables, table) || accessExclusiveAllowed[version+" *"] != "" || accessExclusiveAllowed[version+" "+table] != "" {
				continue
			}
			t.Errorf("migration %s takes ACCESS EXCLUSIVE on the hot table %s: use the online forms (NOT VALID + VALIDATE CONSTRAINT, CREATE INDEX CONCURRENTLY)", s.Name, table)
		}
		if _, err := r.UpTo(ctx, s.Version); err != nil {
			t.Fatal(err)
		}
	}
}

// heldAccessExclusive runs sql in a transaction that is rolled back and returns the tables (an
// index counts as its table) it held ACCESS EXCLUSIVE.
func heldAccessExclusive(t *testing.T, conn *pgx.Conn, sql string) []string {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, sql); err != nil {
		t.Fatalf("run migration in a transaction: %v", err)
	}
	rows, err := tx.Query(ctx, `SELECT DISTINCT coalesce(t.relname, c.relname) FROM pg_locks l
		JOIN pg_class c ON c.oid = l.relation
		LEFT JOIN pg_index i ON i.indexrelid = c.oid LEFT JOIN pg_class t ON t.oid = i.indrelid
		WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation' AND l.mode = 'AccessExclusiveLock'`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(tables)
	return tables
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The static lock reading of brops migrate plan agrees with PostgreSQL on the statement shapes
// the migrations use.
func TestLocksOfStatementShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sql, table, mode string
		scans            bool
	}{
		{"ALTER TABLE webhook_inbox ADD CONSTRAINT c CHECK (id > 0) NOT VALID", "webhook_inbox", "ACCESS EXCLUSIVE", false},
		{"ALTER TABLE webhook_inbox VALIDATE CONSTRAINT c", "webhook_inbox", "SHARE UPDATE EXCLUSIVE", true},
		{"ALTER TABLE control_plane_outbox DROP CONSTRAINT IF EXISTS f", "control_plane_outbox", "ACCESS EXCLUSIVE", false},
		{"ALTER TABLE webhook_inbox DROP CONSTRAINT a, ADD CONSTRAINT c CHECK (id > 0)", "webhook_inbox", "ACCESS EXCLUSIVE", true},
		{"CREATE INDEX CONCURRENTLY i ON control_plane_outbox (id)", "control_plane_outbox", "SHARE UPDATE EXCLUSIVE", true},
		{"CREATE INDEX i ON public.control_plane_outbox (id)", "control_plane_outbox", "SHARE", true},
		{"CREATE TRIGGER t BEFORE INSERT ON public.control_plane_outbox FOR EACH ROW EXECUTE FUNCTION f()", "control_plane_outbox", "SHARE ROW EXCLUSIVE", false},
		{"ALTER TABLE release_runs SET (fillfactor = 80)", "release_runs", "SHARE UPDATE EXCLUSIVE", false},
	}
	for _, tt := range tests {
		locks := migrate.Locks("-- a comment\nCREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1; $$;\n" + tt.sql + ";")
		if len(locks) != 1 || locks[0].Table != tt.table || locks[0].Mode != tt.mode || locks[0].Scans != tt.scans {
			t.Errorf("%s: %+v, want %s %s scans=%v", tt.sql, locks, tt.table, tt.mode, tt.scans)
		}
	}
	// A foreign key locks the table it references too: as the statement does when it is alone,
	// and as its strongest subcommand (dropping a constraint: ACCESS EXCLUSIVE) when not.
	fks := []struct {
		sql, mode string
		scans     bool
	}{
		{"ALTER TABLE public.control_plane_outbox ADD CONSTRAINT f\n FOREIGN KEY (a, b) REFERENCES public.execution_attempts (c, d) NOT VALID",
			"SHARE ROW EXCLUSIVE", false},
		{"ALTER TABLE control_plane_outbox ADD FOREIGN KEY (a) REFERENCES execution_attempts (id)", "SHARE ROW EXCLUSIVE", true},
		{"ALTER TABLE control_plane_outbox DROP CONSTRAINT IF EXISTS g, ADD CONSTRAINT f FOREIGN KEY (a, b) REFERENCES execution_attempts (c, d) NOT VALID",
			"ACCESS EXCLUSIVE", false},
		{"ALTER TABLE control_plane_outbox ADD CONSTRAINT f FOREIGN KEY (a) REFERENCES execution_attempts (id) NOT VALID, ADD CONSTRAINT c CHECK (id > 0)",
			"ACCESS EXCLUSIVE", false},
	}
	for _, tt := range fks {
		locks := migrate.Locks(tt.sql + ";")
		want := []migrate.Lock{{Table: "control_plane_outbox", Mode: tt.mode, Scans: tt.scans}, {Table: "execution_attempts", Mode: tt.mode}}
		if len(locks) != 2 {
			t.Errorf("%s: %+v, want %+v", tt.sql, locks, want)
			continue
		}
		for i := range want {
			if locks[i].Table != want[i].Table || locks[i].Mode != want[i].Mode || locks[i].Scans != want[i].Scans {
				t.Errorf("%s: %+v, want %+v", tt.sql, locks, want)
			}
		}
	}
}
