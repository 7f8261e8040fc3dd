package queuerun

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/boardreadyops/cloud/pkg/telemetry"
)

// DefaultClaimTimeout bounds one claim when ClaimConfig.Timeout is zero.
const DefaultClaimTimeout = 30 * time.Second

// ClaimConfig describes the claim of one queue whose items are T.
type ClaimConfig[T any] struct {
	// SpanName names the span recorded for every claim that returned items ("lifecycle.claim",
	// "outbox.claim"). Required.
	SpanName string
	// Traceparent returns an item's W3C traceparent, or nil when it has none; the claim span
	// links to each item's trace. Required.
	Traceparent func(T) *string
	// Tracer records the claim span; nil records none.
	Tracer trace.Tracer
	// Duration observes every claim's latency in seconds, failed and empty claims included;
	// nil observes nothing.
	Duration prometheus.Observer
	// Timeout bounds one claim, which the caller's context no longer can (see Claim); zero
	// means DefaultClaimTimeout.
	Timeout time.Duration
}

// Claimer runs a queue's claims lease-safely, times them and records their spans.
type Claimer[T any] struct {
	cfg ClaimConfig[T]
}

// NewClaimer validates cfg and fills in its defaults.
func NewClaimer[T any](cfg ClaimConfig[T]) (*Claimer[T], error) {
	var errs []error
	if cfg.SpanName == "" {
		errs = append(errs, errors.New("queuerun: ClaimConfig.SpanName is required"))
	}
	if cfg.Traceparent == nil {
		errs = append(errs, errors.New("queuerun: ClaimConfig.Traceparent is required"))
	}
	if cfg.Timeout < 0 {
		errs = append(errs, errors.New("queuerun: ClaimConfig.Timeout must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultClaimTimeout
	}
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if cfg.Duration == nil {
		cfg.Duration = discard{}
	}
	return &Claimer[T]{cfg: cfg}, nil
}

// Claim runs claim and returns what it claimed. Shutdown (ctx ending) does not cancel a claim
// in flight: the server could commit it while the client sees a cancellation, stranding the
// claimed rows until their leases expire. The claim keeps ctx's values and is bounded by the
// configured timeout instead.
func (c *Claimer[T]) Claim(ctx context.Context, claim func(ctx context.Context) ([]T, error)) ([]T, error) {
	start := time.Now()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Timeout)
	batch, err := claim(cctx)
	cancel()
	end := time.Now()
	c.cfg.Duration.Observe(end.Sub(start).Seconds())
	if err == nil && len(batch) > 0 {
		telemetry.ClaimSpan(c.cfg.Tracer, c.cfg.SpanName, start, end, batch, c.cfg.Traceparent)
	}
	return batch, err
}

type discard struct{}

func (discard) Observe(float64) {}
