package charttest

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// helmMaxReleaseName is the longest release name Helm accepts.
const helmMaxReleaseName = 53

// schemaMaxLength returns maxLength of a top-level property of values.schema.json.
func schemaMaxLength(t testing.TB, key string) int {
	t.Helper()
	var schema struct {
		Properties map[string]struct {
			MaxLength *int `json:"maxLength"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(readFile(t, filepath.Join(chartDir, "values.schema.json")), &schema); err != nil {
		t.Fatal(err)
	}
	p, ok := schema.Properties[key]
	if !ok || p.MaxLength == nil {
		t.Fatalf("values.schema.json: %s has no maxLength", key)
	}
	return *p.MaxLength
}

// labelValues collects every label value of an object: maps under "labels" and "matchLabels" at
// any depth (metadata, pod templates, selectors), by their path.
func labelValues(path string, v any, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			p := path + "." + k
			if m, ok := x.(map[string]any); ok && (k == "labels" || k == "matchLabels") {
				for lk, lv := range m {
					if s, ok := lv.(string); ok {
						out[p+"."+lk] = s
					}
				}
				continue
			}
			labelValues(p, x, out)
		}
	case []any:
		for i, x := range v {
			labelValues(fmt.Sprintf("%s[%d]", path, i), x, out)
		}
	}
}

// TestNamesFitTheirLimits: with the longest release name Helm accepts and the longest
// fullnameOverride the schema accepts, every object of the production values (every optional
// object on) is named within 63 characters — a Service's name is a DNS-1035 label, and the
// longest, <fullname>-outbox-dispatcher-metrics, was 66 for a fullname of 40, failing the install
// half-way —, a CronJob within 52 (its Jobs' names append 11), and every label value is within
// 63. A fullnameOverride one longer than the schema allows is refused.
func TestNamesFitTheirLimits(t *testing.T) {
	t.Parallel()
	maxFullname := schemaMaxLength(t, "fullnameOverride")
	tests := []struct {
		name, release string
		patch         map[string]any
	}{
		{"longest release name", strings.Repeat("r", helmMaxReleaseName), nil},
		{"longest release name holding the chart name", "boardreadyops-" + strings.Repeat("r", helmMaxReleaseName-len("boardreadyops-")), nil},
		{"longest release name and a long nameOverride", strings.Repeat("r", helmMaxReleaseName), map[string]any{"nameOverride": strings.Repeat("n", 70)}},
		{"longest fullnameOverride", releaseName, map[string]any{"fullnameOverride": strings.Repeat("f", maxFullname)}},
		{"longest fullnameOverride with a dash where it is cut", releaseName, map[string]any{"fullnameOverride": strings.Repeat("f", maxFullname-1) + "-"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			vals := merge(readValues(t, filepath.Join(chartDir, "ci", "production-values.yaml")), deepCopy(tt.patch))
			out, err := renderRelease(t, nil, tt.release, vals, "boardreadyops")
			if err != nil {
				t.Fatal(err)
			}
			objs := objectsOf(t, out)
			if len(objs) < 30 {
				t.Fatalf("%d objects rendered, want the production set", len(objs))
			}
			for _, o := range objs {
				limit := 63
				if o.u.GetKind() == "CronJob" {
					limit = 52
				}
				if n := len(o.u.GetName()); n > limit {
					t.Errorf("%s: name of %d characters, want at most %d", o, n, limit)
				}
				labels := map[string]string{}
				if o.u.GetKind() == "CustomResourceDefinition" {
					// Its schema describes matchLabels fields; only its own labels count.
					labelValues(".metadata", o.u.Object["metadata"], labels)
				} else {
					labelValues("", o.u.Object, labels)
				}
				for path, v := range labels {
					if len(v) > 63 {
						t.Errorf("%s: label %s of %d characters, want at most 63", o, path, len(v))
					}
				}
			}
		})
	}
	t.Run("fullnameOverride beyond the schema", func(t *testing.T) {
		t.Parallel()
		vals := merge(readValues(t, filepath.Join(chartDir, "ci", "minimal-values.yaml")),
			map[string]any{"fullnameOverride": strings.Repeat("f", maxFullname+1)})
		if _, err := render(t, vals, "boardreadyops"); err == nil || !strings.Contains(err.Error(), "fullnameOverride") {
			t.Fatalf("render = %v, want a schema error naming fullnameOverride", err)
		}
	})
}
