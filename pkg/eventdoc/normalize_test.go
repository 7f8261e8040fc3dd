package eventdoc_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
)

var update = flag.Bool("update", false, "rewrite testdata/normalized from the current output")

// Every fixture in testdata/payloads (written from GitHub's documented payload shapes, one per
// handled event and action) normalizes to its golden document in testdata/normalized.
func TestNormalizeFixtures(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/payloads/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			event, _, _ := strings.Cut(name, ".")
			payload, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := eventdoc.Normalize(event, payload)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.MarshalIndent(doc, "", "  ")
			got = append(got, '\n')
			golden := filepath.Join("testdata/normalized", name+".json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("normalized document differs from %s:\n%s", golden, got)
			}
		})
	}
}

func TestNormalizeRejectsMalformed(t *testing.T) {
	t.Parallel()
	inst := `"installation":{"id":1}`
	repo := `"repository":{"id":2,"full_name":"o/r"}`
	tests := []struct {
		name, event, payload string
	}{
		{"not json", "push", `{`},
		{"array", "push", `[]`},
		{"null", "push", `null`},
		{"string", "ping", `"zen"`},
		{"empty", "ping", ``},
		{"unhandled event", "issues", `{}`},
		{"no installation", "push", `{` + repo + `,"ref":"refs/tags/v1","after":"` + strings.Repeat("a", 40) + `"}`},
		{"zero installation", "push", `{"installation":{"id":0},` + repo + `,"ref":"refs/tags/v1","after":"` + strings.Repeat("a", 40) + `"}`},
		{"push without repository", "push", `{` + inst + `,"ref":"refs/tags/v1","after":"` + strings.Repeat("a", 40) + `"}`},
		{"push without ref", "push", `{` + inst + `,` + repo + `,"after":"` + strings.Repeat("a", 40) + `"}`},
		{"push with bad sha", "push", `{` + inst + `,` + repo + `,"ref":"refs/tags/v1","after":"xyz"}`},
		{"check run without id", "check_run", `{` + inst + `,` + repo + `,"check_run":{"name":"x"}}`},
		{"workflow run without id", "workflow_run", `{` + inst + `,` + repo + `}`},
		{"bad action", "push", `{"action":"DROP TABLE",` + inst + `}`},
		{"id as string", "push", `{"installation":{"id":"1"}}`},
		{"id overflow", "push", `{"installation":{"id":99999999999999999999}}`},
		{"installation created without account", "installation", `{"action":"created",` + inst + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := eventdoc.Normalize(tt.event, []byte(tt.payload)); !errors.Is(err, eventdoc.ErrMalformed) {
				t.Fatalf("Normalize = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestNormalizeBounds(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"action":"created","installation":{"id":1,"account":{"login":"` + strings.Repeat("é", 400) + "\\u0000" + `","type":"Organization"}},"repositories":[`)
	for i := 0; i < eventdoc.MaxRepositories+5; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"id":1,"full_name":"o/r"}`)
	}
	b.WriteString(`]}`)
	doc, err := eventdoc.Normalize("installation", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Repositories) != eventdoc.MaxRepositories || !doc.RepositoriesTruncated {
		t.Fatalf("%d repositories, truncated %v", len(doc.Repositories), doc.RepositoriesTruncated)
	}
	login := doc.Installation.AccountLogin
	if len(login) > 255 || strings.ContainsRune(login, 0) || !strings.HasPrefix(login, "éé") {
		t.Fatalf("login not bounded to 255 bytes of whole runes without NUL: %d bytes", len(login))
	}
	out, _ := json.Marshal(doc)
	if len(out) > 1<<20 {
		t.Fatalf("document is %d bytes, over the inbox bound", len(out))
	}
}
