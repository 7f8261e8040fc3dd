// Package app is the BoardReadyOps operator: a controller-runtime manager running the
// OutboxMonitor controller (broker-transition triggers from the dispatcher's metrics), and the
// local `evaluate` mode that applies the same evaluation to dispatchers scraped by URL.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/boardreadyops/cloud/pkg/config"
	"github.com/boardreadyops/cloud/pkg/daemon"
	"github.com/boardreadyops/cloud/services/operator/internal/controller"
)

// Settings are the operator's configuration.
type Settings struct {
	// Process holds what every service shares (metrics address, logging, shutdown timeout), so
	// that the operator checks it as the others do.
	config.Process
	Namespace     string
	LeaderElect   bool
	LeaderElectNS string
	ScrapeTimeout time.Duration
}

func (s *Settings) register(e *config.Env, getenv config.Getenv) {
	s.Register(e) // config.Process's
	e.String(&s.Namespace, "namespace", "WATCH_NAMESPACE", getenv("POD_NAMESPACE"),
		"namespace whose OutboxMonitors are reconciled (default: the pod's namespace, POD_NAMESPACE)")
	e.Bool(&s.LeaderElect, "leader-elect", "BOARDREADYOPS_LEADER_ELECT", true, "elect a leader so that only one replica reconciles")
	e.Duration(&s.ScrapeTimeout, "scrape-timeout", "BOARDREADYOPS_SCRAPE_TIMEOUT", 10*time.Second,
		"bound on one pod's metrics scrape (also at most half the monitor's interval)")
}

func (s *Settings) validate() error {
	var errs []error
	if s.Namespace == "" {
		errs = append(errs, errors.New("WATCH_NAMESPACE (or POD_NAMESPACE, or --namespace) is required: the operator's permissions are namespaced"))
	}
	if s.ScrapeTimeout <= 0 {
		errs = append(errs, errors.New("BOARDREADYOPS_SCRAPE_TIMEOUT must be positive"))
	}
	return errors.Join(append(errs, s.Validate())...) // config.Process's checks
}

// Run runs the operator until ctx ends; `operator evaluate …` runs the local mode instead.
func Run(ctx context.Context, args []string, getenv config.Getenv, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "evaluate" {
		return Evaluate(ctx, args[1:], stderr, stderr)
	}
	fs := flag.NewFlagSet("operator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := config.NewEnv(fs, getenv)
	var s Settings
	s.register(env, getenv)
	if err := env.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		fmt.Fprintf(stderr, "operator: configuration: %v\n", err)
		return daemon.ErrUsage
	}
	if err := s.validate(); err != nil {
		fmt.Fprintf(stderr, "operator: configuration: %v\n", err)
		return daemon.ErrUsage
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubernetes client configuration: %w", err)
	}
	return RunManager(ctx, cfg, s, daemon.NewLogger(stderr, s.LogLevel, s.LogFormat, "operator"))
}

// RunManager runs the controller manager against cfg until ctx ends: the OutboxMonitor
// controller, leader election (when enabled), and /metrics, /healthz and /readyz on MetricsAddr.
// It returns once the manager has stopped.
func RunManager(ctx context.Context, cfg *rest.Config, s Settings, logger *slog.Logger) error {
	log := logr.FromSlogHandler(logger.Handler())
	// controller-runtime's packages log through its process-wide delegating logger until it is
	// set; setting it once here, in the process's single entry point, silences its warning.
	ctrllog.SetLogger(log)
	scheme, err := controller.NewScheme()
	if err != nil {
		return fmt.Errorf("build scheme: %w", err)
	}
	var synced atomic.Bool
	ready := healthz.Checker(func(*http.Request) error {
		if !synced.Load() {
			return errors.New("informer caches not synced")
		}
		return nil
	})
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Logger: log,
		Cache:  cache.Options{DefaultNamespaces: map[string]cache.Config{s.Namespace: {}}},
		Metrics: metricsserver.Options{
			BindAddress: s.MetricsAddr,
			ExtraHandlers: map[string]http.Handler{
				// healthz.Handler serves its checks below the path it is given.
				"/healthz": http.StripPrefix("/healthz", &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}),
				"/readyz":  http.StripPrefix("/readyz", &healthz.Handler{Checks: map[string]healthz.Checker{"caches": ready}}),
			},
		},
		HealthProbeBindAddress:        "0",
		LeaderElection:                s.LeaderElect,
		LeaderElectionID:              "boardreadyops-operator.boardreadyops.io",
		LeaderElectionNamespace:       s.Namespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &s.ShutdownTimeout,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	rec := &controller.Reconciler{
		Client:        mgr.GetClient(),
		Recorder:      mgr.GetEventRecorder("boardreadyops-operator"),
		HTTP:          &http.Client{Timeout: 2 * s.ScrapeTimeout},
		ScrapeTimeout: s.ScrapeTimeout,
		Metrics:       controller.NewMetrics(ctrlmetrics.Registry),
	}
	if err := rec.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up outboxmonitor controller: %w", err)
	}
	// Readiness must not wait for leadership: a standby replica is ready once its caches sync,
	// or a rollout would never finish.
	if err := mgr.Add(cacheSyncWatcher{cache: mgr.GetCache(), synced: &synced}); err != nil {
		return fmt.Errorf("add readiness runnable: %w", err)
	}
	logger.Info("operator starting", "namespace", s.Namespace, "metrics_addr", s.MetricsAddr, "leader_elect", s.LeaderElect)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

// cacheSyncWatcher marks the process ready once the informer caches have synced. It runs on
// every replica, leader or not.
type cacheSyncWatcher struct {
	cache  cache.Cache
	synced *atomic.Bool
}

func (w cacheSyncWatcher) Start(ctx context.Context) error {
	if w.cache.WaitForCacheSync(ctx) {
		w.synced.Store(true)
	}
	<-ctx.Done()
	return nil
}

// NeedLeaderElection is false: readiness is per replica.
func (cacheSyncWatcher) NeedLeaderElection() bool { return false }
