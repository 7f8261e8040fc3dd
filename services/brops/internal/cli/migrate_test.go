package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
	"github.com/boardreadyops/cloud/schema"
	"github.com/boardreadyops/cloud/services/brops/internal/cli"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func run(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Execute(context.Background(), args, func(k string) string { return env[k] }, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": pgtest.NewEmptyURL(t)}
	versions, _ := schema.Versions()

	code, out, errOut := run(t, env, "migrate", "up", "--output", "json")
	if code != 0 {
		t.Fatalf("up: %d %s", code, errOut)
	}
	var applied []map[string]any
	if err := json.Unmarshal([]byte(out), &applied); err != nil || len(applied) != len(versions) {
		t.Fatalf("up applied %s (%v), want %d migrations", out, err, len(versions))
	}

	code, out, _ = run(t, env, "migrate", "up")
	if code != 0 || !strings.Contains(out, "no pending migrations") {
		t.Fatalf("second up: %d %q", code, out)
	}

	code, out, _ = run(t, env, "migrate", "status")
	if code != 0 || strings.Count(out, "true") != len(versions) || !strings.HasPrefix(out, "VERSION") {
		t.Fatalf("status: %d\n%s", code, out)
	}

	code, _, errOut = run(t, env, "migrate", "down")
	if code != 2 || !strings.Contains(errOut, "--yes") {
		t.Fatalf("down without --yes: %d %q", code, errOut)
	}
	code, out, errOut = run(t, env, "migrate", "down", "--yes")
	if code != 0 || !strings.Contains(out, "down") {
		t.Fatalf("down --yes: %d %q %q", code, out, errOut)
	}
	code, out, _ = run(t, env, "migrate", "status", "-o", "json")
	var st []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st[len(st)-1]["applied"] != false {
		t.Fatalf("status after down: %d %s", code, out)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"migrate", "up"}, nil, "no database"},
		{[]string{"migrate", "status", "--output", "yaml"}, map[string]string{"DATABASE_URL": "postgres://x"}, "want table or json"},
		{[]string{"migrate", "up", "--bogus"}, nil, "unknown flag"},
	}
	for _, tt := range tests {
		code, _, errOut := run(t, tt.env, tt.args...)
		if code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
}

// migrate plan lists the pending migrations with their SQL and locks and warns, with sizes, about
// a lock that validates a large table; --dry-run applies nothing; up --to stops at the version.
func TestMigratePlanAndUpTo(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyURL(t)
	env := map[string]string{"DATABASE_URL": url}
	if code, _, errOut := run(t, env, "migrate", "up", "--to", "8"); code != 0 {
		t.Fatalf("up --to 8: %d %s", code, errOut)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO webhook_inbox (delivery_id, event, payload, payload_sha256)
		SELECT 'd-' || g, 'ping', '{}', sha256(g::text::bytea) FROM generate_series(1, 120000) g; ANALYZE webhook_inbox`); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, env, "migrate", "plan", "--to", "9", "-o", "json")
	var plan []struct {
		Version int64
		SQL     string
		Locks   []struct {
			Table, Mode string
			Scans       bool
		}
		Warnings []string
	}
	if code != 0 || json.Unmarshal([]byte(out), &plan) != nil || len(plan) != 1 || plan[0].Version != 9 || !strings.Contains(plan[0].SQL, "webhook_inbox_row_check") {
		t.Fatalf("plan --to 9: %d %s %s", code, out, errOut)
	}
	scans := false
	for _, l := range plan[0].Locks {
		scans = scans || (l.Table == "webhook_inbox" && l.Mode == "ACCESS EXCLUSIVE" && l.Scans)
	}
	if !scans || len(plan[0].Warnings) == 0 || !strings.Contains(plan[0].Warnings[0], "webhook_inbox (about 120000 rows") {
		t.Fatalf("plan of 00009: locks %+v, warnings %q", plan[0].Locks, plan[0].Warnings)
	}
	if code, out, _ := run(t, env, "migrate", "up", "--dry-run"); code != 0 || !strings.Contains(out, "== 9 00009_row_check_functions.sql") {
		t.Fatalf("dry run: %d\n%s", code, out)
	}
	var v int64
	if err := conn.QueryRow(ctx, "SELECT max(version_id) FROM goose_db_version").Scan(&v); err != nil || v != 8 {
		t.Fatalf("after the dry run at version %d (%v), want 8", v, err)
	}
	code, _, errOut = run(t, env, "migrate", "up", "--to", "9")
	if code != 0 || !strings.Contains(errOut, "warning: 00009_row_check_functions.sql: ACCESS EXCLUSIVE on webhook_inbox") {
		t.Fatalf("up --to 9: %d, stderr %q", code, errOut)
	}
	if err := conn.QueryRow(ctx, "SELECT max(version_id) FROM goose_db_version").Scan(&v); err != nil || v != 9 {
		t.Fatalf("after up --to 9 at version %d (%v)", v, err)
	}
}
