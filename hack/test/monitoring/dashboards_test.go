//go:build monitoring

package monitoring

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// panel is one dashboard panel (rows nest theirs under panels).
type panel struct {
	Title       string  `json:"title"`
	Description string  `json:"description"`
	Panels      []panel `json:"panels"`
	Targets     []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Multi      bool            `json:"multi"`
	IncludeAll bool            `json:"includeAll"`
	Current    struct {
		Value json.RawMessage `json:"value"`
	} `json:"current"`
	Options []struct {
		Value string `json:"value"`
	} `json:"options"`
}

type dashboard struct {
	file       string
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

func loadDashboards(t *testing.T) []dashboard {
	t.Helper()
	files, _ := filepath.Glob("../../../charts/boardreadyops/dashboards/*.json")
	if len(files) == 0 {
		t.Fatal("no dashboards")
	}
	var out []dashboard
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d := dashboard{file: filepath.Base(f)}
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, d)
	}
	return out
}

// emptyWhenHealthy: a panel whose description says so may show nothing interesting when all is
// well, but its queries must still return a defined number (a 0), never no data.
var emptyWhenHealthy = regexp.MustCompile(`(?i)empty when healthy|0 when healthy|zero when healthy`)

// builtins are Grafana's interval variables, as Grafana would set them for a 1 s scrape
// interval and a few minutes' range.
var builtins = map[string]string{
	"__rate_interval": "20s", "__interval": "2s", "__interval_ms": "2000",
	"__range": "3m", "__range_s": "180", "__range_ms": "180000",
}

// labelValuesQuery matches label_values(label) and label_values(selector, label).
var labelValuesQuery = regexp.MustCompile(`^\s*label_values\(\s*(?:(.*?)\s*,\s*)?([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

// variableValues resolves the dashboard's variables as Grafana would on opening it: a query
// variable by asking Prometheus for its label values (all of them, as a regex alternation, when
// it is multi-valued or has All; else its saved current value when Prometheus has it, else the
// first in order), a datasource variable to the one Prometheus,
// custom and constant ones to their current or first value.
func variableValues(t *testing.T, prom string, d dashboard) map[string]string {
	t.Helper()
	vals := map[string]string{}
	for k, v := range builtins {
		vals[k] = v
	}
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			vals[v.Name] = "prometheus"
		case "query":
			var q string
			if json.Unmarshal(v.Query, &q) != nil {
				var obj struct {
					Query string `json:"query"`
				}
				_ = json.Unmarshal(v.Query, &obj)
				q = obj.Query
			}
			// Earlier variables may appear in the query (namespace before job).
			q = substitute(q, vals)
			m := labelValuesQuery.FindStringSubmatch(q)
			if m == nil {
				t.Fatalf("%s: variable %s: query %q is not label_values(...)", d.file, v.Name, q)
			}
			params := url.Values{}
			if m[1] != "" {
				params.Set("match[]", m[1])
			}
			params.Set("start", strconv.FormatInt(time.Now().Add(-10*time.Minute).Unix(), 10))
			var values []string
			api(t, prom, "/api/v1/label/"+m[2]+"/values", params, &values)
			if len(values) == 0 {
				t.Fatalf("%s: variable %s (%s) has no values in Prometheus", d.file, v.Name, q)
			}
			sort.Strings(values)
			var cur string
			_ = json.Unmarshal(v.Current.Value, &cur)
			switch {
			case v.Multi || v.IncludeAll:
				vals[v.Name] = "(" + strings.Join(values, "|") + ")"
			case slices.Contains(values, cur):
				vals[v.Name] = cur // the dashboard's saved selection
			default:
				vals[v.Name] = values[0]
			}
		default: // custom, constant, interval, textbox
			var cur string
			if json.Unmarshal(v.Current.Value, &cur) == nil && cur != "" {
				vals[v.Name] = cur
			} else if len(v.Options) > 0 {
				vals[v.Name] = v.Options[0].Value
			} else {
				var q string
				_ = json.Unmarshal(v.Query, &q)
				vals[v.Name] = strings.Split(q, ",")[0]
			}
		}
	}
	return vals
}

// substitute replaces ${name}, ${name:format} and $name (longest names first), and [[name]].
func substitute(expr string, vals map[string]string) string {
	names := make([]string, 0, len(vals))
	for n := range vals {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, n := range names {
		expr = regexp.MustCompile(`\$\{`+regexp.QuoteMeta(n)+`(:[a-z]+)?\}`).ReplaceAllLiteralString(expr, vals[n])
		expr = strings.ReplaceAll(expr, "[["+n+"]]", vals[n])
		expr = regexp.MustCompile(`\$`+regexp.QuoteMeta(n)+`\b`).ReplaceAllLiteralString(expr, vals[n])
	}
	return expr
}

func walk(ps []panel, f func(panel)) {
	for _, p := range ps {
		f(p)
		walk(p.Panels, f)
	}
}

// checkDashboards evaluates every panel query of every dashboard over the last 3 minutes and
// fails for one without data; a panel documented as empty when healthy must return a number.
func checkDashboards(t *testing.T, prom string) {
	t.Helper()
	queries := 0
	for _, d := range loadDashboards(t) {
		vals := variableValues(t, prom, d)
		walk(d.Panels, func(p panel) {
			for _, target := range p.Targets {
				if strings.TrimSpace(target.Expr) == "" {
					continue
				}
				queries++
				expr := substitute(target.Expr, vals)
				if strings.Contains(expr, "$") {
					t.Errorf("%s, panel %q: unsubstituted variable in %s", d.file, p.Title, expr)
					continue
				}
				// A panel gets up to 30 s for its first data (a rate needs two scrapes in its window).
				var points, defined, series int
				deadline := time.Now().Add(30 * time.Second)
				for {
					series, points, defined = queryRange(t, prom, expr)
					if points > 0 || time.Now().After(deadline) {
						break
					}
					time.Sleep(time.Second)
				}
				switch {
				case points == 0:
					t.Errorf("%s, panel %q: no data for %s", d.file, p.Title, expr)
				case emptyWhenHealthy.MatchString(p.Description) && defined == 0:
					t.Errorf("%s, panel %q (empty when healthy): only NaN for %s, want a defined 0", d.file, p.Title, expr)
				default:
					t.Logf("%s, panel %q: %d series, %d points (%d defined) for %s", d.file, p.Title, series, points, defined, expr)
				}
			}
		})
	}
	if queries == 0 {
		t.Fatal("no panel queries found")
	}
	t.Logf("%d panel queries evaluated", queries)
}

// queryRange evaluates expr over the last 3 minutes at a 2 s step and counts the series, the
// points and the points that are numbers (not NaN).
func queryRange(t *testing.T, prom, expr string) (series, points, defined int) {
	t.Helper()
	end := time.Now()
	params := url.Values{"query": {expr}, "start": {fmt.Sprint(end.Add(-3 * time.Minute).Unix())},
		"end": {fmt.Sprint(end.Unix())}, "step": {"2"}}
	var res struct {
		Result []struct {
			Values [][2]any `json:"values"`
		} `json:"result"`
	}
	api(t, prom, "/api/v1/query_range", params, &res)
	for _, s := range res.Result {
		for _, v := range s.Values {
			points++
			if f, err := strconv.ParseFloat(fmt.Sprint(v[1]), 64); err == nil && f == f {
				defined++
			}
		}
	}
	return len(res.Result), points, defined
}
