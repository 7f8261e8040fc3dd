package opsserver_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/boardreadyops/cloud/pkg/opsserver"
)

func TestEndpoints(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	promauto.With(reg).NewCounter(prometheus.CounterOpts{Name: "boardreadyops_test_things_total", Help: "Things."}).Inc()
	var notReady atomic.Pointer[error]
	srv, err := opsserver.New("127.0.0.1:0", reg, func(context.Context) error {
		if p := notReady.Load(); p != nil {
			return *p
		}
		return nil
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, 5*time.Second) }()

	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + srv.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		path     string
		notReady error
		code     int
		contains string
	}{
		{"/healthz", nil, 200, "ok"},
		{"/readyz", nil, 200, "ok"},
		{"/readyz", errors.New("database schema is older than this binary expects"), 503, "schema is older"},
		{"/healthz", errors.New("still not ready"), 200, "ok"}, // liveness ignores readiness
		{"/metrics", nil, 200, "boardreadyops_test_things_total 1"},
	}
	for _, tt := range tests {
		if tt.notReady != nil {
			notReady.Store(&tt.notReady)
		} else {
			notReady.Store(nil)
		}
		code, body := get(tt.path)
		if code != tt.code || !strings.Contains(body, tt.contains) {
			t.Errorf("GET %s (not ready: %v) = %d %q, want %d containing %q", tt.path, tt.notReady, code, body, tt.code, tt.contains)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}
