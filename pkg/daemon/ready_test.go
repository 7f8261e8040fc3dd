package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The readiness gauge follows every check, the background one included; a change of state is
// logged once, not on every probe nor for every new error; a check whose caller went away changes nothing.
func TestReadinessGauge(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var failing error
	r := newReadiness(prometheus.NewRegistry(), func(context.Context) error { return failing },
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
