package queuerun

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// testUpkeep runs one task on fake timers with a fixed random number. Its logs are read once Run
// has returned (the task goroutine that writes them has ended).
func testUpkeep(t *testing.T, task Task, r float64) (*Upkeep, *fakeTimers, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	u, err := NewUpkeep(slog.New(slog.NewTextHandler(&logs, nil)), task)
	if err != nil {
		t.Fatal(err)
	}
	timers := newFakeTimers()
	u.timer, u.rand = timers.timer, func() float64 { return r }
	return u, timers, &logs
}

// The task waits its jittered interval between runs (and first, unless Immediately), carries on
// after a failure, which it logs, and Run leaves no goroutine behind. Not parallel: the leak
// check sees every goroutine of the test binary.
func TestUpkeepRunsTasksOnJitteredIntervals(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	tests := []struct {
		name        string
		immediately bool
		jitter      float64
		r           float64
		wantWait    time.Duration
	}{
		{"default jitter, lowest draw", false, 0, 0, 9 * time.Second},
		{"default jitter, highest draw", false, 0, 1, 11 * time.Second},
		{"own jitter", false, 0.5, 0, 5 * time.Second},
		{"middle draw: the interval itself", true, 0.3, 0.5, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs := make(chan int, 8)
			n := 0
			task := Task{Name: "count things", Interval: 10 * time.Second, Jitter: tt.jitter, Immediately: tt.immediately,
				Run: func(context.Context) error {
					n++
					defer func() { runs <- n }()
					if n == 2 {
						return errors.New("database unreachable")
					}
					return nil
				}}
			u, timers, logs := testUpkeep(t, task, tt.r)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { u.Run(ctx); close(done) }()

			next := 1
			if tt.immediately {
				if got := <-runs; got != 1 {
					t.Fatalf("run %d first, want 1", got)
				}
				next = 2
			}
			for ; next <= 3; next++ {
				timer := <-timers.started
				if timer.d != tt.wantWait {
					t.Fatalf("waits %v before run %d, want %v", timer.d, next, tt.wantWait)
				}
				select {
				case got := <-runs:
					t.Fatalf("run %d before its timer fired", got)
				default:
				}
				timer.fire <- time.Now()
				if got := <-runs; got != next {
					t.Fatalf("run %d, want %d", got, next)
				}
			}
			<-timers.started // waiting for run 4
			cancel()
			<-done
			if out := logs.String(); strings.Count(out, "count things failed") != 1 || !strings.Contains(out, "database unreachable") {
				t.Fatalf("logs %q: want the one failure, with its error", out)
			}
		})
	}
}

// A run cut short by shutdown is not reported as a failure.
func TestUpkeepDoesNotLogFailuresAfterShutdown(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	task := Task{Name: "recover leases", Interval: time.Second, Immediately: true, Run: func(ctx context.Context) error {
		cancel()
		return ctx.Err()
	}}
	u, _, logs := testUpkeep(t, task, 0.5)
	u.Run(ctx)
	if out := logs.String(); out != "" {
		t.Fatalf("logged %q after shutdown", out)
	}
}

func TestNewUpkeepValidatesTasks(t *testing.T) {
	t.Parallel()
	run := func(context.Context) error { return nil }
	tests := []struct {
		name string
		task Task
		ok   bool
	}{
		{"complete", Task{Name: "x", Interval: time.Second, Run: run}, true},
		{"full jitter", Task{Name: "x", Interval: time.Second, Jitter: 1, Run: run}, true},
		{"no name", Task{Interval: time.Second, Run: run}, false},
		{"no interval", Task{Name: "x", Run: run}, false},
		{"negative interval", Task{Name: "x", Interval: -time.Second, Run: run}, false},
		{"no function", Task{Name: "x", Interval: time.Second}, false},
		{"jitter above 1", Task{Name: "x", Interval: time.Second, Jitter: 1.5, Run: run}, false},
		{"negative jitter", Task{Name: "x", Interval: time.Second, Jitter: -0.1, Run: run}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := NewUpkeep(slog.New(slog.DiscardHandler), tt.task); (err == nil) != tt.ok {
				t.Fatalf("NewUpkeep: %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
