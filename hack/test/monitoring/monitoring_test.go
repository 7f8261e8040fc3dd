//go:build monitoring

package monitoring

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/hack/test/proctest"
	"github.com/boardreadyops/cloud/pkg/hubsig"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const appID = 4343

// product is the running product and what the test drives it with.
type product struct {
	procs map[string]*proctest.Process
	pool  *pgxpool.Pool
	// dispatcherLogin is the dispatcher's own login (group role boardreadyops_dispatcher), as a
	// deployment gives it: the test takes the database away from the dispatcher alone.
	dispatcherLogin string
	sim             *githubsim.Simulator
	ingest          string
	secret          []byte
}

// startProduct builds and starts ingest, lifecycle and outbox-dispatcher on a fresh database,
// with the GitHub simulator running the dispatched workflows and sending their webhooks back.
func startProduct(t *testing.T, dir string) *product {
	t.Helper()
	if err := proctest.Build(dir, "ingest", "lifecycle", "outbox-dispatcher", "operator"); err != nil {
		t.Fatal(err)
	}
	dbURL := pgtest.NewURL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	key, pub, err := githubsim.NewAppKey()
	if err != nil {
		t.Fatal(err)
	}
	var sb [24]byte
	_, _ = rand.Read(sb[:])
	secret := []byte(hex.EncodeToString(sb[:]))
	keyFile, secretFile := filepath.Join(dir, "app-key.pem"), filepath.Join(dir, "webhook-secret")
	for f, b := range map[string][]byte{keyFile: key, secretFile: secret} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ingestAddr := proctest.FreeAddr(t)
	sim := githubsim.New(githubsim.Options{AppID: appID, AppPublicKey: pub, AutoRepositories: true,
		WebhookURL: "http://" + ingestAddr + "/webhook", WebhookSecret: secret, RunDelay: 200 * time.Millisecond})
	t.Cleanup(sim.Close)
	gh := httptest.NewServer(sim)
	t.Cleanup(gh.Close)

	common := []string{"DATABASE_URL=" + dbURL, "LOG_LEVEL=warn", fmt.Sprintf("BOARDREADYOPS_GITHUB_APP_ID=%d", appID)}
	dispatcherURL := pgtest.NewLogin(t, dbURL, "boardreadyops_dispatcher")
	dispatcherCfg, err := pgx.ParseConfig(dispatcherURL)
	if err != nil {
		t.Fatal(err)
	}
	own := map[string][]string{
		"ingest":    {"LISTEN_ADDR=" + ingestAddr, "BOARDREADYOPS_WEBHOOK_SECRET_FILE=" + secretFile},
		"lifecycle": nil,
		// Paced at 20 ms rather than GitHub's 1 s between mutations, so the load does not queue up.
		"outbox-dispatcher": {"BOARDREADYOPS_GITHUB_API_URL=" + gh.URL, "BOARDREADYOPS_GITHUB_PRIVATE_KEY_FILE=" + keyFile,
			"BOARDREADYOPS_DISPATCHER_MUTATION_INTERVAL=20ms", "DATABASE_URL=" + dispatcherURL}, // the last DATABASE_URL counts
	}
	p := &product{procs: map[string]*proctest.Process{}, pool: pool, sim: sim, ingest: ingestAddr, secret: secret,
		dispatcherLogin: dispatcherCfg.User}
	for name, env := range own {
		addr := proctest.FreeAddr(t)
		proc := &proctest.Process{Name: name, Bin: filepath.Join(dir, name), MetricsAddr: addr,
			Env: append(append(append([]string{}, common...), env...), "METRICS_ADDR="+addr)}
		proc.Start(t)
		p.procs[name] = proc
	}
	for _, proc := range p.procs {
		proc.WaitReady(t)
	}
	// The operator in local mode evaluates the broker triggers from the dispatcher's metrics
	// and serves its own.
	addr := proctest.FreeAddr(t)
	op := &proctest.Process{Name: "operator", Bin: filepath.Join(dir, "operator"), MetricsAddr: addr,
		Args: []string{"evaluate", "--scrape", "http://" + p.procs["outbox-dispatcher"].MetricsAddr + "/metrics",
			"--interval", "1s", "--metrics-addr", addr}}
	op.Start(t)
	op.WaitReady(t)
	p.procs["operator"] = op
	return p
}

// push sends a signed tag push for repository r of installation 6000+r.
func (p *product) push(r int, tag string) error {
	owner, name := fmt.Sprintf("org-%d", r), fmt.Sprintf("repo-%d", r)
	// A commit of its own per tag: the check-run search lists the commit's check runs.
	var sha [20]byte
	_, _ = rand.Read(sha[:])
	p.sim.SetTag(owner+"/"+name, tag, hex.EncodeToString(sha[:]))
	body, _ := json.Marshal(map[string]any{
		"ref": "refs/tags/" + tag, "before": strings.Repeat("0", 40), "after": hex.EncodeToString(sha[:]),
		"created": true, "deleted": false, "installation": map[string]any{"id": 6000 + r},
		"repository": map[string]any{"id": githubsim.RepositoryID(owner + "/" + name), "name": name, "full_name": owner + "/" + name,
			"default_branch": "main", "owner": map[string]any{"login": owner, "type": "Organization"}},
	})
	var id [16]byte
	_, _ = rand.Read(id[:])
	req, _ := http.NewRequest(http.MethodPost, "http://"+p.ingest+"/webhook", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", hex.EncodeToString(id[:]))
	req.Header.Set("X-Hub-Signature-256", hubsig.Sign(p.secret, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("push %s: %s", tag, resp.Status)
	}
	return nil
}

// load sends tag pushes, 2 a second over 8 installations (GitHub's pace is per installation),
// until ctx ends or 1,000 were sent.
func (p *product) load(ctx context.Context, t *testing.T) (wait func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 1000; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if err := p.push(i%8, fmt.Sprintf("v1.%d.0", i)); err != nil {
				t.Errorf("load: %v", err)
				return
			}
		}
	}()
	return wg.Wait
}

func (p *product) count(t *testing.T, q string) int {
	t.Helper()
	var n int
	if err := p.pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (p *product) statuses(t *testing.T) map[string]int {
	t.Helper()
	rows, err := p.pool.Query(context.Background(), `SELECT effect_type || '/' || status, count(*) FROM control_plane_outbox GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		_ = rows.Scan(&k, &n)
		out[k] = n
	}
	return out
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (p *product) exec(t *testing.T, q string) {
	t.Helper()
	if _, err := p.pool.Exec(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func TestMonitoringLive(t *testing.T) {
	dir := t.TempDir()
	prod := startProduct(t, dir)
	hook := &receiver{}
	hookSrv := httptest.NewServer(hook)
	t.Cleanup(hookSrv.Close)
	am := startAlertmanager(t, dir, hookSrv.URL)
	rulesFile := testRules(t, dir)
	targets := map[string]string{}
	for name, proc := range prod.procs {
		targets["brops-"+name] = proc.MetricsAddr
	}
	prom := startPrometheus(t, dir, targets, rulesFile, am)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for name, proc := range prod.procs {
			t.Logf("%s log (end):\n%s", name, tail(proc.Log.String(), 3000))
		}
		t.Logf("outbox: %v", prod.statuses(t))
		t.Logf("the receiver got %d notified alerts", len(hook.alerts))
	})

	ctx, cancel := context.WithCancel(context.Background())
	wait := prod.load(ctx, t)
	defer func() { cancel(); wait() }()

	// Every target is up and releases complete under the load.
	eventually(t, 60*time.Second, "every target up", func() bool {
		return instant(t, prom, `up{namespace="`+namespace+`"} == 1`) == len(targets)
	})
	eventually(t, 90*time.Second, "20 release runs succeeded and their conclusions shown", func() bool {
		return prod.count(t, `SELECT count(*) FROM release_runs WHERE status = 'succeeded'`) >= 20
	})
	// Rate windows ($__rate_interval) need a few scrapes of the load, and the SLO histograms
	// their observations.
	eventually(t, 60*time.Second, "rates of the load and SLO observations in Prometheus", func() bool {
		return instant(t, prom, `sum(rate(boardreadyops_release_conclusion_shown_seconds_count[20s])) > 0 and sum(rate(boardreadyops_lifecycle_jobs_processed_total[20s])) > 0`) == 1
	})

	t.Run("dashboards", func(t *testing.T) { checkDashboards(t, prom) })
	t.Run("rules", func(t *testing.T) { checkRules(t, prom, rulesFile) })

	t.Run("effect refused by GitHub", func(t *testing.T) {
		// The next workflow dispatch of installation 6000 is refused (422): dead-lettered.
		prod.sim.AddFault(githubsim.Fault{Operation: githubsim.OpDispatchWorkflow, InstallationID: 6000, Times: 1,
			Response: &githubsim.Response{Status: 422, Header: map[string]string{"Content-Type": "application/json"},
				Body: `{"message":"Unexpected inputs provided: [\"release_run_id\"]"}`}})
		const name = "BoardReadyOpsOutboxDeadLettersGrowing"
		eventually(t, 60*time.Second, "a dead letter", func() bool {
			return prod.count(t, `SELECT count(*) FROM control_plane_outbox WHERE status = 'dead_letter'`) == 1
		})
		eventually(t, 60*time.Second, name+" firing", func() bool { return len(firing(t, prom, name)) == 1 })
		waitNotified(t, hook, name, "firing")
		// The operator fixes the cause (the fault applied once) and replays it.
		prod.exec(t, `SELECT boardreadyops_outbox_replay(id, 'monitoring-test', 'workflow inputs fixed') FROM control_plane_outbox WHERE status = 'dead_letter'`)
		eventually(t, 60*time.Second, name+" resolved", func() bool { return len(firing(t, prom, name)) == 0 })
		requireNotified(t, hook, name, true)
	})

	t.Run("dispatch needs reconciliation", func(t *testing.T) {
		// The next dispatch of installation 6001 gets a 502 after its delivery started.
		prod.sim.AddFault(githubsim.Fault{Operation: githubsim.OpDispatchWorkflow, InstallationID: 6001, Times: 1, ServerErrorRate: 1})
		const name = "BoardReadyOpsReconciliationRequired"
		eventually(t, 60*time.Second, "a reconciliation", func() bool {
			return prod.count(t, `SELECT count(*) FROM control_plane_outbox WHERE status = 'reconciliation_required'`) == 1
		})
		eventually(t, 60*time.Second, name+" firing", func() bool { return len(firing(t, prom, name)) == 1 })
		waitNotified(t, hook, name, "firing")
		// GitHub did not create a run (the simulator answered 502 without processing): supersede.
		prod.exec(t, `SELECT boardreadyops_outbox_resolve_reconciliation(id, 'monitoring-test', NULL, 'no run created: 502 before processing') FROM control_plane_outbox WHERE status = 'reconciliation_required'`)
		eventually(t, 60*time.Second, name+" resolved", func() bool { return len(firing(t, prom, name)) == 0 })
		requireNotified(t, hook, name, true)
	})
	t.Run("dispatcher without its database", func(t *testing.T) {
		// The dispatcher keeps serving its metrics, up stays 1, and its outbox gauges keep the
		// last values read: only the statistics' refresh time tells.
		const name = "BoardReadyOpsOutboxStatsStale"
		if n := len(firing(t, prom, name)); n != 0 {
			t.Fatalf("%s firing before the database was taken away", name)
		}
		login := pgx.Identifier{prod.dispatcherLogin}.Sanitize()
		prod.exec(t, `ALTER ROLE `+login+` NOLOGIN`)
		prod.exec(t, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '`+prod.dispatcherLogin+`'`)
		eventually(t, 90*time.Second, name+" firing", func() bool { return len(firing(t, prom, name)) == 1 })
		waitNotified(t, hook, name, "firing")
		// Its readiness check fails too: no replica of the job is ready.
		eventually(t, 60*time.Second, "BoardReadyOpsNotReady firing for the dispatcher", func() bool {
			for _, a := range firing(t, prom, "BoardReadyOpsNotReady") {
				if a.Labels["job"] == "brops-outbox-dispatcher" {
					return true
				}
			}
			return false
		})
		if n := len(firing(t, prom, "BoardReadyOpsDispatcherDown")); n != 0 {
			t.Errorf("BoardReadyOpsDispatcherDown firing for a dispatcher that answers its scrapes")
		}
		prod.exec(t, `ALTER ROLE `+login+` LOGIN`)
		eventually(t, 90*time.Second, name+" resolved", func() bool { return len(firing(t, prom, name)) == 0 })
		requireNotified(t, hook, name, true)
		eventually(t, 60*time.Second, "BoardReadyOpsNotReady resolved", func() bool { return len(firing(t, prom, "BoardReadyOpsNotReady")) == 0 })
		requireNotified(t, hook, "BoardReadyOpsNotReady", true)
		// It delivers again without a restart.
		done := prod.count(t, `SELECT count(*) FROM control_plane_outbox WHERE status = 'completed'`)
		eventually(t, 60*time.Second, "deliveries with the database back", func() bool {
			return prod.count(t, `SELECT count(*) FROM control_plane_outbox WHERE status = 'completed'`) > done+10
		})
	})
	t.Run("dispatcher stopped", func(t *testing.T) {
		d := prod.procs["outbox-dispatcher"]
		if err := d.Stop(); err != nil {
			t.Fatalf("stop dispatcher: %v\n%s", err, d.Log.String())
		}
		for _, name := range []string{"BoardReadyOpsDispatcherDown", "BoardReadyOpsDispatcherAbsent"} {
			eventually(t, 60*time.Second, name+" firing", func() bool { return len(firing(t, prom, name)) == 1 })
			waitNotified(t, hook, name, "firing")
		}
		d.Start(t)
		d.WaitReady(t)
		for _, name := range []string{"BoardReadyOpsDispatcherDown", "BoardReadyOpsDispatcherAbsent"} {
			eventually(t, 60*time.Second, name+" resolved", func() bool { return len(firing(t, prom, name)) == 0 })
		}
		requireNotified(t, hook, "BoardReadyOpsDispatcherDown", true)
		requireNotified(t, hook, "BoardReadyOpsDispatcherAbsent", false)
		// The restarted dispatcher delivers again.
		done := prod.count(t, `SELECT count(*) FROM control_plane_outbox WHERE status = 'completed'`)
		eventually(t, 60*time.Second, "deliveries after the restart", func() bool {
			return prod.count(t, `SELECT count(*) FROM control_plane_outbox WHERE status = 'completed'`) > done+10
		})
	})
}

// waitNotified waits until Alertmanager delivered name with status (firing, resolved).
func waitNotified(t *testing.T, hook *receiver, name, status string) {
	t.Helper()
	eventually(t, 60*time.Second, name+" notified "+status, func() bool { return len(hook.received(name, status)) > 0 })
}

// requireNotified waits until Alertmanager delivered name to the receiver firing and then
// resolved, and checks the firing notification's annotations: summary, a description with its
// templates filled in (the namespace, when the alert has one) and the runbook URL.
func requireNotified(t *testing.T, hook *receiver, name string, hasNamespace bool) {
	t.Helper()
	waitNotified(t, hook, name, "firing")
	waitNotified(t, hook, name, "resolved")
	a := hook.received(name, "firing")[0]
	desc := a.Annotations["description"]
	switch {
	case a.Annotations["summary"] == "":
		t.Errorf("%s: notification without summary: %+v", name, a)
	case desc == "" || strings.Contains(desc, "<no value>") || strings.Contains(desc, "{{"):
		t.Errorf("%s: description not filled in: %q", name, desc)
	case hasNamespace && !strings.Contains(desc, namespace):
		t.Errorf("%s: description does not name namespace %s: %q", name, namespace, desc)
	case !strings.HasPrefix(a.Annotations["runbook_url"], "https://github.com/boardreadyops/cloud/blob/main/docs/operations.md#"):
		t.Errorf("%s: runbook_url %q", name, a.Annotations["runbook_url"])
	}
	t.Logf("%s notified: %s | %s | %s", name, a.Annotations["summary"], desc, a.Annotations["runbook_url"])
}

// checkRules waits until Prometheus evaluated every rule of the file and requires health ok.
func checkRules(t *testing.T, prom, rulesFile string) {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Count(string(raw), "- alert: ") + strings.Count(string(raw), "- record: ")
	type rule struct {
		Name           string `json:"name"`
		Health         string `json:"health"`
		LastError      string `json:"lastError"`
		LastEvaluation string `json:"lastEvaluation"`
	}
	var rules []rule
	eventually(t, 30*time.Second, "every rule evaluated", func() bool {
		var data struct {
			Groups []struct {
				Rules []rule `json:"rules"`
			} `json:"groups"`
		}
		api(t, prom, "/api/v1/rules", nil, &data)
		rules = rules[:0]
		for _, g := range data.Groups {
			for _, r := range g.Rules {
				if strings.HasPrefix(r.LastEvaluation, "0001-") {
					return false
				}
				rules = append(rules, r)
			}
		}
		return len(rules) == want
	})
	for _, r := range rules {
		if r.Health != "ok" {
			t.Errorf("rule %s: health %s: %s", r.Name, r.Health, r.LastError)
		}
	}
	t.Logf("%d rules loaded, health ok", len(rules))
}
