package migrate_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/migrate"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
	"github.com/boardreadyops/cloud/schema"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestUpIsCompleteAndIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewEmptyURL(t)
	r, err := migrate.Open(dbURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	first, err := r.Up(ctx)
	if err != nil {
		t.Fatal(err)
	}
	versions, err := schema.Versions()
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != len(versions) {
		t.Fatalf("first up applied %d migrations, want %d", len(first), len(versions))
	}
	before := catalogSnapshot(t, dbURL)

	second, err := r.Up(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != 0 {
		t.Fatalf("second up applied %v, want nothing", second)
	}
	if after := catalogSnapshot(t, dbURL); after != before {
		t.Fatalf("second up changed the catalog:\nbefore %s\nafter  %s", before, after)
	}
	v, err := r.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v != schema.ExpectedVersion() {
		t.Fatalf("version %d, want %d", v, schema.ExpectedVersion())
	}
	status, err := r.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range status {
		if !s.Applied {
			t.Errorf("migration %d %s not applied", s.Version, s.Name)
		}
	}

	// Everything DESIGN §3 names exists.
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, table := range []string{
		"installations", "repositories", "repository_release_settings", "webhook_inbox", "control_plane_jobs",
		"release_runs", "execution_attempts", "control_plane_outbox", "control_plane_audit",
	} {
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&ok); err != nil || !ok {
			t.Errorf("table %s missing (%v)", table, err)
		}
	}
}

func TestDownAndUpAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewEmptyURL(t)
	r, err := migrate.Open(dbURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Up(ctx); err != nil {
		t.Fatal(err)
	}
	versions, _ := schema.Versions()
	for range versions {
		if _, err := r.Down(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := r.Version(ctx); err != nil || v != 0 {
		t.Fatalf("after full down: version %d, err %v", v, err)
	}
	if _, err := r.Up(ctx); err != nil {
		t.Fatalf("up after down: %v", err)
	}
}

// catalogSnapshot summarises the user-visible schema: relations, functions (their bodies, owners,
// security and settings: search path, plan settings) and privileges.
func catalogSnapshot(t *testing.T, dbURL string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var s string
	err = conn.QueryRow(ctx, `
		SELECT coalesce(string_agg(x, ',' ORDER BY x), '') FROM (
			SELECT c.relname || ':' || c.relkind::text || ':' || c.relowner::regrole::text || ':' || coalesce(c.relacl::text, '')
			       || ':' || coalesce(c.reloptions::text, '') AS x
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'
			UNION ALL
			SELECT p.oid::regprocedure::text || ':' || p.proowner::regrole::text || ':' || coalesce(p.proacl::text, '') || ':'
			       || p.prosecdef::text || ':' || p.provolatile::text || ':' || coalesce(p.proconfig::text, '') || ':' || md5(p.prosrc)
			FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'
		) s`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
