//go:build cluster

package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/hack/cluster/node"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
)

const appID = 4242

// TestCluster drives the product on a real single-node cluster the way an operator does. The
// steps depend on each other, so they run in order in one test and the first failure stops it;
// the cluster and everything it left are removed in every case.
func TestCluster(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the cluster test needs root (containerd, the kubelet, a bridge, iptables): run make test-cluster as root")
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	step := func(format string, args ...any) {
		t.Logf("[%s] %s", time.Since(began).Round(time.Second), fmt.Sprintf(format, args...))
	}
	c := clusterConfig(t)
	if _, err := os.Stat(filepath.Join("/sys/class/net", c.Bridge)); err == nil {
		// A cluster's bridge: refuse while its API server answers (make cluster-down stops it);
		// otherwise it is what a killed cluster left, and goes.
		// The address is dialled only while it is the bridge's own, so the dial stays on this machine.
		if hasAddress(t, c.Bridge, c.BridgeIP()) {
			conn, err := net.DialTimeout("tcp", net.JoinHostPort(c.BridgeIP().String(), strconv.Itoa(c.APIPort)), 2*time.Second)
			if err == nil {
				conn.Close()
				t.Fatalf("bridge %s exists and an API server answers on it: a cluster is up (make cluster-down stops it)", c.Bridge)
			}
		}
		t.Logf("removing the bridge %s a stopped cluster left", c.Bridge)
		run(t, "ip", "link", "del", c.Bridge)
	}
	_ = node.Down(ctx, c) // what an earlier, killed run of this test left
	before := snapshotHost(t)

	bin, err := exec.Command(filepath.Join(repo, "hack/cluster/build-binaries.sh")).Output()
	if err != nil {
		t.Fatalf("hack/cluster/build-binaries.sh: %v", err)
	}
	c.BinDir = strings.TrimSpace(string(bin))
	step("Kubernetes binaries in %s", c.BinDir)
	registryBin := filepath.Join(t.TempDir(), "cluster")
	build := exec.Command("go", "build", "-o", registryBin, "./hack/cluster")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build hack/cluster: %v: %s", err, out)
	}
	c.RegistryCommand = []string{registryBin, "registry"}
	revision := strings.TrimSpace(run(t, "git", "-C", repo, "rev-parse", "HEAD"))

	t.Cleanup(func() {
		start := time.Now()
		if err := node.Down(context.Background(), c); err != nil {
			t.Errorf("cluster down: %v", err)
		}
		after := snapshotHost(t)
		for _, d := range []struct {
			what          string
			before, after []string
		}{{"interface", before.interfaces, after.interfaces}, {"mount", before.mounts, after.mounts}, {"iptables", before.chains, after.chains}} {
			if left := diff(d.before, d.after); len(left) > 0 {
				t.Errorf("left behind (%s): %s", d.what, strings.Join(left, "; "))
			}
		}
		if left := node.Leftovers(c); len(left) > 0 {
			t.Errorf("left behind: %s", strings.Join(left, "; "))
		}
		t.Logf("cluster down and leak check in %s", time.Since(start).Round(time.Millisecond))
	})
	if err := node.Up(ctx, c, func(ctx context.Context, reg string) error {
		buildImages(t, ctx, repo, reg, "v1", revision, "ingest,lifecycle,outbox-dispatcher,operator,brops,pause")
		return nil
	}); err != nil {
		t.Fatalf("cluster up: %v", err)
	}
	step("cluster up, node Ready")
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := c.Kubectl(ctx, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	bridge := c.BridgeIP().String()
	upgradeRoot, upgradeVersion := upgradeRepository(t)
	buildImages(t, ctx, upgradeRoot, c.RegistryAddr, "v2", revision+"-upgrade", "ingest,lifecycle,outbox-dispatcher,operator,brops")
	step("upgrade images (tag v2, test-only migration %d) pushed", upgradeVersion)

	// PostgreSQL, the login users and the Secrets, as the chart README instructs.
	pg := startPostgres(t, ctx, bridge)
	dumpQueuesOnFailure(t, pg)
	dumpPodLogsOnFailure(t, c) // before PostgreSQL stops, so the logs end with the failure
	step("PostgreSQL on %s:%d", bridge, pg.cluster.Port())
	key, pub, err := githubsim.NewAppKey()
	if err != nil {
		t.Fatal(err)
	}
	secrets := t.TempDir()
	secret := []byte(randomHex(24))
	writeFile(t, filepath.Join(secrets, "app.pem"), key)
	writeFile(t, filepath.Join(secrets, "secrets.txt"), append(secret, '\n'))
	kubectl("create", "namespace", namespace)
	kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted", "pod-security.kubernetes.io/warn=restricted")
	kubectl("-n", namespace, "create", "secret", "generic", "boardreadyops-database",
		"--from-literal=migrate-url="+pg.url("br_migrate"), "--from-literal=ingest-url="+pg.url("br_ingest"),
		"--from-literal=lifecycle-url="+pg.url("br_lifecycle"), "--from-literal=dispatcher-url="+pg.url("br_dispatcher"),
		"--from-literal=redeliver-url="+pg.url("br_redeliver"))
	kubectl("-n", namespace, "create", "secret", "generic", "boardreadyops-github-app", "--from-file=private-key.pem="+filepath.Join(secrets, "app.pem"))
	kubectl("-n", namespace, "create", "secret", "generic", "boardreadyops-webhook", "--from-file=webhook-secrets="+filepath.Join(secrets, "secrets.txt"))

	// The GitHub simulator on the host, at the bridge address the dispatcher pods reach.
	simLn, err := net.Listen("tcp", net.JoinHostPort(bridge, "0"))
	if err != nil {
		t.Fatal(err)
	}
	simHandler := &lateHandler{}
	simServer := &http.Server{Handler: simHandler, ReadHeaderTimeout: 10 * time.Second}
	go simServer.Serve(simLn) //nolint:errcheck
	t.Cleanup(func() { simServer.Close() })
	simPort := simLn.Addr().(*net.TCPAddr).Port

	host32 := []map[string]any{{"ipBlock": map[string]any{"cidr": bridge + "/32"}}}
	values := func(tag string) map[string]any {
		return map[string]any{
			"image":    map[string]any{"registry": c.RegistryAddr + "/boardreadyops", "tag": tag},
			"database": map[string]any{"existingSecret": "boardreadyops-database"},
			"github": map[string]any{"appID": appID, "apiURL": fmt.Sprintf("http://%s/", simLn.Addr()),
				"privateKey": map[string]any{"existingSecret": "boardreadyops-github-app"}},
			"webhook":   map[string]any{"existingSecret": "boardreadyops-webhook"},
			"ingest":    map[string]any{"replicas": 2},
			"lifecycle": map[string]any{"replicas": 1, "leaseSeconds": 20},
			// The load spreads over a few installations: at GitHub's one-second pace per
			// installation (the chart's default) it could not cross the throughput trigger, so
			// the pace is shortened as the chaos suite's is (the simulator does not enforce it).
			"outboxDispatcher": map[string]any{"replicas": 1, "leaseSeconds": 20, "githubRequestTimeout": "5s", "mutationInterval": "20ms"},
			// A throughput threshold this load crosses, so that a trigger fires from real scrapes.
			"operator": map[string]any{"monitor": map[string]any{"scrapeInterval": "5s",
				"triggers": map[string]any{"throughput": map[string]any{"effectsPerSecond": 5, "window": "15s"}}}},
			"networkPolicy": map[string]any{
				"enabled":           true,
				"ingressFrom":       host32,
				"metricsFrom":       []map[string]any{{"ipBlock": map[string]any{"cidr": c.PodCIDR}}, host32[0]},
				"postgres":          map[string]any{"to": host32, "port": pg.cluster.Port()},
				"github":            map[string]any{"to": host32, "port": simPort},
				"kubeAPIServerTo":   host32,
				"kubeAPIServerPort": c.APIPort,
			},
		}
	}
	hc := helmConfig(t, c.Kubeconfig())
	rel := helmInstall(t, ctx, hc, values("v1"))
	step("helm install: revision %d %s", rel.Version, rel.Info.Status)
	if err := hookSucceeded(rel); err != nil {
		t.Fatal(err)
	}
	if v := pg.count(t, ctx, `SELECT boardreadyops_schema_version()::int`); int64(v) != upgradeVersion-1 {
		t.Fatalf("schema version %d after install, want %d", v, upgradeVersion-1)
	}
	kubectl("-n", namespace, "wait", "--for=condition=Available", "deployment", "--all", "--timeout=5m")
	waitFor(t, ctx, "the OutboxMonitor's first status", 2*time.Minute, func() (bool, string) {
		m := monitor(t, c)
		return m.Status.LastScrapeTime != "", fmt.Sprintf("%+v", m.Status)
	})
	step("every Deployment Available, migration hook succeeded, OutboxMonitor has status")
	// The CRD is a release object kept at uninstall; the OutboxMonitor, a hook, is owned by the
	// dispatcher Deployment (the operator adds the reference) so that uninstall removes it.
	if got := kubectl("get", "crd", "outboxmonitors.boardreadyops.io", "-o",
		`jsonpath={.metadata.annotations.meta\.helm\.sh/release-name} {.metadata.annotations.helm\.sh/resource-policy}`); got != releaseName+" keep" {
		t.Errorf("CRD release and resource policy: %q, want %q", got, releaseName+" keep")
	}
	waitFor(t, ctx, "the OutboxMonitor owned by the dispatcher Deployment", time.Minute, func() (bool, string) {
		owner := kubectl("-n", namespace, "get", "outboxmonitor", prefix+"outbox-dispatcher", "-o", "jsonpath={.metadata.ownerReferences[*].name}")
		return owner == prefix+"outbox-dispatcher", owner
	})

	ingestIP := strings.TrimSpace(kubectl("-n", namespace, "get", "service", prefix+"ingest", "-o", "jsonpath={.spec.clusterIP}"))
	webhookURL := "http://" + ingestIP + "/webhook"
	sim := githubsim.New(githubsim.Options{AppID: appID, AppPublicKey: pub, AutoRepositories: true, TagCommit: githubsim.TagsAt(pushedSHA),
		WebhookURL: webhookURL, WebhookSecret: secret, RunDelay: 200 * time.Millisecond})
	t.Cleanup(sim.Close)
	var h http.Handler = sim
	simHandler.h.Store(&h)

	// Load through ingest's Service; scale the dispatcher to 3 and lifecycle to 2 under it, then
	// delete a dispatcher pod mid-load.
	snd := newSender(webhookURL, secret)
	for range 20 {
		if !snd.send(ctx) {
			t.Fatalf("first webhooks refused: %v", snd.failures)
		}
	}
	stopLoad := snd.run(25 * time.Millisecond)
	kubectl("-n", namespace, "scale", "deployment/"+prefix+"outbox-dispatcher", "--replicas=3")
	kubectl("-n", namespace, "scale", "deployment/"+prefix+"lifecycle", "--replicas=2")
	kubectl("-n", namespace, "rollout", "status", "deployment/"+prefix+"outbox-dispatcher", "--timeout=5m")
	kubectl("-n", namespace, "rollout", "status", "deployment/"+prefix+"lifecycle", "--timeout=5m")
	step("scaled: dispatcher 3, lifecycle 2 (%d webhooks accepted so far)", snd.accepted.Load())
	waitFor(t, ctx, "every replica claiming work", 3*time.Minute, func() (bool, string) {
		d := podCounters(t, c, "outbox-dispatcher", "boardreadyops_outbox_effects_processed_total")
		l := podCounters(t, c, "lifecycle", "boardreadyops_lifecycle_jobs_processed_total")
		return len(d) == 3 && len(l) == 2 && allPositive(d) && allPositive(l), fmt.Sprintf("dispatcher %v, lifecycle %v", d, l)
	})
	step("all 3 dispatcher and 2 lifecycle replicas claimed work: dispatcher %v, lifecycle %v",
		podCounters(t, c, "outbox-dispatcher", "boardreadyops_outbox_effects_processed_total"),
		podCounters(t, c, "lifecycle", "boardreadyops_lifecycle_jobs_processed_total"))
	victim := podNames(t, c, "outbox-dispatcher")[0]
	kubectl("-n", namespace, "delete", "pod", victim, "--grace-period=0", "--force", "--wait=false")
	step("deleted dispatcher pod %s (grace period 0) mid-load", victim)
	time.Sleep(10 * time.Second) // load keeps running while the Deployment replaces it
	kubectl("-n", namespace, "rollout", "status", "deployment/"+prefix+"outbox-dispatcher", "--timeout=5m")

	// The operator's view comes from real scrapes of the three dispatcher pods.
	waitFor(t, ctx, "the OutboxMonitor observing 3 ready dispatcher pods", 2*time.Minute, func() (bool, string) {
		m := monitor(t, c)
		o := m.Status.Observed
		return o != nil && o.PodsScraped == 3 && o.ReadyWorkers == 3 && o.DesiredWorkers == 3 && len(m.Status.ScrapeErrors) == 0 &&
			m.condition("WorkersHealthy") == "True", fmt.Sprintf("%+v", m.Status)
	})
	m := monitor(t, c)
	step("OutboxMonitor: %d pods scraped, %d/%d ready workers, conditions %s", m.Status.Observed.PodsScraped,
		m.Status.Observed.ReadyWorkers, m.Status.Observed.DesiredWorkers, m.conditions())
	var events string
	waitFor(t, ctx, "the throughput trigger firing from the scraped dispatcher metrics", 2*time.Minute, func() (bool, string) {
		m := monitor(t, c)
		events = kubectl("-n", namespace, "get", "events", "--field-selector", "involvedObject.kind=OutboxMonitor",
			"-o", "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}")
		return m.condition("ThroughputSustained") == "True" && strings.Contains(events, "TriggerSustained: ThroughputSustained"),
			fmt.Sprintf("conditions %s; events:\n%s", m.conditions(), events)
	})
	step("OutboxMonitor Events:\n%s", strings.TrimSpace(events))

	// Upgrade under load to the image tag with the new migration: zero refused webhooks.
	failedBefore := snd.failed.Load()
	rel = helmUpgrade(t, ctx, hc, withReplicas(values("v2"), 2, 3, 2))
	step("helm upgrade: revision %d %s", rel.Version, rel.Info.Status)
	if err := hookSucceeded(rel); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"ingest", "lifecycle", "outbox-dispatcher", "operator"} {
		kubectl("-n", namespace, "rollout", "status", "deployment/"+prefix+d, "--timeout=5m")
		strategy := kubectl("-n", namespace, "get", "deployment", prefix+d, "-o", "jsonpath={.spec.strategy.rollingUpdate.maxUnavailable}")
		if d != "operator" && strategy != "0" {
			t.Errorf("%s: maxUnavailable %q, want 0", d, strategy)
		}
	}
	images := kubectl("-n", namespace, "get", "pods", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.containers[0].image}{\"\\n\"}{end}")
	for _, line := range strings.Split(strings.TrimSpace(images), "\n") {
		if !strings.HasSuffix(line, ":v2") {
			t.Errorf("after the upgrade, pod %s", line)
		}
	}
	if v := pg.count(t, ctx, `SELECT boardreadyops_schema_version()::int`); int64(v) != upgradeVersion {
		t.Fatalf("schema version %d after the upgrade, want %d", v, upgradeVersion)
	}
	if n := pg.count(t, ctx, `SELECT count(*)::int FROM cluster_test_upgrade`); n != 1 {
		t.Fatalf("the upgrade's migration ran %d times", n)
	}
	stopLoad()
	if f := snd.failed.Load(); f != 0 {
		t.Errorf("%d webhooks refused or failed (%d during the upgrade): %s", f, f-failedBefore, strings.Join(snd.failures, "; "))
	}
	step("upgrade done under load: schema %d, every pod on v2; %d webhooks accepted, %d refused", upgradeVersion, snd.accepted.Load(), snd.failed.Load())

	// Nothing lost, nothing duplicated, every run terminal.
	pushes := int(snd.accepted.Load())
	waitFor(t, ctx, "every release run succeeded and every effect completed", 5*time.Minute, func() (bool, string) {
		runs := pg.count(t, ctx, `SELECT count(*)::int FROM release_runs WHERE status = 'succeeded'`)
		pending := pg.count(t, ctx, `SELECT count(*)::int FROM control_plane_outbox WHERE status <> 'completed'`)
		jobs := pg.count(t, ctx, `SELECT count(*)::int FROM control_plane_jobs WHERE status <> 'completed'`)
		return runs == pushes && pending == 0 && jobs == 0, fmt.Sprintf("%d/%d runs succeeded, %d effects and %d jobs not completed", runs, pushes, pending, jobs)
	})
	if n := pg.count(t, ctx, `SELECT count(*)::int FROM release_runs`); n != pushes {
		t.Errorf("%d release runs for %d accepted pushes", n, pushes)
	}
	if n := pg.count(t, ctx, `SELECT count(*)::int FROM webhook_inbox WHERE event = 'push'`); n != pushes {
		t.Errorf("%d push deliveries stored for %d accepted", n, pushes)
	}
	rows, err := pg.admin.Query(ctx, `SELECT r.id::text, a.id::text, boardreadyops_release_run_external_id(r.repository_id, r.ref) FROM release_runs r JOIN execution_attempts a ON a.release_run_id = r.id`)
	if err != nil {
		t.Fatal(err)
	}
	attempts := 0
	for rows.Next() {
		var runID, attempt, externalID string
		if err := rows.Scan(&runID, &attempt, &externalID); err != nil {
			t.Fatal(err)
		}
		crs := sim.CheckRuns(externalID)
		if len(crs) != 1 || crs[0].Status != "completed" || crs[0].Conclusion == nil || *crs[0].Conclusion != "success" {
			t.Errorf("release run %s: check runs %+v, want exactly one, completed with success", runID, crs)
		}
		if n := sim.Dispatches(attempt); n != 1 {
			t.Errorf("attempt %s dispatched %d times, want exactly 1", attempt, n)
		}
		attempts++
	}
	rows.Close()
	if attempts != pushes || sim.DispatchTotal() != pushes || sim.CheckRunCount() != pushes {
		t.Errorf("%d attempts, %d dispatches, %d check runs on the simulator for %d runs", attempts, sim.DispatchTotal(), sim.CheckRunCount(), pushes)
	}
	step("%d runs succeeded: one dispatch and one check run each on the simulator", pushes)

	// Pod security admission (restricted, enforced on the namespace) admitted every pod: no
	// ReplicaSet or Job reports a refused pod, and every pod ran.
	if ev := kubectl("-n", namespace, "get", "events", "--field-selector", "reason=FailedCreate", "-o", "jsonpath={.items[*].message}"); strings.TrimSpace(ev) != "" {
		t.Errorf("pods refused: %s", ev)
	}
	networkPolicies := kubectl("-n", namespace, "get", "networkpolicies", "-o", "name")
	step("restricted pod security admitted every pod; NetworkPolicies present (the bridge CNI does not enforce them):\n%s", strings.TrimSpace(networkPolicies))

	// Uninstall: only the CRD and the PostgreSQL data stay.
	helmUninstall(t, hc)
	kubectl("-n", namespace, "wait", "--for=delete", "pod", "--all", "--timeout=3m")
	left := kubectl("-n", namespace, "get", strings.Join(namespacedKinds(t, c), ","), "-o", "name", "--ignore-not-found")
	var unexpected []string
	for _, o := range strings.Fields(left) {
		switch o {
		case "serviceaccount/default", "configmap/kube-root-ca.crt",
			"secret/boardreadyops-database", "secret/boardreadyops-github-app", "secret/boardreadyops-webhook", // the namespace's own and ours
			// The operator's leader-election Lease: controller-runtime creates it, no chart object
			// owns it (the chart README says to delete it after uninstalling).
			"lease.coordination.k8s.io/boardreadyops-operator.boardreadyops.io":
		default:
			unexpected = append(unexpected, o)
		}
	}
	if len(unexpected) > 0 {
		t.Errorf("after helm uninstall: %s", strings.Join(unexpected, " "))
	}
	if out := kubectl("get", "crd", "outboxmonitors.boardreadyops.io", "-o", "name"); !strings.Contains(out, "outboxmonitors") {
		t.Errorf("the CRD is gone after uninstall: %q", out)
	}
	if n := pg.count(t, ctx, `SELECT count(*)::int FROM release_runs`); n != pushes {
		t.Errorf("PostgreSQL holds %d release runs after uninstall, want %d", n, pushes)
	}
	step("helm uninstall left the CRD and PostgreSQL's data only")
}

// hasAddress reports whether the interface holds ip.
func hasAddress(t *testing.T, iface string, ip net.IP) bool {
	t.Helper()
	i, err := net.InterfaceByName(iface)
	if err != nil {
		return false
	}
	addrs, err := i.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(out)
}

func withReplicas(v map[string]any, ingest, dispatcher, lifecycle int) map[string]any {
	v["ingest"].(map[string]any)["replicas"] = ingest
	v["outboxDispatcher"].(map[string]any)["replicas"] = dispatcher
	v["lifecycle"].(map[string]any)["replicas"] = lifecycle
	return v
}

// waitFor polls cond every second until it holds, failing with its last description after timeout.
func waitFor(t *testing.T, ctx context.Context, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, desc := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("waiting for %s: %s", what, desc)
		}
		time.Sleep(time.Second)
	}
}

type outboxMonitor struct {
	Status struct {
		LastScrapeTime string   `json:"lastScrapeTime"`
		ScrapeErrors   []string `json:"scrapeErrors"`
		Observed       *struct {
			PodsScraped    int `json:"podsScraped"`
			ReadyWorkers   int `json:"readyWorkers"`
			DesiredWorkers int `json:"desiredWorkers"`
		} `json:"observed"`
		Conditions []struct {
			Type, Status, Reason string
		} `json:"conditions"`
	} `json:"status"`
}

func (m outboxMonitor) condition(typ string) string {
	for _, c := range m.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

func (m outboxMonitor) conditions() string {
	var s []string
	for _, c := range m.Status.Conditions {
		s = append(s, c.Type+"="+c.Status)
	}
	return strings.Join(s, " ")
}

func monitor(t *testing.T, c node.Config) outboxMonitor {
	t.Helper()
	out, err := c.Kubectl(context.Background(), "-n", namespace, "get", "outboxmonitor", prefix+"outbox-dispatcher", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var m outboxMonitor
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// podIPs lists the running pods of a component that are not terminating, by name and address.
func podIPs(t *testing.T, c node.Config, component string) map[string]string {
	t.Helper()
	out, err := c.Kubectl(context.Background(), "-n", namespace, "get", "pods", "-l", "app.kubernetes.io/component="+component,
		"--field-selector=status.phase=Running", "-o", `jsonpath={range .items[*]}{.metadata.name} {.status.podIP} {.metadata.deletionTimestamp}{"\n"}{end}`)
	if err != nil {
		t.Fatal(err)
	}
	ips := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 { // not terminating
			ips[f[0]] = f[1]
		}
	}
	return ips
}

func podNames(t *testing.T, c node.Config, component string) []string {
	t.Helper()
	var names []string
	for n := range podIPs(t, c, component) {
		names = append(names, n)
	}
	if len(names) == 0 {
		t.Fatalf("no running %s pod", component)
	}
	return names
}

// podCounters scrapes each running pod of component at its metrics port and sums metric's series.
func podCounters(t *testing.T, c node.Config, component, metric string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	client := &http.Client{Timeout: 5 * time.Second}
	for name, ip := range podIPs(t, c, component) {
		resp, err := client.Get("http://" + net.JoinHostPort(ip, "9090") + "/metrics")
		if err != nil {
			continue
		}
		sum := 0.0
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, metric+" ") || strings.HasPrefix(line, metric+"{") {
				f := strings.Fields(line)
				if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
					sum += v
				}
			}
		}
		resp.Body.Close()
		out[name] = sum
	}
	return out
}

func allPositive(m map[string]float64) bool {
	for _, v := range m {
		if v <= 0 {
			return false
		}
	}
	return true
}

// namespacedKinds lists every namespaced resource kind that can be listed, except Events.
func namespacedKinds(t *testing.T, c node.Config) []string {
	t.Helper()
	out, err := c.Kubectl(context.Background(), "api-resources", "--namespaced=true", "--verbs=list", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, k := range strings.Fields(out) {
		if k != "events" && k != "events.events.k8s.io" {
			kinds = append(kinds, k)
		}
	}
	return kinds
}
