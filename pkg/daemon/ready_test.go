package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/boardreadyops/cloud/pkg/database"
)

// The readiness gauge follows every check, the background one included; a change of state is
// logged once, not on every probe nor for every new error; a check whose caller went away changes nothing.
func TestReadinessGauge(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var failing error
	r := newReadiness(prometheus.NewRegistry(), func(context.Context) error { return failing }, nil,
		slog.New(slog.NewTextHandler(&logs, nil)))
	steps := []struct {
		err       error
		wantGauge float64
	}{
		{nil, 1},
		{errors.New("read schema version: connection refused"), 0},
		{errors.New("read schema version: connection refused"), 0},
		{errors.New("database is read-only"), 0},
		{nil, 1},
		{nil, 1},
	}
	for i, s := range steps {
		failing = s.err
		if err := r.check(context.Background()); !errors.Is(err, s.err) {
			t.Fatalf("step %d: check returned %v, want %v", i, err, s.err)
		}
		if got := testutil.ToFloat64(r.gauge); got != s.wantGauge {
			t.Fatalf("step %d: boardreadyops_ready %v, want %v", i, got, s.wantGauge)
		}
	}
	if n := strings.Count(logs.String(), "not ready"); n != 1 {
		t.Errorf("%d 'not ready' lines, want 1 (one per change of state):\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "ready again"); n != 1 {
		t.Errorf("%d 'ready again' lines, want 1:\n%s", n, logs.String())
	}

	// A probe that went away mid-check: the gauge keeps what it knew.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	failing = context.Canceled
	_ = r.check(ctx)
	if got := testutil.ToFloat64(r.gauge); got != 1 {
		t.Fatalf("a cancelled check set boardreadyops_ready to %v", got)
	}

	// The background watch checks without any probe.
	failing = errors.New("database unreachable")
	wctx, stop := context.WithCancel(context.Background())
	defer stop()
	go r.watch(wctx, time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(r.gauge) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the background check did not run")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A check that runs out of time: not ready by default; with slowIsReady (ingest) ready while it
// reports the service's work succeeding, logged once as slow. A definite failure, one that only
// arrived late (read-only, schema behind), or a replica whose work fails too, is not ready.
func TestReadinessWhenSlow(t *testing.T) {
	t.Parallel()
	late := func(err error) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			<-ctx.Done()
			return err
		}
	}
	slow := late(errors.New("read schema version: timeout: context deadline exceeded"))
	readOnlyLate := late(fmt.Errorf("%w", database.ErrReadOnly))
	refused := func(context.Context) error { return errors.New("read schema version: connection refused") }
	ok := func(context.Context) error { return nil }
	working, cutOff := func() bool { return true }, func() bool { return false }
	type step struct {
		check     func(context.Context) error
		wantErr   bool
		wantGauge float64
	}
	tests := []struct {
		name        string
		slowIsReady func() bool
		steps       []step
		wantLogs    map[string]int
	}{
		{"not ready when slow by default", nil, []step{{ok, false, 1}, {slow, true, 0}, {slow, true, 0}, {ok, false, 1}},
			map[string]int{"not ready": 1, "staying ready": 0, "ready again": 1}},
		{"ready when slow while the work succeeds", working, []step{{ok, false, 1}, {slow, false, 1}, {slow, false, 1}, {ok, false, 1}},
			map[string]int{"not ready": 0, "staying ready": 1, "ready again": 1}},
		{"not ready when slow and the work fails", cutOff, []step{{ok, false, 1}, {slow, true, 0}},
			map[string]int{"not ready": 1, "staying ready": 0}},
		{"a definite failure still counts", working, []step{{slow, false, 1}, {refused, true, 0}, {slow, false, 1}, {refused, true, 0}},
			map[string]int{"not ready": 2, "staying ready": 2, "ready again": 0}},
		{"a definite answer arriving late is not slow", working, []step{{ok, false, 1}, {readOnlyLate, true, 0}},
			map[string]int{"not ready": 1, "staying ready": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			var current func(context.Context) error
			r := newReadiness(prometheus.NewRegistry(), func(ctx context.Context) error { return current(ctx) }, tt.slowIsReady,
				slog.New(slog.NewTextHandler(&logs, nil)))
			for i, s := range tt.steps {
				current = s.check
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				err := r.check(ctx)
				cancel()
				if (err != nil) != s.wantErr {
					t.Fatalf("step %d: check returned %v, want an error: %v", i, err, s.wantErr)
				}
				if got := testutil.ToFloat64(r.gauge); got != s.wantGauge {
					t.Fatalf("step %d: boardreadyops_ready %v, want %v", i, got, s.wantGauge)
				}
			}
			for line, want := range tt.wantLogs {
				if n := strings.Count(logs.String(), line); n != want {
					t.Errorf("%d %q lines, want %d:\n%s", n, line, want, logs.String())
				}
			}
		})
	}
}
