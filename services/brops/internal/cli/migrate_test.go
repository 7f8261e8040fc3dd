package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

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
