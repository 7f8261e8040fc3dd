//go:build monitoring

package monitoring

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/hack/test/proctest"
)

// namespace is the namespace label every scrape target gets, as a Kubernetes scrape would.
const namespace = "monitoring-test"

// testRules is the chart's rules file with every `for:` shortened to 1s and the dead-letter
// growth window (offset 30m) to 15s, so that the alerts fire and resolve within the test.
func testRules(t *testing.T, dir string) string {
	t.Helper()
	raw, err := os.ReadFile("../../../charts/boardreadyops/rules/boardreadyops.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	s := regexp.MustCompile(`(?m)^(\s+)for: \S+$`).ReplaceAllString(string(raw), "${1}for: 1s")
	s = strings.ReplaceAll(s, "offset 30m", "offset 15s")
	// Statistics are read every 5 s (±10 %) and scraped every second: 15 s without a read is a
	// failure here, as 2 minutes is in production.
	s = strings.ReplaceAll(s, "_stats_refreshed_timestamp_seconds) > 120", "_stats_refreshed_timestamp_seconds) > 15")
	path := filepath.Join(dir, "rules.yml")
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startPrometheus runs /usr/bin/prometheus (Debian's package) on loopback, scraping targets
// (job name → host:port) every second and evaluating rulesFile every second, alerting to
// alertmanager (host:port). It returns the API's base URL.
func startPrometheus(t *testing.T, dir string, targets map[string]string, rulesFile, alertmanager string) string {
	t.Helper()
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n")
	fmt.Fprintf(&cfg, "rule_files:\n- %s\n", rulesFile)
	fmt.Fprintf(&cfg, "alerting:\n  alertmanagers:\n  - static_configs:\n    - targets: ['%s']\n", alertmanager)
	fmt.Fprintf(&cfg, "scrape_configs:\n")
	for job, addr := range targets {
		fmt.Fprintf(&cfg, "- job_name: %s\n  static_configs:\n  - targets: ['%s']\n    labels:\n      namespace: %s\n", job, addr, namespace)
	}
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := proctest.FreeAddr(t)
	p := &proctest.Process{Name: "prometheus", Bin: "/usr/bin/prometheus", MetricsAddr: addr}
	p.Args = []string{"--config.file=" + cfgFile, "--storage.tsdb.path=" + filepath.Join(dir, "tsdb"),
		"--web.listen-address=" + addr, "--rules.alert.resend-delay=1s", "--log.level=warn"}
	p.Start(t)
	waitHTTP(t, p, "http://"+addr+"/-/ready")
	return "http://" + addr
}

// startAlertmanager runs Debian's prometheus-alertmanager on loopback, without clustering,
// routing every alert to the webhook receiver at hook with 1 s grouping. It returns host:port.
func startAlertmanager(t *testing.T, dir, hook string) string {
	t.Helper()
	cfg := fmt.Sprintf(`route:
  receiver: hook
  group_by: [alertname, namespace, job, severity]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
- name: hook
  webhook_configs:
  - url: %s
    send_resolved: true
`, hook)
	cfgFile := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := "/usr/bin/prometheus-alertmanager"
	if _, err := exec.LookPath(bin); err != nil {
		t.Fatalf("%s not found: apt-get install prometheus-alertmanager (Debian)", bin)
	}
	addr := proctest.FreeAddr(t)
	p := &proctest.Process{Name: "alertmanager", Bin: bin, MetricsAddr: addr}
	p.Args = []string{"--config.file=" + cfgFile, "--storage.path=" + filepath.Join(dir, "alertmanager"),
		"--web.listen-address=" + addr, "--cluster.listen-address=", "--log.level=warn"}
	p.Start(t)
	waitHTTP(t, p, "http://"+addr+"/-/ready")
	return addr
}

func waitHTTP(t *testing.T, p *proctest.Process, u string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get(u); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.Exited():
			t.Fatalf("%s exited:\n%s", p.Name, p.Log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready at %s:\n%s", p.Name, u, p.Log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// api calls Prometheus's HTTP API and decodes its data into out.
func api(t *testing.T, base, path string, params url.Values, out any) {
	t.Helper()
	resp, err := http.Get(base + path + "?" + params.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Status != "success" {
		t.Fatalf("%s %v: %s %s", path, params, env.Error, body)
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// instant evaluates query now and returns the number of series in the result.
func instant(t *testing.T, base, query string) int {
	t.Helper()
	var res struct {
		Result []json.RawMessage `json:"result"`
	}
	api(t, base, "/api/v1/query", url.Values{"query": {query}}, &res)
	return len(res.Result)
}

type alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	Status      string            `json:"status"` // in Alertmanager's webhook: firing or resolved
}

// firing returns the alerts named name that Prometheus has firing now.
func firing(t *testing.T, base, name string) []alert {
	t.Helper()
	var data struct {
		Alerts []alert `json:"alerts"`
	}
	api(t, base, "/api/v1/alerts", nil, &data)
	var out []alert
	for _, a := range data.Alerts {
		if a.Labels["alertname"] == name && a.State == "firing" {
			out = append(out, a)
		}
	}
	return out
}

// eventually polls cond every 250 ms until it holds; after limit it fails with what.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", limit, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// receiver is the Alertmanager webhook receiver: it keeps every notification's alerts.
type receiver struct {
	mu     sync.Mutex
	alerts []alert
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var msg struct {
		Alerts []alert `json:"alerts"`
	}
	if err := json.NewDecoder(req.Body).Decode(&msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.alerts = append(r.alerts, msg.Alerts...)
	r.mu.Unlock()
}

// received returns the notified alerts named name with the given status (firing, resolved).
func (r *receiver) received(name, status string) []alert {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []alert
	for _, a := range r.alerts {
		if a.Labels["alertname"] == name && a.Status == status {
			out = append(out, a)
		}
	}
	return out
}
