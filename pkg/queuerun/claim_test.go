package queuerun_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/boardreadyops/cloud/pkg/jobs"
	"github.com/boardreadyops/cloud/pkg/queuerun"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

type countObserver struct{ n atomic.Int64 }

func (c *countObserver) Observe(float64) { c.n.Add(1) }

func newJobClaimer(t *testing.T, cfg queuerun.ClaimConfig[jobs.Job]) *queuerun.Claimer[jobs.Job] {
	t.Helper()
	cfg.SpanName = "test.claim"
	cfg.Traceparent = func(j jobs.Job) *string { return j.Traceparent }
	c, err := queuerun.NewClaimer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A claim that starts as shutdown begins still reaches the database and returns what it
// leased: had it been cancelled, the server could have committed the lease anyway and the jobs
// would wait for its expiry.
func TestClaimIsNotCancelledByShutdown(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	queuerun.InsertJobs(t, pool, 3, time.Now().Add(-time.Second))
	store := &jobs.Store{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // shutdown has begun

	if _, err := store.Claim(ctx, pool, "plain", 10, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("a claim on the cancelled context: %v, want context.Canceled (the case the claimer exists for)", err)
	}
	var deadline bool
	c := newJobClaimer(t, queuerun.ClaimConfig[jobs.Job]{})
	batch, err := c.Claim(ctx, func(ctx context.Context) ([]jobs.Job, error) {
		_, deadline = ctx.Deadline()
		return store.Claim(ctx, pool, "lease-safe", 10, time.Minute)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(batch) != 3 {
		t.Fatalf("claimed %d jobs, want 3", len(batch))
	}
	if !deadline {
		t.Fatal("the claim ran without a deadline")
	}
	var leased int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM control_plane_jobs WHERE status = 'leased' AND lease_owner = 'lease-safe'`).Scan(&leased); err != nil {
		t.Fatal(err)
	}
	if leased != 3 {
		t.Fatalf("%d jobs leased in the database, want 3", leased)
	}
}

// Every claim is timed; a claim that returned items is one span linked to the items' traces.
func TestClaimSpanAndDuration(t *testing.T) {
	t.Parallel()
	const (
		tp1 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		tp2 = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	)
	str := func(s string) *string { return &s }
	tests := []struct {
		name      string
		batch     []jobs.Job
		err       error
		wantSpans int
		wantLinks int
	}{
		{"items with and without a trace", []jobs.Job{{ID: 1, Traceparent: str(tp1)}, {ID: 2}, {ID: 3, Traceparent: str(tp2)}}, nil, 1, 2},
		{"nothing claimed: no span", nil, nil, 0, 0},
		{"failed claim: no span", nil, errors.New("connection refused"), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			var obs countObserver
			c := newJobClaimer(t, queuerun.ClaimConfig[jobs.Job]{Tracer: tp.Tracer("test"), Duration: &obs})
			batch, err := c.Claim(context.Background(), func(context.Context) ([]jobs.Job, error) { return tt.batch, tt.err })
			if !errors.Is(err, tt.err) || len(batch) != len(tt.batch) {
				t.Fatalf("Claim = %d items, %v; want the claim's own result", len(batch), err)
			}
			if obs.n.Load() != 1 {
				t.Fatalf("%d durations observed, want 1", obs.n.Load())
			}
			spans := rec.Ended()
			if len(spans) != tt.wantSpans {
				t.Fatalf("%d spans, want %d", len(spans), tt.wantSpans)
			}
			if tt.wantSpans == 0 {
				return
			}
			s := spans[0]
			if s.Name() != "test.claim" || len(s.Links()) != tt.wantLinks {
				t.Fatalf("span %q with %d links, want test.claim with %d", s.Name(), len(s.Links()), tt.wantLinks)
			}
			if got := s.Links()[0].SpanContext.TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
				t.Fatalf("first link to trace %s", got)
			}
			for _, a := range s.Attributes() {
				if a.Key == attribute.Key("boardreadyops.batch_size") && a.Value.AsInt64() != int64(len(tt.batch)) {
					t.Fatalf("batch_size %d, want %d", a.Value.AsInt64(), len(tt.batch))
				}
			}
		})
	}
}

func TestNewClaimerValidates(t *testing.T) {
	t.Parallel()
	tp := func(j jobs.Job) *string { return j.Traceparent }
	tests := []struct {
		name string
		cfg  queuerun.ClaimConfig[jobs.Job]
		ok   bool
	}{
		{"defaults fill the rest", queuerun.ClaimConfig[jobs.Job]{SpanName: "x.claim", Traceparent: tp}, true},
		{"no span name", queuerun.ClaimConfig[jobs.Job]{Traceparent: tp}, false},
		{"no traceparent", queuerun.ClaimConfig[jobs.Job]{SpanName: "x.claim"}, false},
		{"negative timeout", queuerun.ClaimConfig[jobs.Job]{SpanName: "x.claim", Traceparent: tp, Timeout: -time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := queuerun.NewClaimer(tt.cfg)
			if (err == nil) != tt.ok {
				t.Fatalf("NewClaimer: %v, want ok=%v", err, tt.ok)
			}
			if tt.ok {
				// Nil tracer and observer are usable.
				if _, err := c.Claim(context.Background(), func(context.Context) ([]jobs.Job, error) { return []jobs.Job{{ID: 1}}, nil }); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
