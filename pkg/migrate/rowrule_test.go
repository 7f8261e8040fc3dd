package migrate_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
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

// The row rules hold whatever the writer's search path: an equality operator planted ahead of
// pg_catalog's that also holds for any text 'forged' (here, by a superuser; in a database
// upgraded from PostgreSQL 14, anyone who may create in some schema) does not let a forged
// idempotency key through. The row-rule functions ran on a pinned search path (migration 00016);
// since 00053 they evaluate the rules themselves only when the search path is the pinned one and
// otherwise hand them to their pinned twin — without that test the forged key passes. "warm"
// first writes a row under the pinned path on the same connection, so that the rules' expressions
// are planned and cached there before the planted path comes.
func TestOutboxRowRulesIgnoreTheSearchPath(t *testing.T) {
	t.Parallel()
	for _, warm := range []bool{false, true} {
		t.Run(map[bool]string{false: "cold", true: "warm"}[warm], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := pgtest.NewPool(t)
			outboxRow(t, ctx, pool)
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			steps := []string{
				`CREATE SCHEMA planted`,
				`CREATE FUNCTION planted.eq(a text, b text) RETURNS boolean LANGUAGE sql IMMUTABLE
					RETURN a OPERATOR(pg_catalog.=) b OR a OPERATOR(pg_catalog.=) 'forged'`,
				`CREATE OPERATOR planted.= (LEFTARG = text, RIGHTARG = text, FUNCTION = planted.eq)`,
				`SET LOCAL search_path = planted, pg_catalog, public`,
			}
			if warm {
				steps = append([]string{`SET LOCAL search_path = pg_catalog, pg_temp`,
					`UPDATE public.control_plane_outbox SET updated_at = updated_at`}, steps...)
			}
			for _, s := range steps {
				if _, err := tx.Exec(ctx, s); err != nil {
					t.Fatal(err)
				}
			}
			var forged, other bool
			if err := tx.QueryRow(ctx, `SELECT 'forged'::text = 'b'::text, 'a'::text = 'b'::text`).Scan(&forged, &other); err != nil || !forged || other {
				t.Fatalf("the planted operator does not shadow pg_catalog's (%v, %v, %v): the test proves nothing", forged, other, err)
			}
			_, err = tx.Exec(ctx, `UPDATE public.control_plane_outbox SET idempotency_key = 'forged'`)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "23514" || pgErr.ConstraintName != "control_plane_outbox_idempotency_key_check" {
				t.Fatalf("a forged key under a planted search path: %v, want control_plane_outbox_idempotency_key_check", err)
			}
		})
	}
}

// rowRuleFunctions are the hot tables' row-rule functions (00009, 00053).
var rowRuleFunctions = []string{"boardreadyops_webhook_validate_row", "boardreadyops_job_validate_row",
	"boardreadyops_release_run_validate_row", "boardreadyops_execution_attempt_validate_row", "boardreadyops_outbox_validate_row"}

// allRules finds a row-rule function's expression of all its rules.
var allRules = regexp.MustCompile(`(?s)\n\s*IF (.*?) THEN\s+RETURN true;`)

// TestRowRulesWithoutSetClause (00053): each hot table's row-rule function has no SET clause,
// evaluates its rules only behind the qualified test of the pinned search path, with the very
// expression of its pinned twin, and hands everything else to that twin; on the pinned path (every
// state-machine function's) the twin is not called for a valid row, on another it is.
func TestRowRulesWithoutSetClause(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	const guard = `IF pg_catalog.current_setting('search_path') OPERATOR(pg_catalog.=) 'pg_catalog, pg_temp' THEN`
	space := regexp.MustCompile(`\s+`)
	for _, name := range rowRuleFunctions {
		var config, source, pinnedConfig, pinnedSource string
		if err := pool.QueryRow(ctx, `SELECT coalesce(array_to_string(f.proconfig, ';'), ''), f.prosrc,
				coalesce(array_to_string(p.proconfig, ';'), ''), p.prosrc
			FROM pg_proc f, pg_proc p WHERE f.proname = $1 AND p.proname = $1 || '_pinned'`, name).
			Scan(&config, &source, &pinnedConfig, &pinnedSource); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if config != "" || pinnedConfig != "search_path=pg_catalog, pg_temp" {
			t.Errorf("%s: config %q, its twin's %q; want none and the pinned search path", name, config, pinnedConfig)
		}
		body := strings.TrimSpace(source)
		rest, begins := strings.CutPrefix(body, "BEGIN\n")
		if !begins || !strings.Contains(rest, guard) || strings.Index(rest, "IF") != strings.Index(rest, guard) ||
			!strings.Contains(rest, "RETURN public."+name+"_pinned(") {
			t.Errorf("%s: its first statement is not the pinned-path test, or it does not fall back to its twin:\n%s", name, source)
		}
		if strings.Count(body, "RETURN true") != 1 {
			t.Errorf("%s: %d RETURN true; want the one behind the pinned-path test", name, strings.Count(body, "RETURN true"))
		}
		fast, pinned := allRules.FindStringSubmatch(strings.Replace(source, guard, "", 1)), allRules.FindStringSubmatch(pinnedSource)
		if fast == nil || pinned == nil || space.ReplaceAllString(fast[1], " ") != space.ReplaceAllString(pinned[1], " ") {
			t.Errorf("%s: its rules differ from its pinned twin's:\n%v\n%v", name, fast, pinned)
		}
	}

	// Which of the two a valid outbox row version calls, by search path.
	outboxRow(t, ctx, pool)
	calls := func(path string) (unpinned, pinned int64) {
		t.Helper()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		count := func() (unpinned, pinned int64) {
			t.Helper()
			// pg_stat_xact_user_functions holds what this backend has not reported yet, earlier
			// transactions' calls included: count the difference.
			if err := tx.QueryRow(ctx, `SELECT coalesce(sum(calls) FILTER (WHERE funcname = 'boardreadyops_outbox_validate_row'), 0),
				coalesce(sum(calls) FILTER (WHERE funcname = 'boardreadyops_outbox_validate_row_pinned'), 0)
				FROM pg_catalog.pg_stat_xact_user_functions`).Scan(&unpinned, &pinned); err != nil {
				t.Fatal(err)
			}
			return unpinned, pinned
		}
		for _, s := range []string{`SET LOCAL track_functions = 'pl'`, `SET LOCAL search_path = ` + path} {
			if _, err := tx.Exec(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		u0, p0 := count()
		if _, err := tx.Exec(ctx, `UPDATE public.control_plane_outbox SET updated_at = updated_at`); err != nil {
			t.Fatal(err)
		}
		u1, p1 := count()
		unpinned, pinned = u1-u0, p1-p0
		return unpinned, pinned
	}
	for _, c := range []struct {
		path                 string
		unpinned, wantPinned int64
	}{
		{"pg_catalog, pg_temp", 1, 0},
		{"public, pg_catalog", 1, 1},
		{"pg_temp, pg_catalog", 1, 1},
	} {
		if u, p := calls(c.path); u != c.unpinned || p != c.wantPinned {
			t.Errorf("search_path %s: the row rules called %d times, their pinned twin %d; want %d and %d", c.path, u, p, c.unpinned, c.wantPinned)
		}
	}
}

// TestWorkflowFileRuleUnderEverySetting (00054) is the attack on the release-run row rule's
// workflow-file pattern: a PL/pgSQL body is parsed under the session's
// standard_conforming_strings, and with it off a backslash in a literal is an escape, so a pattern
// written '\.ya?ml$' tested '.ya?ml$' — any character — and let a path through. The rule must
// refuse such names on a fresh connection (the body compiled there) under every setting, on the
// pinned search path and on another.
func TestWorkflowFileRuleUnderEverySetting(t *testing.T) {
	t.Parallel()
	for _, conforming := range []string{"on", "off"} {
		for _, path := range []string{"pg_catalog, pg_temp", "public"} {
			t.Run("standard_conforming_strings="+conforming+"/"+path, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				pool := pgtest.NewPool(t)
				outboxRow(t, ctx, pool)
				conn, err := pgx.Connect(ctx, pool.Config().ConnConfig.ConnString())
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = conn.Close(ctx) }()
				for _, s := range []string{
					`SET escape_string_warning = off`,
					`SET standard_conforming_strings = ` + conforming,
					`SET search_path = ` + path,
				} {
					if _, err := conn.Exec(ctx, s); err != nil {
						t.Fatal(err)
					}
				}
				for _, name := range []string{"../yml", "release/yml", "release_yaml", "release yml"} {
					_, err := conn.Exec(ctx, `UPDATE public.release_runs SET workflow_file = $1`, name)
					var pgErr *pgconn.PgError
					if !errors.As(err, &pgErr) || pgErr.Code != "23514" || pgErr.ConstraintName != "release_runs_workflow_file_check" {
						t.Errorf("workflow file %q: %v, want release_runs_workflow_file_check", name, err)
					}
				}
				if _, err := conn.Exec(ctx, `UPDATE public.release_runs SET workflow_file = 'release.yaml'`); err != nil {
					t.Errorf("a valid workflow file: %v", err)
				}
			})
		}
	}
}

// TestNoBackslashInFunctionBodies: the meaning of a backslash in a string literal of a function
// body depends on the calling session's standard_conforming_strings (00054); no function of ours
// may have one, so that a new migration cannot bring the weakness back unnoticed. Write '[.]'
// for a literal dot in a pattern, chr(92) for a backslash.
func TestNoBackslashInFunctionBodies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	rows, err := pool.Query(ctx, `SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p
		WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'boardreadyops%'
		  AND strpos(p.prosrc, chr(92)) > 0 ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var count int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_proc WHERE pronamespace = 'public'::regnamespace
		AND proname LIKE 'boardreadyops%'`).Scan(&count); err != nil || count < 100 {
		t.Fatalf("%d functions found (%v): the test proves nothing", count, err)
	}
	if len(names) > 0 {
		t.Fatalf("function bodies with a backslash: %v", names)
	}
}
