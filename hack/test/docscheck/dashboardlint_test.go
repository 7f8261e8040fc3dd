package docscheck_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The conventions of the chart's dashboards (issue #23), after the monitoring mixins' and
// Grafana's dashboard-linter's, which is not available as a Go module here. hack/dashboards
// generates dashboards that keep them.

// emptyWhenHealthy ends the description of a panel whose metrics have no series while all is
// well; hack/dashboards.EmptyWhenHealthy is the same sentence.
const emptyWhenHealthy = "Empty when healthy: shows 0."

// orZero is how such a panel's every query ends.
const orZero = " or on() vector(0)"

type dashboardFile struct {
	name string
	UID  string `json:"uid"`
	// Editable is a pointer so that a dashboard without the field fails (Grafana's default is true).
	Editable   *bool `json:"editable"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			IncludeAll bool   `json:"includeAll"`
			AllValue   string `json:"allValue"`
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Links []struct {
		URL         string `json:"url"`
		IncludeVars bool   `json:"includeVars"`
		KeepTime    bool   `json:"keepTime"`
	} `json:"links"`
	Panels []dashboardPanel `json:"panels"`
}

type dashboardPanel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Collapsed   bool   `json:"collapsed"`
	Datasource  *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"`
}

// loadDashboards reads every dashboard of the chart.
func loadDashboards(t *testing.T) []dashboardFile {
	t.Helper()
	files, _ := filepath.Glob("../../../charts/boardreadyops/dashboards/*.json")
	if len(files) == 0 {
		t.Fatal("no dashboards")
	}
	var out []dashboardFile
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d := dashboardFile{name: filepath.Base(f)}
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
		out = append(out, d)
	}
	return out
}

// all is every panel, with those nested in collapsed rows.
func (d dashboardFile) all() []dashboardPanel {
	var out []dashboardPanel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

var (
	rangeSelector = regexp.MustCompile(`\[([^\]]*)\]`)
	rateCall      = regexp.MustCompile(`\b(rate|irate|increase)\(`)
	// selector is a metric name (of ours or the Go and process collectors) and its matchers.
	selector   = regexp.MustCompile(`\b((?:boardreadyops|go|process)_[a-z0-9_]+)(\{[^}]*\})?`)
	namespaceM = `namespace="$namespace"`
	jobM       = `job=~"$job"`
)

// lintQuery returns what is wrong with one panel query.
func lintQuery(expr string, marked bool) []string {
	var bad []string
	if rateCall.MatchString(expr) {
		for _, r := range rangeSelector.FindAllStringSubmatch(expr, -1) {
			if r[1] != "$__rate_interval" {
				bad = append(bad, "range ["+r[1]+"] instead of [$__rate_interval]")
			}
		}
	}
	for _, s := range selector.FindAllStringSubmatch(expr, -1) {
		if !strings.Contains(s[2], namespaceM) || !strings.Contains(s[2], jobM) {
			bad = append(bad, s[1]+" without "+namespaceM+" and "+jobM)
		}
	}
	if marked && !strings.HasSuffix(expr, orZero) {
		bad = append(bad, "marked empty when healthy but does not end in"+orZero)
	}
	if !marked && strings.Contains(expr, "vector(0)") {
		bad = append(bad, "returns 0 when empty but the description does not say "+emptyWhenHealthy)
	}
	return bad
}

func TestLintQuery(t *testing.T) {
	t.Parallel()
	sel := `{namespace="$namespace", job=~"$job"}`
	for _, tt := range []struct {
		expr   string
		marked bool
		bad    int
	}{
		{`sum(rate(boardreadyops_x_total` + sel + `[$__rate_interval]))`, false, 0},
		{`sum(rate(boardreadyops_x_total` + sel + `[5m]))`, false, 1},
		{`sum(increase(boardreadyops_x_total` + sel + `[1h]))`, false, 1},
		{`sum(irate(go_x_total` + sel + `[$__interval]))`, false, 1},
		{`max(boardreadyops_x)`, false, 1},
		{`max(process_resident_memory_bytes{job=~"$job"})`, false, 1},
		{`max(boardreadyops_x` + sel + `)`, true, 1},
		{`max(boardreadyops_x` + sel + `)` + orZero, true, 0},
		{`max(boardreadyops_x` + sel + `)` + orZero, false, 1},
	} {
		if got := lintQuery(tt.expr, tt.marked); len(got) != tt.bad {
			t.Errorf("lintQuery(%q, %v) = %q, want %d findings", tt.expr, tt.marked, got, tt.bad)
		}
	}
}

func TestDashboardConventions(t *testing.T) {
	t.Parallel()
	dashboards := loadDashboards(t)
	uids := map[string]bool{}
	for _, d := range dashboards {
		uids[d.UID] = true
	}
	for _, d := range dashboards {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			if d.UID+".json" != d.name {
				t.Errorf("uid %q does not match the file name", d.UID)
			}
			if d.Editable == nil || *d.Editable {
				t.Error("the dashboard is editable; set editable: false")
			}
			lintVariables(t, d)
			lintLinks(t, d, uids)
			panels := 0
			for _, p := range d.all() {
				if p.Type == "row" {
					if !p.Collapsed && len(p.Panels) > 0 {
						t.Errorf("row %q is expanded but holds panels: Grafana shows them only in a collapsed row", p.Title)
					}
					continue
				}
				panels++
				if strings.TrimSpace(p.Description) == "" {
					t.Errorf("panel %q has no description", p.Title)
				}
				if p.FieldConfig.Defaults.Unit == "" {
					t.Errorf("panel %q has no unit", p.Title)
				}
				if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
					t.Errorf("panel %q does not use the datasource variable", p.Title)
				}
				if len(p.Targets) == 0 {
					t.Errorf("panel %q has no query", p.Title)
				}
				marked := strings.HasSuffix(p.Description, emptyWhenHealthy)
				for _, q := range p.Targets {
					for _, bad := range lintQuery(q.Expr, marked) {
						t.Errorf("panel %q: %s: %s", p.Title, bad, q.Expr)
					}
				}
			}
			if panels == 0 {
				t.Error("no panels")
			}
		})
	}
}

func lintVariables(t *testing.T, d dashboardFile) {
	t.Helper()
	vars := map[string]int{}
	for i, v := range d.Templating.List {
		vars[v.Name] = i
	}
	for _, name := range []string{"datasource", "namespace", "job"} {
		if _, ok := vars[name]; !ok {
			t.Errorf("no %s variable", name)
		}
	}
	if i, ok := vars["datasource"]; ok {
		if v := d.Templating.List[i]; v.Type != "datasource" || v.Query != "prometheus" {
			t.Errorf("the datasource variable is not a Prometheus data source variable: %+v", v)
		}
	}
	for _, name := range []string{"namespace", "job"} {
		i, ok := vars[name]
		if !ok {
			continue
		}
		v := d.Templating.List[i]
		q, _ := v.Query.(string)
		if v.Type != "query" || !strings.HasPrefix(q, "label_values(") || v.Datasource == nil || v.Datasource.UID != "${datasource}" {
			t.Errorf("the %s variable is not a label_values query on the datasource variable: %+v", name, v)
		}
		if name == "job" && !strings.Contains(q, namespaceM) {
			t.Errorf("the job variable does not list the jobs of the chosen namespace: %s", q)
		}
		// A custom All value such as .+ would match every job of the namespace, not those listed.
		if name == "job" && (!v.IncludeAll || v.AllValue != "") {
			t.Errorf("the job variable lacks All, or All is not the listed jobs (allValue %q)", v.AllValue)
		}
	}
}

// lintLinks: every link goes to a dashboard of the chart and keeps the variables and time; the
// overview links to every other dashboard.
func lintLinks(t *testing.T, d dashboardFile, uids map[string]bool) {
	t.Helper()
	linked := map[string]bool{}
	for _, l := range d.Links {
		uid, ok := strings.CutPrefix(l.URL, "/d/")
		if !ok || !uids[uid] {
			t.Errorf("link %s goes to no dashboard of the chart", l.URL)
		}
		if !l.IncludeVars || !l.KeepTime {
			t.Errorf("link %s drops the variables or the time range", l.URL)
		}
		linked[uid] = true
	}
	if d.UID != "boardreadyops-overview" {
		if !linked["boardreadyops-overview"] {
			t.Error("no link back to the overview")
		}
		return
	}
	for uid := range uids {
		if uid != d.UID && !linked[uid] {
			t.Errorf("the overview does not link to %s", uid)
		}
	}
}
