package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/semaphore"

	"github.com/boardreadyops/cloud/pkg/telemetry"
)

// MaxBody is GitHub's own cap on a webhook payload (25 MiB); anything larger is refused.
const MaxBody = 25 << 20

// Outcome is what the store did with a delivery.
type Outcome struct {
	InboxID   int64
	JobID     int64
	Duplicate bool
}

// Store writes a delivery's inbox row and job in one transaction.
type Store interface {
	Accept(ctx context.Context, d Delivery, traceparent string) (Outcome, error)
}

// Options configure a Handler.
type Options struct {
	// Secrets returns the current webhook secrets (rotation: all are tried).
	Secrets func() [][]byte
	Store   Store
	Metrics *Metrics
	Tracer  trace.Tracer
	Logger  *slog.Logger
	// StoreTimeout bounds the database write; past it the delivery is answered 503 so that GitHub
	// (or brops webhooks redeliver) can deliver it again. Keep it well under GitHub's 10 s.
	StoreTimeout time.Duration
	// BodyBudget bounds the bytes of request bodies held in memory at once, across requests.
	BodyBudget int64
	// OnAccepted, when set, is called after a new delivery was committed (to wake lifecycle).
	OnAccepted func()
}

// Handler serves POST /webhook.
type Handler struct {
	opts   Options
	budget *semaphore.Weighted
}

// NewHandler builds the webhook handler.
func NewHandler(opts Options) *Handler {
	if opts.BodyBudget < MaxBody {
		opts.BodyBudget = MaxBody
	}
	return &Handler{opts: opts, budget: semaphore.NewWeighted(opts.BodyBudget)}
}

type response struct {
	Status     string `json:"status"`
	DeliveryID string `json:"delivery_id,omitempty"`
	Message    string `json:"message,omitempty"`
}

// budgetWait is how long a request waits for body memory before it is answered 503.
const budgetWait = time.Second

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h.opts.Metrics.inFlight.Inc()
	defer h.opts.Metrics.inFlight.Dec()
	ctx, span := h.opts.Tracer.Start(r.Context(), "webhook.receive", trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	event := r.Header.Get("X-GitHub-Event")

	finish := func(status int, result string, body response, extra ...func(http.Header)) {
		for _, f := range extra {
			f(w.Header())
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
		h.opts.Metrics.observe(ctx, event, result, time.Since(start).Seconds())
		span.SetAttributes(attribute.String("boardreadyops.result", result), attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, result)
		}
	}
	reject := func(rej *Rejection, extra ...func(http.Header)) {
		finish(rej.Status, rej.Reason, response{Status: "rejected", Message: rej.Message}, extra...)
	}

	if r.Method != http.MethodPost {
		reject(&Rejection{http.StatusMethodNotAllowed, ResultRejectedMethod, "use POST"},
			func(hd http.Header) { hd.Set("Allow", http.MethodPost) })
		return
	}
	if r.ContentLength > MaxBody {
		reject(&Rejection{http.StatusRequestEntityTooLarge, ResultRejectedTooLarge, "payload larger than 25 MiB"})
		return
	}
	weight := int64(MaxBody) // unknown length: reserve the cap
	if r.ContentLength >= 0 {
		weight = max(r.ContentLength, 1)
	}
	wctx, cancel := context.WithTimeout(ctx, budgetWait)
	err := h.budget.Acquire(wctx, weight)
	cancel()
	if err != nil {
		reject(&Rejection{http.StatusServiceUnavailable, ResultOverloaded, "too many large deliveries in flight; retry"}, retryAfter(1))
		return
	}
	defer h.budget.Release(weight)

	body, err := readBody(w, r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			reject(&Rejection{http.StatusRequestEntityTooLarge, ResultRejectedTooLarge, "payload larger than 25 MiB"})
			return
		}
		reject(&Rejection{http.StatusBadRequest, ResultRejectedPayload, "could not read the request body"})
		return
	}

	d, rej := Parse(r.Header, body, h.opts.Secrets())
	if rej != nil {
		reject(rej)
		return
	}
	span.SetAttributes(attribute.String("github.delivery_id", d.ID), attribute.String("github.event", d.Event))
	if d.Ignored {
		finish(http.StatusAccepted, ResultIgnored, response{Status: ResultIgnored, DeliveryID: d.ID})
		return
	}
	span.SetAttributes(attribute.String("github.action", d.Action), attribute.Int64("github.installation_id", d.InstallationID),
		attribute.Int64("github.repository_id", d.RepositoryID))

	sctx, cancel := context.WithTimeout(ctx, h.opts.StoreTimeout)
	defer cancel()
	sctx, storeSpan := h.opts.Tracer.Start(sctx, "ingest.accept")
	out, err := h.opts.Store.Accept(sctx, d, telemetry.Traceparent(ctx))
	if err != nil {
		storeSpan.RecordError(err)
		storeSpan.SetStatus(codes.Error, "store")
	}
	storeSpan.End()
	if err != nil {
		h.opts.Logger.Error("delivery not stored; answering 503 so it is delivered again",
			"delivery_id", d.ID, "event", d.Event, "error", err, "trace_id", telemetry.TraceID(ctx))
		finish(http.StatusServiceUnavailable, ResultUnavailable,
			response{Status: ResultUnavailable, DeliveryID: d.ID, Message: "database unavailable; retry"}, retryAfter(5))
		return
	}
	if out.Duplicate {
		finish(http.StatusOK, ResultDuplicate, response{Status: ResultDuplicate, DeliveryID: d.ID})
		return
	}
	if h.opts.OnAccepted != nil {
		h.opts.OnAccepted()
	}
	finish(http.StatusAccepted, ResultAccepted, response{Status: ResultAccepted, DeliveryID: d.ID})
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	_, err := io.Copy(&buf, http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	return buf.Bytes(), nil
}

func retryAfter(seconds int) func(http.Header) {
	return func(h http.Header) { h.Set("Retry-After", strconv.Itoa(seconds)) }
}
