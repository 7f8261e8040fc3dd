package docscheck_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// exportedMetrics reads the metric names the services declare (Name: "boardreadyops_…", or a
// collector's prometheus.NewDesc("boardreadyops_…")), with the series names a histogram adds.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(?:Name:\s+|prometheus\.NewDesc\(\s*|Metric\s+=\s+)"(boardreadyops_[a-z0-9_]+)"`)
	names := map[string]bool{}
	for _, root := range []string{"../../../services", "../../../pkg"} {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
				for _, suffix := range []string{"", "_bucket", "_count", "_sum"} {
					names[m[1]+suffix] = true
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range runtimeMetrics {
		names[name] = true
	}
	return names
}

// runtimeMetrics are the Go runtime and process collectors' metrics the dashboards show; every
// service registers both collectors (pkg/daemon).
var runtimeMetrics = []string{"go_goroutines", "process_cpu_seconds_total", "process_resident_memory_bytes"}

// substitute replaces the dashboard variables in a query by what Grafana would put there.
var substitute = strings.NewReplacer("$__rate_interval", "1m", "$namespace", "boardreadyops", "$job", "(boardreadyops-ingest|boardreadyops-lifecycle)").Replace

// Every dashboard query parses as PromQL (promtool) and names only metrics a service exports.
func TestDashboardQueries(t *testing.T) {
	t.Parallel()
	exported := exportedMetrics(t)
	var rules strings.Builder
	rules.WriteString("groups:\n- name: dashboard-queries\n  rules:\n")
	n := 0
	for _, d := range loadDashboards(t) {
		for _, p := range d.all() {
			for _, target := range p.Targets {
				n++
				for _, m := range selector.FindAllStringSubmatch(target.Expr, -1) {
					if !exported[m[1]] {
						t.Errorf("%s, panel %q: %s is not exported by any service", d.name, p.Title, m[1])
					}
				}
				exprJSON, _ := json.Marshal(substitute(target.Expr))
				fmt.Fprintf(&rules, "  - record: dashboard:query_%d\n    expr: %s\n", n, exprJSON)
			}
		}
	}
	// promtool parses every expression of a rules file: the queries as recording rules.
	path := filepath.Join(t.TempDir(), "queries.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("promtool", "check", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool (apt-get install prometheus) rejected a dashboard query: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("%d rules found", n)) {
		t.Fatalf("promtool checked fewer queries than the %d on the dashboards:\n%s", n, out)
	}
}
