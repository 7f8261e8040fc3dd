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
		{"push of a tag over 512 bytes", "push", `{` + inst + `,` + repo + `,"ref":"refs/tags/v` + strings.Repeat("1", 510) + `","before":"` + strings.Repeat("0", 40) + `","after":"` + strings.Repeat("a", 40) + `"}`},
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

// A signed body resent under another event's name (the signature does not cover the header) is
// refused: every fixture normalizes under its own event and under no other.
func TestNormalizeRefusesAnotherEventsBody(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/payloads/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		own, _, _ := strings.Cut(name, ".")
		payload, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, event := range eventdoc.HandledEvents {
			if event == own {
				continue
			}
			if _, err := eventdoc.Normalize(event, payload); !errors.Is(err, eventdoc.ErrMalformed) {
				t.Errorf("%s body as %s: %v, want ErrMalformed", name, event, err)
			} else if !strings.Contains(err.Error(), "not a "+event+" payload") {
				t.Errorf("%s body as %s: reason %q does not say why", name, event, err)
			}
		}
	}
}

func TestNormalizeRequiresEachEventsFields(t *testing.T) {
	t.Parallel()
	for _, event := range eventdoc.HandledEvents {
		if len(eventdoc.RequiredFields(event)) == 0 {
			t.Errorf("%s has no required fields", event)
		}
	}
	inst := `"installation":{"id":1}`
	account := `"installation":{"id":1,"account":{"login":"o","type":"Organization"}}`
	repo := `"repository":{"id":2,"full_name":"o/r"}`
	sha := strings.Repeat("a", 40)
	tests := []struct{ name, event, payload, want string }{
		{"installation without account", "installation", `{"action":"deleted",` + inst + `}`, "installation.account.login"},
		{"installation without action", "installation", `{` + account + `}`, "action"},
		{"installation_repositories without lists", "installation_repositories", `{"action":"added",` + account + `,"repository_selection":"selected"}`, "repositories_added"},
		{"repository without action", "repository", `{` + inst + `,` + repo + `}`, "action"},
		{"push without before", "push", `{` + inst + `,` + repo + `,"ref":"refs/tags/v1","after":"` + sha + `"}`, "before"},
		{"push with an action", "push", `{"action":"deleted",` + inst + `,` + repo + `,"ref":"refs/tags/v1","before":"` + sha + `","after":"` + sha + `"}`, "no action"},
		{"check_run without head_sha", "check_run", `{"action":"rerequested",` + inst + `,` + repo + `,"check_run":{"id":3}}`, "check_run.head_sha"},
		{"workflow_run without status", "workflow_run", `{"action":"completed",` + inst + `,` + repo + `,"workflow_run":{"id":3}}`, "workflow_run.status"},
		{"ping without zen", "ping", `{"hook_id":1}`, "zen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := eventdoc.Normalize(tt.event, []byte(tt.payload))
			if !errors.Is(err, eventdoc.ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Normalize = %v, want ErrMalformed naming %q", err, tt.want)
			}
		})
	}
}

// repository.full_name reaches URL paths (/repos/{owner}/{repo}/...): only GitHub's owner/name
// character set is accepted, in the delivery's repository and in repository lists.
func TestNormalizeRefusesFullNamesOutsideGitHubsCharacterSet(t *testing.T) {
	t.Parallel()
	sha := strings.Repeat("a", 40)
	for _, name := range []string{"o/../x", "o/..", "o/.", "o/r/x", "o/r?x=1", "o/r#x", "o/r%2F..", "o /r", "-o/r", "o/r\u00e9",
		"o/" + strings.Repeat("r", 101), strings.Repeat("o", 40) + "/r", "o/", "/r", "o/r\n"} {
		quoted, _ := json.Marshal(name)
		push := `{"installation":{"id":1},"repository":{"id":2,"full_name":` + string(quoted) + `},"ref":"refs/tags/v1","before":"` + sha + `","after":"` + sha + `"}`
		if _, err := eventdoc.Normalize("push", []byte(push)); !errors.Is(err, eventdoc.ErrMalformed) || !strings.Contains(err.Error(), "full_name") {
			t.Errorf("push with full_name %q: %v, want refused", name, err)
		}
		list := `{"action":"created","installation":{"id":1,"account":{"login":"o"}},"repositories":[{"id":2,"full_name":` + string(quoted) + `}]}`
		if _, err := eventdoc.Normalize("installation", []byte(list)); !errors.Is(err, eventdoc.ErrMalformed) {
			t.Errorf("installation list with full_name %q: %v, want refused", name, err)
		}
	}
	for _, name := range []string{"octo-org/hello-world", "a/b", "octocat_acme/my.repo_x-1", "O1/.github", strings.Repeat("o", 39) + "/" + strings.Repeat("r", 100)} {
		if !eventdoc.ValidFullName(name) {
			t.Errorf("GitHub name %q refused", name)
		}
	}
}

// A branch ref longer than 512 bytes (git sets no bound) is cut, not refused: refused with 400, the
// push was asked for again by every redelivery. Cut, it is still a branch push, which the filter
// drops. A tag that long is refused (TestNormalizeRejectsMalformed): cut, it would name another.
func TestNormalizeCutsALongBranchRef(t *testing.T) {
	t.Parallel()
	sha := strings.Repeat("a", 40)
	ref := "refs/heads/" + strings.Repeat("b", 600)
	doc, err := eventdoc.Normalize("push", []byte(`{"installation":{"id":1},"repository":{"id":2,"full_name":"o/r"},"ref":"`+ref+
		`","before":"`+sha+`","after":"`+sha+`"}`))
	if err != nil {
		t.Fatalf("Normalize = %v, want the push kept", err)
	}
	if len(doc.Push.Ref) != 512 || !strings.HasPrefix(doc.Push.Ref, "refs/heads/bbb") {
		t.Fatalf("ref %d bytes, want cut to 512", len(doc.Push.Ref))
	}
	if reason, filtered := eventdoc.Filter(&doc); !filtered || reason != eventdoc.FilterBranchPush {
		t.Fatalf("filtered %v (%q), want %s", filtered, reason, eventdoc.FilterBranchPush)
	}
}
