// Package daemon holds the process plumbing every BoardReadyOps service shares: signal handling,
// the structured logger, the worker identity used for leases, and the base every service builds
// on (database pool, metrics registry, operational endpoints).
package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/boardreadyops/cloud/pkg/config"
	"github.com/boardreadyops/cloud/pkg/database"
	"github.com/boardreadyops/cloud/pkg/opsserver"
	"github.com/boardreadyops/cloud/pkg/telemetry"
)

// RunFunc is a service's entry point: it parses args and the environment, runs until ctx ends,
// and shuts down gracefully.
type RunFunc func(ctx context.Context, args []string, getenv config.Getenv, stderr io.Writer) error

// Main runs fn with a context cancelled by SIGTERM or SIGINT and returns the exit code. A second
// signal kills the process at once (the default action is restored after the first). The garbage
// collector runs under DefaultGC.
func Main(name string, fn RunFunc) int { return MainGC(name, DefaultGC(), fn) }

// MainGC is Main under the garbage-collector policy gc.
func MainGC(name string, gc GC, fn RunFunc) int {
	gc.Apply(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-ctx.Done()
		stop()
	}()
	if err := fn(ctx, os.Args[1:], os.Getenv, os.Stderr); err != nil {
		if errors.Is(err, ErrUsage) {
			return 2
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	return 0
}

// ErrUsage reports a command line or configuration the user must fix; Main exits with code 2.
var ErrUsage = errors.New("usage error")

// NewLogger builds the process logger: JSON (default) or text, on w, at level. It does not check
// them: an unknown level logs at info, an unknown format as JSON, so every process first checks
// them with config.Process.Validate.
func NewLogger(w io.Writer, level, format, service string) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if format == "text" {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(h).With("service", service)
}

// WorkerID names this process in leases: hostname (the pod name in Kubernetes), pid and a random
// suffix, so that two processes never share a lease identity, even across restarts of one pod.
func WorkerID(service string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	id := fmt.Sprintf("%s/%s/%d/%s", service, host, os.Getpid(), hex.EncodeToString(b[:]))
	if len(id) > 200 {
		id = id[len(id)-200:]
	}
	return id
}

// Base is what every service starts with.
type Base struct {
	Name   string
	Logger *slog.Logger
	Pool   *pgxpool.Pool
	// Traces is the service's tracer provider, configured from the OTEL_* environment; its spans
	// include one per database query.
	Traces   telemetry.Provider
	Registry *prometheus.Registry
	Ops      *opsserver.Server
	// Getenv is the environment the service was configured from (OTEL_* for tracing).
	Getenv config.Getenv
	common config.Common
	// readiness is the readiness check behind /readyz, which also sets boardreadyops_ready.
	readiness *readiness
}

// StartConfig is what Start builds a service's base from.
type StartConfig struct {
	// Name of the service: the logger's service attribute and the database application_name.
	// Required.
	Name string
	// Common holds the settings every service shares, already validated (config.Common.Validate).
	Common config.Common
	// Getenv is the environment the service was configured from (OTEL_* for tracing); nil means
	// an empty environment.
	Getenv config.Getenv
	// Stderr receives the logs; nil discards them.
	Stderr io.Writer
	// Ready adds readiness checks to the database check.
	Ready []opsserver.ReadyFunc
	// SlowIsReady, when set, keeps the replica ready when a readiness check fails only because its
	// time ran out and SlowIsReady reports true (see readiness): for a service that takes traffic,
	// bounds each request itself, and can tell that its work still succeeds.
	SlowIsReady func() bool
}

// Start opens the pool, builds the registry (with Go runtime, process and pool collectors) and binds
// the operational endpoints. Readiness is the database check plus cfg.Ready.
func Start(ctx context.Context, cfg StartConfig) (*Base, error) {
	if cfg.Name == "" {
		return nil, errors.New("daemon: StartConfig.Name is required")
	}
	if cfg.Getenv == nil {
		cfg.Getenv = func(string) string { return "" }
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	logger := NewLogger(cfg.Stderr, cfg.Common.LogLevel, cfg.Common.LogFormat, cfg.Name)
	traces, err := telemetry.Setup(ctx, cfg.Name, cfg.Getenv)
	if err != nil {
		return nil, err
	}
	pool, err := database.Open(ctx, cfg.Common.DatabaseURL, database.PoolOptions{
		MaxConns: int32(cfg.Common.DBMaxConns), ApplicationName: "boardreadyops-" + cfg.Name,
		Tracer: traces.Tracer("github.com/boardreadyops/cloud/pkg/database"),
	})
	if err != nil {
		_ = traces.Shutdown(context.Background())
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		database.NewPoolCollector(pool))
	ready := func(ctx context.Context) error {
		if err := database.CheckReady(ctx, pool); err != nil {
			return err
		}
		for _, check := range cfg.Ready {
			if err := check(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	rd := newReadiness(reg, ready, cfg.SlowIsReady, logger)
	rctx, cancel := context.WithTimeout(ctx, opsserver.ReadyTimeout)
	_ = rd.check(rctx) // the gauge is current from the first scrape
	cancel()
	ops, err := opsserver.New(cfg.Common.MetricsAddr, reg, rd.check, logger)
	if err != nil {
		pool.Close()
		_ = traces.Shutdown(context.Background())
		return nil, err
	}
	return &Base{Name: cfg.Name, Logger: logger, Pool: pool, Traces: traces, Registry: reg, Ops: ops, Getenv: cfg.Getenv,
		common: cfg.Common, readiness: rd}, nil
}

// ServeOps serves the operational endpoints until ctx ends, and checks readiness every
// readyInterval meanwhile (boardreadyops_ready), whether or not anything probes /readyz.
func (b *Base) ServeOps(ctx context.Context) error {
	go b.readiness.watch(ctx, readyInterval)
	return b.Ops.Serve(ctx, b.common.ShutdownTimeout)
}

// ShutdownTimeout is the configured bound on graceful shutdown.
func (b *Base) ShutdownTimeout() time.Duration { return b.common.ShutdownTimeout }

// Close releases the pool and flushes buffered spans (bounded).
func (b *Base) Close() {
	b.Pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = b.Traces.Shutdown(ctx)
}
