// Package app is the ingest service: the GitHub webhook endpoint. It verifies each delivery's
// signature, normalizes it, writes the inbox row and its job in one transaction and answers 202.
// It never calls GitHub.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/boardreadyops/cloud/pkg/config"
	"github.com/boardreadyops/cloud/pkg/daemon"
	"github.com/boardreadyops/cloud/pkg/groupcommit"
	"github.com/boardreadyops/cloud/pkg/notify"
	"github.com/boardreadyops/cloud/services/ingest/internal/secrets"
	"github.com/boardreadyops/cloud/services/ingest/internal/store"
	"github.com/boardreadyops/cloud/services/ingest/internal/webhook"
)

// Config is ingest's own configuration.
type Config struct {
	ListenAddr     string
	WebhookPath    string
	SecretFile     string
	SecretReload   time.Duration
	StoreTimeout   time.Duration
	BodyBudgetMiB  int
	ReadTimeout    time.Duration
	MaxConnections int
	GroupCommit    bool
	// Filter drops deliveries that can never matter (eventdoc.Filter) before anything is written.
	Filter bool
	// ContentType is the GitHub App's webhook content type, "json" or "form".
	ContentType string
	// MinBodyRateKiB is the slowest body transfer accepted, in KiB/s.
	MinBodyRateKiB int
	// IdleTimeout closes a keep-alive connection that sent no request for this long.
	IdleTimeout time.Duration

	contentType webhook.ContentType
}

func (c *Config) register(e *config.Env) {
	e.String(&c.ListenAddr, "listen-addr", "LISTEN_ADDR", ":8080", "address of the webhook endpoint")
	e.String(&c.WebhookPath, "webhook-path", "BOARDREADYOPS_WEBHOOK_PATH", "/webhook", "path of the webhook endpoint")
	e.String(&c.SecretFile, "webhook-secret-file", "BOARDREADYOPS_WEBHOOK_SECRET_FILE", "",
		"file with the webhook secrets, one per line (rotation: list old and new)")
	e.Duration(&c.SecretReload, "webhook-secret-reload", "BOARDREADYOPS_WEBHOOK_SECRET_RELOAD", 30*time.Second,
		"how often the secrets file is re-read")
	e.Duration(&c.StoreTimeout, "store-timeout", "BOARDREADYOPS_INGEST_STORE_TIMEOUT", 5*time.Second,
		"bound on the database write of one delivery; past it the delivery is answered 503")
	e.Int(&c.BodyBudgetMiB, "body-budget-mib", "BOARDREADYOPS_INGEST_BODY_BUDGET_MIB", 256,
		"request body bytes held in memory at once, across requests (MiB, at least 25)")
	e.Duration(&c.ReadTimeout, "read-timeout", "BOARDREADYOPS_INGEST_READ_TIMEOUT", 30*time.Second,
		"time a client has to send a whole request (slow clients are cut off)")
	e.Int(&c.MaxConnections, "max-connections", "BOARDREADYOPS_INGEST_MAX_CONNECTIONS", 1024,
		"concurrent client connections; further ones wait in the kernel's accept queue")
	e.String(&c.ContentType, "webhook-content-type", "BOARDREADYOPS_WEBHOOK_CONTENT_TYPE", "json",
		"the GitHub App's webhook content type, json or form; the other is refused (415)")
	e.Int(&c.MinBodyRateKiB, "min-body-rate-kib", "BOARDREADYOPS_INGEST_MIN_BODY_RATE_KIB", 64,
		"slowest request body transfer accepted (KiB/s, after a 2 s grace); slower clients are cut off (408)")
	e.Duration(&c.IdleTimeout, "idle-timeout", "BOARDREADYOPS_INGEST_IDLE_TIMEOUT", 5*time.Second,
		"how long an idle keep-alive connection is kept; near the connection cap idle ones are closed first")
	e.Bool(&c.Filter, "webhook-filter", "BOARDREADYOPS_WEBHOOK_FILTER", true,
		"answer deliveries that can never matter (branch pushes, workflow runs not dispatched, unused actions) 202 without storing them")
	e.Bool(&c.GroupCommit, "group-commit", "BOARDREADYOPS_INGEST_GROUP_COMMIT", true,
		"commit concurrent deliveries in one transaction (each is still answered only after it committed)")
}

func (c *Config) validate() error {
	var errs []error
	if c.SecretFile == "" {
		errs = append(errs, errors.New("BOARDREADYOPS_WEBHOOK_SECRET_FILE (or --webhook-secret-file) is required"))
	}
	if !strings.HasPrefix(c.WebhookPath, "/") {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_WEBHOOK_PATH %q must start with /", c.WebhookPath))
	}
	if c.StoreTimeout <= 0 || c.StoreTimeout > 9*time.Second {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_INGEST_STORE_TIMEOUT %v: want more than 0 and at most 9s (GitHub waits 10s)", c.StoreTimeout))
	}
	if c.BodyBudgetMiB < 25 {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_INGEST_BODY_BUDGET_MIB %d: want at least 25 (one maximal delivery)", c.BodyBudgetMiB))
	}
	if c.SecretReload < time.Second {
		errs = append(errs, errors.New("BOARDREADYOPS_WEBHOOK_SECRET_RELOAD must be at least 1s"))
	}
	if c.ReadTimeout < time.Second {
		errs = append(errs, errors.New("BOARDREADYOPS_INGEST_READ_TIMEOUT must be at least 1s"))
	}
	if c.MaxConnections < 1 {
		errs = append(errs, errors.New("BOARDREADYOPS_INGEST_MAX_CONNECTIONS must be positive"))
	}
	var err error
	if c.contentType, err = webhook.ParseContentType(c.ContentType); err != nil {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_WEBHOOK_CONTENT_TYPE: %w", err))
	}
	if c.MinBodyRateKiB < 1 || c.MinBodyRateKiB > 1<<20 {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_INGEST_MIN_BODY_RATE_KIB %d: want 1 to 1048576", c.MinBodyRateKiB))
	}
	if c.IdleTimeout < 100*time.Millisecond || c.IdleTimeout > 2*time.Minute {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_INGEST_IDLE_TIMEOUT %v: want 100ms to 2m", c.IdleTimeout))
	}
	return errors.Join(errs...)
}

// Run runs the ingest service until ctx ends.
func Run(ctx context.Context, args []string, getenv config.Getenv, stderr io.Writer) error {
	var c Config
	var stored storeClock
	return daemon.Run(ctx, daemon.Spec{
		Name:     "ingest",
		Flags:    c.register,
		Validate: c.validate,
		Work:     func(ctx context.Context, b *daemon.Base) error { return serve(ctx, b, c, &stored) },
		// A slow database or a pool busy with a burst must not take every replica out of the
		// Service at once while deliveries are still stored (each is bounded by the store timeout
		// and answered 503 if late); a replica that stores nothing any more is taken out.
		SlowIsReady: stored.recent,
	}, args, getenv, stderr)
}

// slowReadyWindow: a replica whose readiness check times out stays ready while it stored a
// delivery this recently.
const slowReadyWindow = 30 * time.Second

// storeClock is when the replica last stored a delivery.
type storeClock struct{ last atomic.Int64 } // Unix nanoseconds

func (s *storeClock) mark() { s.last.Store(time.Now().UnixNano()) }

// recent reports whether a delivery was stored within slowReadyWindow.
func (s *storeClock) recent() bool {
	last := s.last.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < slowReadyWindow
}

func serve(ctx context.Context, b *daemon.Base, c Config, stored *storeClock) error {
	sec, err := secrets.Load(c.SecretFile)
	if err != nil {
		return err
	}
	reloadErrors := promauto.With(b.Registry).NewCounter(prometheus.CounterOpts{
		Name: "boardreadyops_ingest_secret_reload_errors_total",
		Help: "Failed re-reads of the webhook secrets file (the previous secrets stay in use).",
	})
	go sec.Watch(ctx, c.SecretReload, b.Logger, reloadErrors.Inc)

	// Wake lifecycle workers after each commit; coalesced, at most one NOTIFY per 10 ms.
	wake := notify.New(b.Pool, notify.Jobs, 10*time.Millisecond, b.Logger)
	go wake.Run(ctx)

	tp := b.Traces

	st := &store.Store{DB: b.Pool, Reset: b.Pool.Reset}
	groupDone := make(chan struct{})
	quitGroup := make(chan struct{})
	if c.GroupCommit {
		st.Group = groupcommit.New(b.Pool, b.Logger, 64, c.StoreTimeout)
		go func() { defer close(groupDone); st.Group.Run(quitGroup) }()
	} else {
		close(groupDone)
	}
	// After the HTTP server has drained: let the committer finish what is queued, then stop.
	defer func() { close(quitGroup); <-groupDone }()

	handler := webhook.NewHandler(webhook.Options{
		Secrets:      sec.Secrets,
		Store:        st,
		Metrics:      webhook.NewMetrics(b.Registry),
		Tracer:       tp.Tracer("github.com/boardreadyops/cloud/services/ingest"),
		Logger:       b.Logger,
		StoreTimeout: c.StoreTimeout,
		BodyBudget:   int64(c.BodyBudgetMiB) << 20,
		MinBodyRate:  int64(c.MinBodyRateKiB) << 10,
		ReadTimeout:  c.ReadTimeout,
		ContentType:  c.contentType,
		KeepUnused:   !c.Filter,
		OnAccepted:   func() { stored.mark(); wake.Signal() },
	})
	mux := http.NewServeMux()
	mux.Handle(c.WebhookPath, handler)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.ReadTimeout + c.StoreTimeout + 5*time.Second,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
	l, err := net.Listen("tcp", c.ListenAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.ListenAddr, err)
	}
	limited := limitListener(l, c.MaxConnections)
	srv.ConnState = limited.track
	l = limited
	b.Logger.Info("webhook endpoint listening", "addr", l.Addr().String(), "path", c.WebhookPath, "secrets", sec.Count())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve webhooks: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), b.ShutdownTimeout())
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shut down webhook endpoint: %w", err)
	}
	return nil
}
