package migrate_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// ourFunctions lists every function in schema public that no extension brought, newest
// migration included, with its ACL as text ("" when NULL, i.e. PostgreSQL's default, which lets
// PUBLIC execute it).
const ourFunctions = `
	SELECT p.oid::regprocedure::text, coalesce(p.proacl::text, ''),
	       p.proacl IS NULL OR EXISTS (SELECT 1 FROM aclexplode(p.proacl) a
	                                   WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE'),
	       pg_get_userbyid(p.proowner), p.prosecdef, coalesce(array_to_string(p.proconfig, ';'), ''),
	       p.prorettype = 'trigger'::regtype
	FROM pg_proc p
	WHERE p.pronamespace = 'public'::regnamespace
	  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
	ORDER BY 1`

type function struct {
	signature, acl, owner, config string
	public, definer, trigger      bool
}

func functions(t *testing.T, pool *pgxpool.Pool) []function {
	t.Helper()
	rows, err := pool.Query(context.Background(), ourFunctions)
	if err != nil {
		t.Fatal(err)
	}
	fns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (function, error) {
		var f function
		err := r.Scan(&f.signature, &f.acl, &f.public, &f.owner, &f.definer, &f.config, &f.trigger)
		return f, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(fns) < 40 {
		t.Fatalf("%d functions in schema public; the query misses some", len(fns))
	}
	return fns
}

// TestNoFunctionExecutableByPublic lists every function with its ACL (so one added by any later
// migration is covered) and fails on a PUBLIC grant. Then it runs the attack: a login that holds
// no role at all calls each one, and each call is refused for lack of privilege.
func TestNoFunctionExecutableByPublic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	dbURL := pool.Config().ConnString()
	fns := functions(t, pool)
	for _, f := range fns {
		if f.public {
			t.Errorf("PUBLIC may execute %s (ACL %q)", f.signature, f.acl)
		}
	}

	nobody := pgtest.NewLoginPool(t, dbURL)
	for _, f := range fns {
		if f.trigger {
			continue // a trigger function cannot be called at all
		}
		var call string
		if err := pool.QueryRow(ctx, `
			SELECT format('SELECT %s(%s)', p.oid::regproc,
			              coalesce((SELECT string_agg('NULL::' || format_type(t, NULL), ', ' ORDER BY n)
			                        FROM unnest(p.proargtypes) WITH ORDINALITY AS a(t, n)), ''))
			FROM pg_proc p WHERE p.oid = $1::regprocedure`, f.signature).Scan(&call); err != nil {
			t.Fatal(err)
		}
		if _, err := nobody.Exec(ctx, call); !isDenied(err) {
			t.Errorf("a login without any role ran %s: err %v, want permission denied", call, err)
		}
	}
}

// TestOwnerRole: every table and function belongs to boardreadyops_schema_owner, which can neither
// log in nor create roles; only goose's own table stays the migration user's.
func TestOwnerRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	var login, createRole, super bool
	if err := pool.QueryRow(ctx, `SELECT rolcanlogin, rolcreaterole, rolsuper FROM pg_roles WHERE rolname = 'boardreadyops_schema_owner'`).
		Scan(&login, &createRole, &super); err != nil {
		t.Fatal(err)
	}
	if login || createRole || super {
		t.Errorf("boardreadyops_schema_owner: login %v, createrole %v, superuser %v; want none", login, createRole, super)
	}
	for _, f := range functions(t, pool) {
		if f.owner != "boardreadyops_schema_owner" {
			t.Errorf("function %s is owned by %s", f.signature, f.owner)
		}
	}
	rows, err := pool.Query(ctx, `
		SELECT c.relname || ' (' || c.relkind::text || ')', pg_get_userbyid(c.relowner) FROM pg_class c
		WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
		  AND c.relname NOT IN ('goose_db_version', 'goose_db_version_id_seq')`)
	if err != nil {
		t.Fatal(err)
	}
	owners, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Rel, Owner string }])
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range owners {
		if o.Owner != "boardreadyops_schema_owner" {
			t.Errorf("%s is owned by %s", o.Rel, o.Owner)
		}
	}
}

// TestAuditIsAppendOnly: no role, not the admin and not the owner, can change or remove an audit
// record; recording one still works.
func TestAuditIsAppendOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	super := pgtest.NewPool(t)
	dbURL := super.Config().ConnString()
	if _, err := super.Exec(ctx, `INSERT INTO control_plane_audit (operator, action, subject_type, subject_id, reason, from_status, to_status)
		VALUES ('alice', 'job.replay', 'job', 1, 'why', 'dead_letter', 'available')`); err != nil {
		t.Fatal(err)
	}
	admin := pgtest.NewLoginPool(t, dbURL, "boardreadyops_admin")
	attacks := []string{
		`UPDATE control_plane_audit SET reason = 'nothing happened'`,
		`DELETE FROM control_plane_audit`,
		`TRUNCATE control_plane_audit`,
	}
	for _, stmt := range attacks {
		if _, err := admin.Exec(ctx, stmt); !isDenied(err) {
			t.Errorf("admin login: %s: err %v, want permission denied", stmt, err)
		}
		for _, role := range []string{"boardreadyops_admin", "boardreadyops_schema_owner"} {
			if err := asRole(t, super, role, stmt); !isDenied(err) {
				t.Errorf("as %s: %s: err %v, want permission denied", role, stmt, err)
			}
		}
	}
	var reason string
	var n int
	if err := super.QueryRow(ctx, `SELECT min(reason), count(*) FROM control_plane_audit`).Scan(&reason, &n); err != nil || reason != "why" || n != 1 {
		t.Fatalf("audit after the attacks: %d rows, reason %q, err %v", n, reason, err)
	}
	if _, err := admin.Exec(ctx, `INSERT INTO control_plane_audit (operator, action, subject_type, subject_id, reason, from_status, to_status)
		VALUES ('bob', 'outbox.replay', 'outbox', 2, 'why', 'dead_letter', 'available')`); err != nil {
		t.Errorf("admin cannot append to the audit: %v", err)
	}
}

// TestRedeliverRole: the redelivery job's login reads delivery ids and nothing else.
func TestRedeliverRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewURL(t)
	redeliver := pgtest.NewLoginPool(t, dbURL, "boardreadyops_redeliver")
	// The statements brops webhooks redeliver runs (00065: the digests' delivery ids, the fence's time).
	if _, err := redeliver.Exec(ctx, `SELECT delivery_id FROM webhook_inbox WHERE delivery_id = ANY($1)
		UNION
		SELECT delivery_id FROM webhook_body_digests WHERE received_at >= $2 AND delivery_id = ANY($1)`, []string{"a", "b"}, time.Now()); err != nil {
		t.Fatalf("redeliver cannot read delivery ids: %v", err)
	}
	if _, err := redeliver.Exec(ctx, `SELECT max(fenced_at) FROM restore_fences WHERE closed_at IS NULL`); err != nil {
		t.Fatalf("redeliver cannot read the restore fences' times: %v", err)
	}
	if _, err := redeliver.Exec(ctx, `SELECT boardreadyops_schema_version()`); err != nil {
		t.Fatalf("redeliver cannot read the schema version: %v", err)
	}
	for _, stmt := range []string{
		`SELECT payload FROM webhook_inbox`,
		`SELECT * FROM webhook_inbox`,
		`SELECT count(*) FROM control_plane_outbox`,
		`SELECT count(*) FROM control_plane_jobs`,
		`SELECT count(*) FROM installations`,
		`SELECT count(*) FROM control_plane_audit`,
		`SELECT payload_sha256 FROM webhook_body_digests`,
		`SELECT reason FROM restore_fences`,
		`INSERT INTO webhook_inbox (delivery_id, event, payload, payload_sha256) VALUES ('d', 'ping', '{}', sha256('x'::bytea))`,
		`DELETE FROM webhook_inbox`,
		`SELECT * FROM boardreadyops_control_plane_outbox_stats()`,
	} {
		if _, err := redeliver.Exec(ctx, stmt); !isDenied(err) {
			t.Errorf("redeliver login: %s: err %v, want permission denied", stmt, err)
		}
	}
}

// TestNoRoleMayCreateInPublic: PUBLIC lost CREATE on schema public, so no service login can plant
// an object there (the database was created by PostgreSQL 15, where that is the default; the
// upgrade from 14 is TestPlantedObjectsCannotHijackDefiners').
func TestNoRoleMayCreateInPublic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewURL(t)
	for _, role := range []string{"boardreadyops_ingest", "boardreadyops_lifecycle", "boardreadyops_dispatcher",
		"boardreadyops_operator", "boardreadyops_admin", "boardreadyops_redeliver", ""} {
		var login *pgxpool.Pool
		if role == "" {
			login = pgtest.NewLoginPool(t, dbURL)
		} else {
			login = pgtest.NewLoginPool(t, dbURL, role)
		}
		_, err := login.Exec(ctx, `CREATE FUNCTION public.format(text, text) RETURNS text LANGUAGE sql AS 'SELECT $1'`)
		if !isDenied(err) || !strings.Contains(err.Error(), "schema public") {
			t.Errorf("%q login created a function in public: err %v", role, err)
		}
	}
}

// unqualified finds, in a function body with its literals and comments removed, a table or
// function of ours not written public.<name>.
var unqualified = regexp.MustCompile(`(^|[^\w.])(installations|repositories|repository_release_settings|webhook_inbox|` +
	`control_plane_jobs|release_runs|execution_attempts|control_plane_outbox|control_plane_audit|goose_db_version)\b|(^|[^\w.])(boardreadyops_\w+\s*\()`)

// literalsAndComments matches SQL string literals, quoted identifiers and comments.
var literalsAndComments = regexp.MustCompile(`'(?:[^']|'')*'|"[^"]*"|--[^\n]*|/\*(?s:.*?)\*/`)

// TestPinnedSearchPaths: every function (definer, row rule, helper, deprecated wrapper, and any
// later migration's) runs on search_path = pg_catalog, pg_temp (and may set nothing else but how
// it is planned: per call, or once with plan types disabled and the JIT off), names our objects
// public.<name>
// and takes its time from boardreadyops_clock_now. The clock itself is an exception: inlined,
// hence no SET clause, and every name in it qualified. The hot tables' row rules are the other
// (00053): no SET clause, and their rules evaluated only on the pinned path.
func TestPinnedSearchPaths(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	rows, err := pool.Query(ctx, `
		SELECT p.oid::regprocedure::text, p.proname, coalesce(array_to_string(p.proconfig, ';'), ''), p.prosrc
		FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
		  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')`)
	if err != nil {
		t.Fatal(err)
	}
	fns, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Signature, Name, Config, Source string }])
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fns {
		code := literalsAndComments.ReplaceAllString(f.Source, "''")
		if f.Name == "boardreadyops_clock_now" {
			if f.Config != "" || strings.Contains(code, " now()") {
				t.Errorf("%s: config %q; want no SET clause (inlined) and pg_catalog.now()", f.Signature, f.Config)
			}
			continue
		}
		// The hot tables' row rules (00053): no SET clause; TestRowRulesWithoutSetClause checks
		// that they evaluate their rules only on the pinned path and otherwise call their twin.
		if slices.Contains(rowRuleFunctions, f.Name) {
			if f.Config != "" {
				t.Errorf("%s: config %q; want no SET clause (00053)", f.Signature, f.Config)
			}
			if m := unqualified.FindStringSubmatch(code); m != nil {
				t.Errorf("%s names %q without public.", f.Signature, strings.TrimSpace(m[0]))
			}
			continue
		}
		// Besides the search path, a function may only choose how it is planned: per call (00038),
		// or once, with the plans that depend on the table's size at that moment disabled (00043).
		c, settings, _ := strings.Cut(f.Config, ";")
		if c != "search_path=pg_catalog, pg_temp" {
			t.Errorf("%s: config %q, want search_path=pg_catalog, pg_temp", f.Signature, f.Config)
		}
		disables := false
		for s := range strings.SplitSeq(settings, ";") {
			if s != "" && !slices.Contains(plannerSettings, s) {
				t.Errorf("%s: setting %q, want only the search path and %v", f.Signature, s, plannerSettings)
			}
			disables = disables || strings.HasPrefix(s, "enable_")
		}
		// A disabled plan type is a generic plan's pin (00043); a node that must run anyway then
		// costs 10^10, enough for the JIT to compile the statement at every call (00045).
		if disables && (!strings.Contains(settings, "plan_cache_mode=force_generic_plan") || !strings.Contains(settings, "jit=off")) {
			t.Errorf("%s: %q disables plan types without plan_cache_mode=force_generic_plan and jit=off", f.Signature, settings)
		}
		if m := unqualified.FindStringSubmatch(code); m != nil {
			t.Errorf("%s names %q without public.", f.Signature, strings.TrimSpace(m[0]))
		}
		if strings.Contains(code, "coalesce(p_now") {
			t.Errorf("%s takes the caller's time: use public.boardreadyops_clock_now(p_now)", f.Signature)
		}
	}
}

// plannerSettings are the settings a function may set besides its search path.
var plannerSettings = []string{"plan_cache_mode=force_custom_plan", "plan_cache_mode=force_generic_plan",
	"enable_seqscan=off", "enable_bitmapscan=off", "enable_sort=off", "enable_material=off", "jit=off",
	"max_parallel_workers_per_gather=0"}
