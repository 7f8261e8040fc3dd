package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestNewTimeRange(t *testing.T) {
	t.Parallel()
	end := time.Unix(1_800_000_000, 0)
	for _, tt := range []struct {
		last, scrape, step, rateIv time.Duration
	}{
		{6 * time.Minute, 2 * time.Second, 2 * time.Second, 8 * time.Second},
		{6 * time.Hour, 15 * time.Second, 72 * time.Second, 87 * time.Second},
		{10 * time.Minute, 30 * time.Second, 30 * time.Second, 2 * time.Minute},
	} {
		tr := newTimeRange(end.Add(-tt.last), end, tt.scrape)
		if tr.step != tt.step || tr.rateIv != tt.rateIv {
			t.Errorf("last %v scrape %v: step %v rate interval %v, want %v %v", tt.last, tt.scrape, tr.step, tr.rateIv, tt.step, tt.rateIv)
		}
	}
}

func TestLegend(t *testing.T) {
	t.Parallel()
	m := map[string]string{"operation": "create_check_run", "status_class": "2xx"}
	for format, want := range map[string]string{
		"{{operation}} {{status_class}}": "create_check_run 2xx",
		"{{ operation }}":                "create_check_run",
		"p99":                            "p99",
		"{{missing}}":                    "",
	} {
		if got := legend(format, m); got != want {
			t.Errorf("legend(%q) = %q, want %q", format, got, want)
		}
	}
}

// TestFill runs a dashboard against a fake Prometheus API: the variables are substituted as
// Grafana does (All as the escaped list of values), and samples land on the time grid.
func TestFill(t *testing.T) {
	t.Parallel()
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/v1/label/namespace/"):
			_, _ = w.Write([]byte(`{"status":"success","data":["prod","staging"]}`))
		case strings.HasPrefix(r.URL.Path, "/api/v1/label/job/"):
			if got := r.URL.Query().Get("match[]"); got != `up{namespace="prod"}` {
				t.Errorf("job values asked with %q", got)
			}
			_, _ = w.Write([]byte(`{"status":"success","data":["a.b","c"]}`))
		case r.URL.Path == "/api/v1/query_range":
			queries = append(queries, r.URL.Query().Get("query"))
			start := r.URL.Query().Get("start")
			_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"result": []any{
				map[string]any{"metric": map[string]string{"result": "accepted"}, "values": [][2]any{{mustFloat(t, start) + 2, "1.5"}, {mustFloat(t, start) + 4, "NaN"}}},
			}}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	var d dashboard
	raw := `{"title":"t","templating":{"list":[
		{"name":"datasource","type":"datasource","query":"prometheus"},
		{"name":"namespace","type":"query","query":"label_values(up, namespace)"},
		{"name":"job","type":"query","query":"label_values(up{namespace=\"$namespace\"}, job)","includeAll":true}]},
		"panels":[{"type":"timeseries","title":"p","gridPos":{"x":0,"y":1,"w":8,"h":8},
		"targets":[{"expr":"sum by (result) (rate(x{namespace=\"$namespace\", job=~\"$job\"}[$__rate_interval]))","legendFormat":"{{result}}"}]}]}`
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatal(err)
	}
	end := time.Unix(1_800_000_000, 0)
	p, err := fill(context.Background(), &promClient{base: srv.URL}, d, newTimeRange(end.Add(-time.Minute), end, 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := `sum by (result) (rate(x{namespace="prod", job=~"(a\.b|c)"}[8s]))`
	if len(queries) != 1 || queries[0] != want {
		t.Fatalf("queries %q, want %q", queries, want)
	}
	s := p.Panels[0].Series
	if len(s) != 1 || s[0].Name != "accepted" || s[0].Values[1] == nil || *s[0].Values[1] != 1.5 || s[0].Values[2] != nil || s[0].Values[0] != nil {
		t.Fatalf("series %+v", s)
	}
	if p.height() != (3+9)*30+16 {
		t.Errorf("page height %d", p.height())
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
