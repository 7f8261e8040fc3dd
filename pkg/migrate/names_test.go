package migrate_test

import (
	"context"
	"database/sql"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for goose
	"github.com/pressly/goose/v3"

	"github.com/boardreadyops/cloud/pkg/migrate"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
	"github.com/boardreadyops/cloud/schema"
)

// renames is migration 00014's map, old name to new name.
var renames = [][2]string{
	{"boardreadyops_accept_webhook", "boardreadyops_webhook_accept"},
	{"boardreadyops_accept_webhooks", "boardreadyops_webhook_accept_batch"},
	{"boardreadyops_check_webhook_inbox", "boardreadyops_webhook_validate_row"},
	{"boardreadyops_check_control_plane_jobs", "boardreadyops_job_validate_row"},
	{"boardreadyops_check_control_plane_outbox", "boardreadyops_outbox_validate_row"},
	{"boardreadyops_check_release_runs", "boardreadyops_release_run_validate_row"},
	{"boardreadyops_check_execution_attempts", "boardreadyops_execution_attempt_validate_row"},
	{"boardreadyops_check_violation", "boardreadyops_row_rule_violation"},
	{"boardreadyops_claim_control_plane_jobs", "boardreadyops_job_claim"},
	{"boardreadyops_complete_control_plane_job", "boardreadyops_job_complete"},
	{"boardreadyops_complete_control_plane_jobs", "boardreadyops_job_complete_batch"},
	{"boardreadyops_control_plane_job_stats", "boardreadyops_job_stats"},
	{"boardreadyops_dead_letter_control_plane_job", "boardreadyops_job_dead_letter"},
	{"boardreadyops_defer_control_plane_job", "boardreadyops_job_defer"},
	{"boardreadyops_recover_control_plane_job_leases", "boardreadyops_job_recover_leases"},
	{"boardreadyops_release_control_plane_job", "boardreadyops_job_release"},
	{"boardreadyops_replay_control_plane_job", "boardreadyops_job_replay"},
	{"boardreadyops_retry_control_plane_job", "boardreadyops_job_retry"},
	{"boardreadyops_claim_control_plane_outbox", "boardreadyops_outbox_claim"},
	{"boardreadyops_start_control_plane_outbox_delivery", "boardreadyops_outbox_start_delivery"},
	{"boardreadyops_start_control_plane_outbox_delivery_batch", "boardreadyops_outbox_start_delivery_batch"},
	{"boardreadyops_complete_check_run_create", "boardreadyops_outbox_complete_check_run_create"},
	{"boardreadyops_complete_check_run_complete", "boardreadyops_outbox_complete_check_run_complete"},
	{"boardreadyops_complete_check_run_complete_batch", "boardreadyops_outbox_complete_check_run_complete_batch"},
	{"boardreadyops_complete_workflow_dispatch", "boardreadyops_outbox_complete_workflow_dispatch"},
	{"boardreadyops_control_plane_outbox_stats", "boardreadyops_outbox_stats"},
	{"boardreadyops_dead_letter_control_plane_outbox", "boardreadyops_outbox_dead_letter"},
	{"boardreadyops_dead_letter_installation_outbox", "boardreadyops_outbox_dead_letter_installation"},
	{"boardreadyops_defer_control_plane_outbox", "boardreadyops_outbox_defer"},
	{"boardreadyops_enqueue_control_plane_outbox", "boardreadyops_outbox_enqueue"},
	{"boardreadyops_recover_control_plane_outbox_leases", "boardreadyops_outbox_recover_leases"},
	{"boardreadyops_release_control_plane_outbox", "boardreadyops_outbox_release"},
	{"boardreadyops_replay_control_plane_outbox", "boardreadyops_outbox_replay"},
	{"boardreadyops_retry_control_plane_outbox", "boardreadyops_outbox_retry"},
	{"boardreadyops_require_control_plane_outbox_reconciliation", "boardreadyops_outbox_require_reconciliation"},
	{"boardreadyops_resolve_workflow_dispatch_reconciliation", "boardreadyops_outbox_resolve_reconciliation"},
	{"boardreadyops_create_release_run", "boardreadyops_release_run_create"},
	{"boardreadyops_start_next_execution_attempt", "boardreadyops_execution_attempt_start_next"},
	{"boardreadyops_sweep_control_plane_retention", "boardreadyops_retention_sweep"},
}

// oldNames rewrites SQL written with the new names to the deprecated ones.
func oldNames() *strings.Replacer {
	pairs := make([]string, 0, 2*len(renames))
	for _, r := range renames {
		pairs = append(pairs, r[1]+"(", r[0]+"(")
	}
	return strings.NewReplacer(pairs...)
}

// TestFunctionNames checks that every function follows boardreadyops_<entity>_<verb>, that
// each old name of 00014 is a SECURITY INVOKER wrapper with the renamed function's signature,
// result, volatility and EXECUTE grants, that no body calls an old name, and that the row-rule
// CHECK constraints followed the rename (they store the function's OID).
func TestFunctionNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)

	type fn struct {
		invoker, lang, args, result, volatility, parallel, acl, body, comment string
	}
	fns := map[string]fn{}
	rows, err := pool.Query(ctx, `
		SELECT p.proname, NOT p.prosecdef, l.lanname, pg_get_function_arguments(p.oid),
		       pg_get_function_result(p.oid), p.provolatile::text, p.proparallel::text,
		       (SELECT coalesce(string_agg(a::text, ',' ORDER BY a::text), '') FROM unnest(p.proacl) a),
		       p.prosrc, coalesce(obj_description(p.oid, 'pg_proc'), '')
		FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
		WHERE p.pronamespace = 'public'::regnamespace`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var invoker bool
		var f fn
		if err := rows.Scan(&name, &invoker, &f.lang, &f.args, &f.result, &f.volatility, &f.parallel, &f.acl, &f.body, &f.comment); err != nil {
			t.Fatal(err)
		}
		if invoker {
			f.invoker = "invoker"
		}
		fns[name] = f
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	deprecated := map[string]bool{}
	for _, r := range renames {
		old, renamed := r[0], r[1]
		deprecated[old] = true
		t.Run(old, func(t *testing.T) {
			o, ok := fns[old]
			if !ok {
				t.Fatalf("deprecated name %s is gone", old)
			}
			n, ok := fns[renamed]
			if !ok {
				t.Fatalf("%s is missing", renamed)
			}
			if o.invoker != "invoker" || o.lang != "sql" {
				t.Errorf("%s: security %q language %s, want a SECURITY INVOKER SQL wrapper", old, o.invoker, o.lang)
			}
			if o.args != n.args || o.result != n.result || o.volatility != n.volatility || o.parallel != n.parallel {
				t.Errorf("%s differs from %s:\n old (%s) %s %s %s\n new (%s) %s %s %s", old, renamed,
					o.args, o.result, o.volatility, o.parallel, n.args, n.result, n.volatility, n.parallel)
			}
			if o.acl != n.acl {
				t.Errorf("%s grants %s, %s grants %s", old, o.acl, renamed, n.acl)
			}
			// The outbox specification names the replay function: that wrapper is permanent.
			label := "Deprecated name of "
			if old == "boardreadyops_replay_control_plane_outbox" {
				label = "Permanent name of "
			}
			if !strings.Contains(o.body, "public."+renamed+"(") || !strings.HasPrefix(o.comment, label+renamed) {
				t.Errorf("%s: body %q comment %q, want a call of %s and a comment starting %q", old, o.body, o.comment, renamed, label)
			}
		})
	}

	pattern := regexp.MustCompile(`^boardreadyops_(webhook|job|outbox|release_run|execution_attempt|retention|row_rule|schema|audit|clock)_[a-z_]+$`)
	var oldCall *regexp.Regexp
	{
		alts := make([]string, 0, len(renames))
		for _, r := range renames {
			alts = append(alts, regexp.QuoteMeta(r[0]))
		}
		oldCall = regexp.MustCompile(`\b(` + strings.Join(alts, "|") + `)\b`)
	}
	for name, f := range fns {
		if deprecated[name] {
			continue
		}
		if !pattern.MatchString(name) {
			t.Errorf("function %s does not follow boardreadyops_<entity>_<verb>", name)
		}
		if m := oldCall.FindString(f.body); m != "" {
			t.Errorf("%s still calls the deprecated %s", name, m)
		}
	}

	var checks string
	if err := pool.QueryRow(ctx, `SELECT string_agg(pg_get_constraintdef(oid), ' ' ORDER BY conname)
		FROM pg_constraint WHERE contype = 'c' AND conname LIKE '%\_row\_check'`).Scan(&checks); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"boardreadyops_webhook_validate_row(", "boardreadyops_job_validate_row(",
		"boardreadyops_outbox_validate_row(", "boardreadyops_release_run_validate_row(", "boardreadyops_execution_attempt_validate_row("} {
		if !strings.Contains(checks, want) {
			t.Errorf("row checks %q do not call %s", checks, want)
		}
	}
}

// TestDeprecatedNamesWork calls the old and the new name of the same functions on the same rows:
// a pod of the previous release sees what a new one does.
func TestDeprecatedNamesWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	accept := func(name string) (inboxID int64, duplicate bool) {
		t.Helper()
		var jobID *int64
		if err := pool.QueryRow(ctx, `SELECT inbox_id, job_id, duplicate FROM `+name+
			`('d-1', 'ping', NULL, NULL, NULL, '{}', sha256('x'::bytea), NULL)`).Scan(&inboxID, &jobID, &duplicate); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return inboxID, duplicate
	}
	first, dup := accept("boardreadyops_accept_webhook")
	if dup {
		t.Fatal("first accept through the old name reported a duplicate")
	}
	again, dup := accept("boardreadyops_webhook_accept")
	if !dup || again != first {
		t.Fatalf("new name: inbox %d duplicate %v, want inbox %d duplicate", again, dup, first)
	}
	stats := func(name string) (available, leased int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT available, leased FROM `+name+`()`).Scan(&available, &leased); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return available, leased
	}
	if a, _ := stats("boardreadyops_control_plane_job_stats"); a != 1 {
		t.Fatalf("old stats name: %d available, want 1", a)
	}
	var claimed int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM boardreadyops_claim_control_plane_jobs('w', 10, '1 minute')`).Scan(&claimed); err != nil || claimed != 1 {
		t.Fatalf("old claim name: claimed %d, err %v", claimed, err)
	}
	if a, l := stats("boardreadyops_job_stats"); a != 0 || l != 1 {
		t.Fatalf("after the claim: %d available %d leased, want 0 and 1", a, l)
	}
	// A row rule still fails through the renamed functions, under its original constraint name.
	_, err := pool.Exec(ctx, `UPDATE control_plane_jobs SET attempts = -1`)
	if !isCheckViolation(err, "control_plane_jobs_attempts_check") {
		t.Fatalf("broken rule: %v", err)
	}
}

// TestNewestDownRestoresPrevious rolls the newest migration back and expects the catalog
// (relations, functions, bodies, privileges) of a database migrated only up to the one before.
func TestNewestDownRestoresPrevious(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	versions, err := schema.Versions()
	if err != nil {
		t.Fatal(err)
	}
	previous := versions[len(versions)-2]

	wantURL := pgtest.NewEmptyURL(t)
	db, err := sql.Open("pgx", wantURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, schema.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, previous); err != nil {
		t.Fatal(err)
	}
	want := catalogSnapshot(t, wantURL)

	gotURL := pgtest.NewEmptyURL(t)
	r, err := migrate.Open(gotURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Down(ctx); err != nil {
		t.Fatal(err)
	}
	if got := catalogSnapshot(t, gotURL); got != want {
		t.Fatalf("down of %d left another catalog than up to %d:\n got  %s\n want %s", versions[len(versions)-1], previous, got, want)
	}
	// And up again applies cleanly.
	if _, err := r.Up(ctx); err != nil {
		t.Fatal(err)
	}
}

func isCheckViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23514" && pgErr.ConstraintName == constraint
}
