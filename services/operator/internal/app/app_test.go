package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/boardreadyops/cloud/pkg/config"
	"github.com/boardreadyops/cloud/pkg/daemon"
	"github.com/boardreadyops/cloud/pkg/testkit/envtestassets"
	"github.com/boardreadyops/cloud/pkg/testkit/freeport"
	"github.com/boardreadyops/cloud/services/operator/api/v1alpha1"
	"github.com/boardreadyops/cloud/services/operator/internal/controller"
)

var testCfg *rest.Config

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	assets, err := envtestassets.Dir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "..", "..", "charts", "boardreadyops", "files", "crds")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	testCfg, err = env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "start envtest: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	return m.Run()
}

// probeClient is how the tests reach the servers they start and then stop. Without keep-alives
// every request closes its own connection: a pooled client may dial a spare connection that it
// never sends a request on, net/http's Shutdown treats such a connection as active for 5 s, and a
// server stopped with a 5 s grace period then fails its shutdown (seen in CI: "failed waiting for
// all runnables to end within grace period").
var probeClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestRunManager runs the real manager (leader election, cache, controller loop, metrics and
// probe endpoints) against the API server and a monitor whose deployment does not exist: the
// controller must elect itself, report readiness and write the monitor's status on its own. It
// runs as the operator's ServiceAccount with the chart's Role (asOperator), so that it also shows
// that the Role, its Lease rules limited to the leader election Lease's name included, suffices.
func TestRunManager(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scheme, err := controller.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(testCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "operator-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	interval := metav1.Duration{Duration: time.Second}
	mon := &v1alpha1.OutboxMonitor{
		ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: ns.Name},
		Spec:       v1alpha1.OutboxMonitorSpec{Dispatcher: v1alpha1.DispatcherTarget{DeploymentName: "absent"}, ScrapeInterval: &interval},
	}
	if err := c.Create(ctx, mon); err != nil {
		t.Fatal(err)
	}

	opCfg := asOperator(t, ctx, c, ns.Name)
	addr := freeAddr(t)
	done := make(chan error, 1)
	logs := &syncWriter{w: &bytes.Buffer{}}
	defer func() {
		if t.Failed() {
			t.Logf("operator log:\n%s", logs.String())
		}
	}()
	go func() {
		done <- RunManager(ctx, opCfg, Settings{Process: config.Process{MetricsAddr: addr, ShutdownTimeout: 5 * time.Second},
			Namespace: ns.Name, LeaderElect: true, ScrapeTimeout: time.Second}, slog.New(slog.NewTextHandler(logs, nil)))
	}()

	waitFor(t, 60*time.Second, "readyz 200", func() bool {
		resp, err := probeClient.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	waitFor(t, 60*time.Second, "monitor status written by the controller", func() bool {
		var got v1alpha1.OutboxMonitor
		if err := c.Get(ctx, client.ObjectKeyFromObject(mon), &got); err != nil {
			return false
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionWorkersHealthy)
		return cond != nil && cond.Reason == "DeploymentNotFound"
	})
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := probeClient.Get("http://" + addr + path)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %v, %v", path, resp, err)
		}
		_ = resp.Body.Close()
	}
	resp, err := probeClient.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(body), `boardreadyops_operator_broker_trigger_active{trigger="throughput"} 0`) {
		t.Fatalf("metrics lack the trigger gauge:\n%s", body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunManager: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("manager did not stop after cancel")
	}
	checkLeaseReleased(t, c, ns.Name)
}

func TestRunRejectsConfigurationWithoutNamespace(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	err := Run(context.Background(), nil, func(string) string { return "" }, &stderr)
	if !errors.Is(err, daemon.ErrUsage) || !strings.Contains(stderr.String(), "WATCH_NAMESPACE") {
		t.Fatalf("Run = %v, stderr %q", err, stderr.String())
	}
}

// The operator refuses the logging and shutdown settings the other services refuse, before it
// looks for Kubernetes, instead of logging at info, as JSON, or stopping at once. The context is
// cancelled, so that a Run that gets as far as the manager (a kubeconfig at hand) stops at once.
func TestRunRejectsWhatTheServicesReject(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env     map[string]string
		wantErr string
	}{
		{map[string]string{"LOG_LEVEL": "loud"}, `LOG_LEVEL "loud"`},
		{map[string]string{"LOG_FORMAT": "xml"}, `LOG_FORMAT "xml"`},
		{map[string]string{"BOARDREADYOPS_SHUTDOWN_TIMEOUT": "0s"}, "BOARDREADYOPS_SHUTDOWN_TIMEOUT must be positive"},
		{map[string]string{"LOG_LEVEL": "loud", "LOG_FORMAT": "xml", "BOARDREADYOPS_SHUTDOWN_TIMEOUT": "-1s"},
			"LOG_LEVEL \"loud\": want debug, info, warn or error\nLOG_FORMAT \"xml\": want json or text\nBOARDREADYOPS_SHUTDOWN_TIMEOUT must be positive"},
	} {
		t.Run(fmt.Sprint(tt.env), func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"WATCH_NAMESPACE": "boardreadyops"}
			for k, v := range tt.env {
				env[k] = v
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var stderr bytes.Buffer
			err := Run(ctx, nil, func(k string) string { return env[k] }, &stderr)
			if !errors.Is(err, daemon.ErrUsage) || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Fatalf("Run = %v, stderr %q; want a usage error naming %q", err, stderr.String(), tt.wantErr)
			}
		})
	}
}

func TestEvaluateLocalMode(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	claims := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "boardreadyops_outbox_claim_duration_seconds", Help: "h", Buckets: []float64{0.001, 0.25, 1}})
	completed := prometheus.NewCounter(prometheus.CounterOpts{Name: "boardreadyops_outbox_effects_processed_total", Help: "h", ConstLabels: prometheus.Labels{"outcome": "completed"}})
	reg.MustRegister(claims, completed)
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Each scrape sees 50 more slow claims and 100 more effects.
		for range 50 {
			claims.Observe(0.5)
		}
		completed.Add(100)
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()

	var out, errs bytes.Buffer
	err := Evaluate(context.Background(), []string{"--scrape", srv.URL, "--interval", "100ms", "--rounds", "4",
		"--claim-latency-window", "200ms", "--throughput", "1"}, &out, &errs)
	if err != nil {
		t.Fatalf("Evaluate: %v (%s)", err, errs.String())
	}
	text := out.String()
	for _, want := range []string{"claim p99", "FIRED", "ClaimLatencySustained: sustained since", "BrokerEvaluationRecommended=false (TuningFirst)"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if err := Evaluate(context.Background(), nil, &out, &errs); !errors.Is(err, daemon.ErrUsage) {
		t.Fatalf("Evaluate without --scrape = %v, want ErrUsage", err)
	}
}

// syncWriter serialises the manager's concurrent log writes into one buffer.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.w)
}

func waitFor(t testing.TB, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
