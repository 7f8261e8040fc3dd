package charttest

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite the value table in the chart README from values.yaml")

const (
	tableBegin = "<!-- values:begin (generated from values.yaml by `make chart-docs`; do not edit) -->"
	tableEnd   = "<!-- values:end -->"
)

// valueDoc is one documented key of values.yaml.
type valueDoc struct {
	key, def, doc string
}

// documentedValues walks values.yaml and returns every key that carries a `# --` comment, with
// its default. A key without one is an error unless it is a map whose children are documented.
func documentedValues(t testing.TB) []valueDoc {
	t.Helper()
	var root yaml.Node
	if err := yaml.Unmarshal(readFile(t, filepath.Join(chartDir, "values.yaml")), &root); err != nil {
		t.Fatal(err)
	}
	var out []valueDoc
	var walk func(prefix string, n *yaml.Node)
	walk = func(prefix string, n *yaml.Node) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := k.Value
			if prefix != "" {
				key = prefix + "." + k.Value
			}
			doc := docComment(k.HeadComment)
			if doc == "" && v.Kind == yaml.MappingNode && len(v.Content) > 0 {
				walk(key, v)
				continue
			}
			if doc == "" {
				t.Errorf("values.yaml: %s has no `# --` comment", key)
				continue
			}
			out = append(out, valueDoc{key: key, def: inline(v), doc: doc})
		}
	}
	walk("", root.Content[0])
	return out
}

// docComment extracts the text of a `# -- …` comment (continuation lines included).
func docComment(head string) string {
	lines := strings.Split(head, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "# --") {
			start = i
		}
	}
	if start < 0 {
		return ""
	}
	var parts []string
	for i, l := range lines[start:] {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
		if i == 0 {
			l = strings.TrimSpace(strings.TrimPrefix(l, "--"))
		}
		parts = append(parts, l)
	}
	return strings.Join(parts, " ")
}

// inline renders a default value on one line.
func inline(n *yaml.Node) string {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	n = deepFlow(n)
	_ = enc.Encode(n)
	s := strings.TrimSpace(b.String())
	if s == "" || s == `""` {
		return `""`
	}
	return s
}

func deepFlow(n *yaml.Node) *yaml.Node {
	c := *n
	c.HeadComment, c.LineComment, c.FootComment = "", "", ""
	if c.Kind == yaml.MappingNode || c.Kind == yaml.SequenceNode {
		c.Style = yaml.FlowStyle
		c.Content = make([]*yaml.Node, len(n.Content))
		for i, x := range n.Content {
			c.Content[i] = deepFlow(x)
		}
	}
	return &c
}

func valueTable(docs []valueDoc) string {
	var b strings.Builder
	b.WriteString(tableBegin + "\n| key | default | description |\n|---|---|---|\n")
	for _, d := range docs {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", d.key, strings.ReplaceAll(d.def, "|", `\|`), strings.ReplaceAll(d.doc, "|", `\|`))
	}
	b.WriteString(tableEnd)
	return b.String()
}

// TestReadmeListsEveryValue fails when the chart README's value table is not exactly the one
// generated from values.yaml; `make chart-docs` (go test -run TestReadmeListsEveryValue -update)
// rewrites it.
func TestReadmeListsEveryValue(t *testing.T) {
	docs := documentedValues(t)
	if len(docs) < 50 {
		t.Fatalf("only %d documented values found", len(docs))
	}
	path := filepath.Join(chartDir, "README.md")
	readme := string(readFile(t, path))
	i, j := strings.Index(readme, tableBegin), strings.Index(readme, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the value table markers", path)
	}
	want := readme[:i] + valueTable(docs) + readme[j+len(tableEnd):]
	if want == readme {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s's value table is stale: run `make chart-docs`", path)
}

// TestSchemaCoversEveryValue fails when values.yaml has a key the schema does not declare (the
// schema forbids unknown keys, so the chart's own defaults would be rejected) — checked by
// rendering the defaults through the schema with the required Secrets filled in.
func TestSchemaCoversEveryValue(t *testing.T) {
	t.Parallel()
	vals := readValues(t, filepath.Join(chartDir, "values.yaml"))
	vals = merge(vals, readValues(t, filepath.Join(chartDir, "ci", "minimal-values.yaml")))
	if _, err := render(t, vals, "boardreadyops"); err != nil {
		t.Fatalf("values.yaml's own defaults do not pass values.schema.json: %v", err)
	}
}
