package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// stream is govulncheck -format json output: a called stdlib finding, a module finding reached
// only at package level, and a called module finding.
const stream = `{"config":{"protocol_version":"v1.0.0"}}
{"osv":{"id":"GO-2026-0001"}}
{"finding":{"osv":"GO-2026-0001","fixed_version":"v1.27.2","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http","function":"Serve"}]}}
{"finding":{"osv":"GO-2026-0002","trace":[{"module":"example.com/m","version":"v1.0.0","package":"example.com/m/p"}]}}
{"finding":{"osv":"GO-2026-0003","trace":[{"module":"example.com/n","version":"v1.2.0","package":"example.com/n","function":"Parse"}]}}
`

func TestRun(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		accepted string
		wantErr  bool
		want     []string
	}{
		{"nothing accepted fails on both called", "", true, []string{"vulnerable: GO-2026-0001", "vulnerable: GO-2026-0003"}},
		{"one accepted, one not", "GO-2026-0001 2027-01-15 stdlib, fixed in go1.27.2\n", true, []string{"accepted until 2027-01-15: GO-2026-0001", "vulnerable: GO-2026-0003"}},
		{"both accepted", "# comment\nGO-2026-0001 2027-01-15 stdlib\nGO-2026-0003 2026-12-03 no fix yet, call guarded\n", false, []string{"accepted until 2026-12-03: GO-2026-0003"}},
		{"expired acceptance fails", "GO-2026-0001 2026-12-02 stdlib\nGO-2026-0003 2027-01-01 x\n", true, []string{"was accepted until 2026-12-02"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := ""
			if tt.accepted != "" {
				path = filepath.Join(t.TempDir(), "accepted.txt")
				if err := os.WriteFile(path, []byte(tt.accepted), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			err := run(strings.NewReader(stream), &out, path, now)
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, errFindings)) {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if strings.Contains(out.String(), "GO-2026-0002") {
				t.Errorf("a package-level finding was reported:\n%s", out.String())
			}
		})
	}
}

func TestAcceptedFileIsStrict(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"GO-2026-0001\n", "GO-2026-0001 2027-01-15\n", "GO-2026-0001 15.01.2027 reason\n"} {
		path := filepath.Join(t.TempDir(), "accepted.txt")
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := run(strings.NewReader(""), &bytes.Buffer{}, path, time.Now()); err == nil || errors.Is(err, errFindings) {
			t.Errorf("%q: err = %v, want a format error", bad, err)
		}
	}
}
