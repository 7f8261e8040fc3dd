// Package opsserver serves a service's operational endpoints on their own port, apart from any
// traffic port: /healthz (the process is up), /readyz (it can do its work: database reachable and
// migrated) and /metrics (Prometheus, from an injected registry).
package opsserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ReadyFunc reports why the service is not ready, or nil.
type ReadyFunc func(ctx context.Context) error

// Server is the operational HTTP server.
type Server struct {
	srv      *http.Server
	listener net.Listener
	logger   *slog.Logger
}

// ReadyTimeout bounds one readiness check so a hung database makes /readyz fail, not hang (the
// services' background checks use it too).
const ReadyTimeout = 2 * time.Second

// New listens on addr (":0" picks a free port) and prepares the handlers. The registry is
// gathered on each scrape; ready is called on each /readyz.
func New(addr string, gatherer prometheus.Gatherer, ready ReadyFunc, logger *slog.Logger) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on metrics address %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), ReadyTimeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := ready(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{
		EnableOpenMetrics: true, // exemplars (trace ids) need the OpenMetrics format
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelError),
		ErrorHandling:     promhttp.ContinueOnError,
		Timeout:           10 * time.Second,
	}))
	return &Server{
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      15 * time.Second,
			IdleTimeout:       60 * time.Second,
			MaxHeaderBytes:    16 << 10,
		},
		listener: l,
		logger:   logger,
	}, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Serve serves until ctx ends, then shuts down within shutdownTimeout.
func (s *Server) Serve(ctx context.Context, shutdownTimeout time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.listener) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve operational endpoints: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shut down operational endpoints: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve operational endpoints: %w", err)
	}
	return nil
}
