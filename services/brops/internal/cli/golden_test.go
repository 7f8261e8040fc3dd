package cli_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// Output formats are part of brops' interface: table for people, JSON for scripts.
func TestGoldenOutput(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	o.dispatch("dead_letter")
	o.dispatch("reconciliation_required")
	tests := []struct {
		golden string
		args   []string
	}{
		{"stats.table.golden", []string{"stats"}},
		{"stats.json.golden", []string{"stats", "-o", "json"}},
		{"replay-dry-run.table.golden", []string{"outbox", "replay", "--all-dead-letters", "--dry-run", "--reason", "x"}},
	}
	for _, tt := range tests {
		code, out, errOut := run(t, o.env, tt.args...)
		if code != 0 {
			t.Fatalf("%v: %d %s", tt.args, code, errOut)
		}
		path := filepath.Join("testdata", tt.golden)
		if *update {
			if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test -update creates it)", err)
		}
		if out != string(want) {
			t.Errorf("%v output differs from %s:\n%s", tt.args, path, out)
		}
	}
}
