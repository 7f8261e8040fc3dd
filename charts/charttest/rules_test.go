package charttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// ruleGroups reads rules/boardreadyops.rules.yml.
func ruleGroups(t *testing.T) []ruleGroup {
	t.Helper()
	var f struct {
		Groups []ruleGroup `json:"groups"`
	}
	if err := yaml.Unmarshal(readFile(t, filepath.Join(chartDir, "rules", "boardreadyops.rules.yml")), &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Groups) == 0 {
		t.Fatal("no rule groups")
	}
	return f.Groups
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []struct {
		Alert       string            `json:"alert"`
		Record      string            `json:"record"`
		Expr        string            `json:"expr"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"rules"`
}

// The monitoring mixins' conventions, which promtool's lint does not check: every alert and
// recording rule aggregates by (namespace, job), so two installations in one Prometheus stay
// apart; alert names fit in 40 characters; descriptions say where ({{ $labels.namespace }}) and
// how much ({{ $value }}); every alert has a severity and a runbook. An absent() alert has no
// series to aggregate, nor a namespace to name, and is the one exception to both.
func TestRulesFollowMixinConventions(t *testing.T) {
	t.Parallel()
	// Every aggregation operator in an expression must keep namespace and job.
	aggregation := regexp.MustCompile(`\b(sum|max|min|avg|count|topk|bottomk|quantile|stddev|stdvar|group)\s*(by\s*\(([^)]*)\)|without\s*\([^)]*\))?\s*\(`)
	for _, g := range ruleGroups(t) {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			t.Run(g.Name+"/"+name, func(t *testing.T) {
				absent := strings.HasPrefix(strings.TrimSpace(r.Expr), "absent(")
				aggs := aggregation.FindAllStringSubmatch(r.Expr, -1)
				if len(aggs) == 0 && !absent && !strings.Contains(r.Expr, "namespace_job:") {
					t.Errorf("expression does not aggregate by (namespace, job): %s", r.Expr)
				}
				for _, a := range aggs {
					labels := strings.ReplaceAll(a[3], " ", "")
					if !strings.Contains(","+labels+",", ",namespace,") || !strings.Contains(","+labels+",", ",job,") {
						t.Errorf("%s aggregates by (%s), not by (namespace, job): %s", a[1], a[3], r.Expr)
					}
				}
				if r.Record != "" {
					if !strings.HasPrefix(r.Record, "namespace_job:") {
						t.Errorf("recording rule %s: the name's level is namespace_job: (level:metric:operations)", r.Record)
					}
					return
				}
				if len(r.Alert) > 40 {
					t.Errorf("alert name has %d characters, more than 40", len(r.Alert))
				}
				desc := r.Annotations["description"]
				for _, want := range []string{"{{ $labels.namespace }}", "{{ $value"} {
					if absent && want == "{{ $labels.namespace }}" {
						continue // no series, no namespace
					}
					if !strings.Contains(desc, want) {
						t.Errorf("description lacks %s: %q", want, desc)
					}
				}
				if r.Annotations["summary"] == "" || !strings.Contains(r.Annotations["runbook_url"], "docs/operations.md#") {
					t.Errorf("summary %q, runbook_url %q: both required", r.Annotations["summary"], r.Annotations["runbook_url"])
				}
				if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
					t.Errorf("severity %q, want critical, warning or info", s)
				}
			})
		}
	}
}

// The PrometheusRule's BoardReadyOpsDispatcherAbsent, run by promtool: it fires for its own
// namespace's dispatchers gone, with that namespace named, even while another installation's
// dispatchers in the same Prometheus are up; and not while its own are.
func TestScopedDispatcherAbsentFiresPerNamespace(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: apt-get install prometheus (Debian) provides it; make test-rules needs it too")
	}
	objs := renderObjects(t, filepath.Join(chartDir, "ci", "production-values.yaml"), "payments")
	groups, _, err := unstructured.NestedSlice(find(t, objs, "PrometheusRule", "brops-boardreadyops").u.Object, "spec", "groups")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	const job = "brops-boardreadyops-outbox-dispatcher-metrics"
	tests := `rule_files: [rules.yml]
evaluation_interval: 1m
tests:
- interval: 1m
  input_series:
  - series: up{namespace="payments",job="` + job + `",instance="d1"}
    values: 1 1 1 0x20
  - series: up{namespace="other",job="` + job + `",instance="d9"}
    values: 1x23
  alert_rule_test:
  - eval_time: 5m
    alertname: BoardReadyOpsDispatcherAbsent
    exp_alerts: []
  - eval_time: 12m
    alertname: BoardReadyOpsDispatcherAbsent
    exp_alerts:
    - exp_labels: {severity: critical, namespace: payments}
      exp_annotations:
        summary: No outbox dispatcher is running
        description: 'No outbox dispatcher target in namespace payments has been up for 5 minutes (absent = 1), or none exists (scaled to 0, its ServiceMonitor removed): GitHub effects of this installation are not being delivered.'
        runbook_url: https://github.com/boardreadyops/cloud/blob/main/docs/operations.md#runbook-dispatcher-down
`
	dir := t.TempDir()
	for name, body := range map[string][]byte{"rules.yml": rules, "test.yml": []byte(tests)} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(promtool, "test", "rules", "test.yml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}
