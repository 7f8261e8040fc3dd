package cli_test

import (
	"strings"
	"testing"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// Help and usage errors never show the database URL, whose password an operator's shell passes in
// DATABASE_URL (README: secrets are never logged; a CronJob's output is its pod's log).
func TestUsageHidesTheDatabaseURL(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://u:s3cret@h/db"}
	for _, tt := range []struct {
		args     []string
		wantCode int
	}{
		{[]string{"outbox", "replay", "--help"}, 0},
		{[]string{"--help"}, 0},
		{[]string{"outbox", "replay", "--bogus"}, 2},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			code, out, errOut := run(t, env, tt.args...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d: %s %s", code, tt.wantCode, out, errOut)
			}
			if tt.wantCode == 0 && !strings.Contains(out, "--database-url") {
				t.Fatalf("no help printed:\n%s", out)
			}
			if strings.Contains(out+errOut, "s3cret") {
				t.Errorf("output shows the database password:\n%s%s", out, errOut)
			}
		})
	}
}

// DATABASE_URL is read all the same, and --database-url wins over it, even when empty.
func TestDatabaseURLFromEnvOrFlag(t *testing.T) {
	t.Parallel()
	url := pgtest.NewURL(t)
	unreachable := "postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=5"
	for _, tt := range []struct {
		name     string
		env      map[string]string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"env", map[string]string{"DATABASE_URL": url}, nil, 0, ""},
		{"flag over env", map[string]string{"DATABASE_URL": unreachable}, []string{"--database-url", url}, 0, ""},
		{"empty flag over env", map[string]string{"DATABASE_URL": url}, []string{"--database-url", ""}, 2, "no database"},
		{"neither", nil, nil, 2, "no database"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := run(t, tt.env, append([]string{"migrate", "status"}, tt.args...)...)
			if code != tt.wantCode || !strings.Contains(errOut, tt.wantErr) {
				t.Fatalf("exit %d (%s %s), want %d and %q", code, out, errOut, tt.wantCode, tt.wantErr)
			}
		})
	}
}
