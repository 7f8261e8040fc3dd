package webhook

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/boardreadyops/cloud/pkg/telemetry"
)

// MaxBody is GitHub's own cap on a webhook payload (25 MiB); anything larger is refused.
const MaxBody = 25 << 20

// Outcome is what the store did with a delivery.
type Outcome struct {
	InboxID int64
	JobID   int64
	// Duplicate: nothing was written (a known delivery id, or Replayed).
	Duplicate bool
	// Replayed: the body is known under another delivery id — a captured body resent, since
	// GitHub's own redeliveries keep their delivery id.
	Replayed bool
}

// ErrUnstorable marks a Store error that no retry can change: the database's row rules refuse the
// delivery's document (a check violation or a data exception), so every redelivery would fail
// the same way.
var ErrUnstorable = errors.New("the database's row rules refuse the delivery")

// Store writes a delivery's inbox row and job in one transaction.
type Store interface {
	Accept(ctx context.Context, d Delivery, traceparent string) (Outcome, error)
	// Ignore records the body digest of a delivery that is not stored.
	Ignore(ctx context.Context, d Delivery) (Outcome, error)
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
	// BodyBudget bounds the memory of request bodies held at once, across requests: what is
	// allocated as bytes arrive, never what Content-Length announces.
	BodyBudget int64
	// MinBodyRate is the slowest a client may send its body (bytes per second), after a 2 s grace;
	// a client that sends nothing for 2 s is cut off too. Zero means 64 KiB/s.
	MinBodyRate int64
	// ReadTimeout is the server's bound on a whole request; body reads never wait past it.
	ReadTimeout time.Duration
	// ContentType is the one payload encoding accepted (the GitHub App's setting); zero means JSON.
	ContentType ContentType
	// KeepUnused turns the delivery filter off: deliveries eventdoc.Filter drops are stored like
	// any other (for comparison runs, or if a rule ever proves wrong).
	KeepUnused bool
	// OnAccepted, when set, is called after a new delivery was committed (to wake lifecycle).
	OnAccepted func()
}

// Handler serves POST /webhook.
type Handler struct {
	opts   Options
	budget *bodyBudget
}

// NewHandler builds the webhook handler.
func NewHandler(opts Options) *Handler {
	if opts.BodyBudget < MaxBody {
		opts.BodyBudget = MaxBody
	}
	if opts.MinBodyRate <= 0 {
		opts.MinBodyRate = DefaultMinBodyRate
	}
	return &Handler{opts: opts, budget: newBodyBudget(opts.BodyBudget)}
}

type response struct {
	Status     string `json:"status"`
	DeliveryID string `json:"delivery_id,omitempty"`
	Message    string `json:"message,omitempty"`
}

// DefaultMinBodyRate is the minimum body transfer rate when none is configured (64 KiB/s).
const DefaultMinBodyRate = 64 << 10

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
	br := &bodyReader{budget: h.budget, minRate: h.opts.MinBodyRate}
	if h.opts.ReadTimeout > 0 {
		br.deadline = start.Add(h.opts.ReadTimeout)
	}
	body, err := br.read(ctx, w, r)
	defer br.release()
	if err != nil {
		switch {
		case errors.Is(err, errTooLarge):
			reject(&Rejection{http.StatusRequestEntityTooLarge, ResultRejectedTooLarge, "payload larger than 25 MiB"})
		case errors.Is(err, errNoBudget):
			reject(&Rejection{http.StatusServiceUnavailable, ResultOverloaded, "too many large deliveries in flight; retry"}, retryAfter(1))
		case errors.Is(err, errTooSlow):
			reject(&Rejection{http.StatusRequestTimeout, ResultRejectedSlow, "request body sent too slowly"})
		default:
			reject(&Rejection{http.StatusBadRequest, ResultRejectedPayload, "could not read the request body"})
		}
		return
	}

	d, rej := Parse(r.Header, body, h.opts.Secrets(), h.opts.ContentType)
	// The raw body is not needed past here (the document is its own copy): give its memory back
	// before waiting for the database.
	br.release()
	if rej != nil {
		reject(rej)
		return
	}
	span.SetAttributes(attribute.String("github.delivery_id", d.ID), attribute.String("github.event", d.Event))
	span.SetAttributes(attribute.String("github.action", d.Action), attribute.Int64("github.installation_id", d.InstallationID),
		attribute.Int64("github.repository_id", d.RepositoryID))

	if d.Filtered != "" && !h.opts.KeepUnused {
		// Nothing is written, not even the body digest: a filtered body is filtered again under
		// any delivery id, and the per-event shapes keep it from passing as another event, so a
		// replay of it can never be stored either.
		h.opts.Metrics.filtered.WithLabelValues(d.Event, d.Filtered).Inc()
		span.SetAttributes(attribute.String("boardreadyops.filter_reason", d.Filtered))
		finish(http.StatusAccepted, ResultFiltered, response{Status: ResultFiltered, DeliveryID: d.ID})
		return
	}

	sctx, cancel := context.WithTimeout(ctx, h.opts.StoreTimeout)
	defer cancel()
	sctx, storeSpan := h.opts.Tracer.Start(sctx, "ingest.accept")
	var out Outcome
	if d.Ignored {
		out, err = h.opts.Store.Ignore(sctx, d)
	} else {
		out, err = h.opts.Store.Accept(sctx, d, telemetry.Traceparent(ctx))
	}
	if err != nil {
		storeSpan.RecordError(err)
		storeSpan.SetStatus(codes.Error, "store")
	}
	storeSpan.End()
	if errors.Is(err, ErrUnstorable) {
		h.opts.Logger.Error("delivery refused by the database's row rules; it can never be stored, and is lost unless the cause is fixed",
			"delivery_id", d.ID, "event", d.Event, "action", d.Action, "document_bytes", len(d.Document), "error", err,
			"trace_id", telemetry.TraceID(ctx))
		finish(http.StatusUnprocessableEntity, ResultRejectedUnstorable,
			response{Status: ResultRejectedUnstorable, DeliveryID: d.ID, Message: "the delivery cannot be stored"})
		return
	}
	if err != nil {
		h.opts.Logger.Error("delivery not stored; answering 503 so it is delivered again",
			"delivery_id", d.ID, "event", d.Event, "error", err, "trace_id", telemetry.TraceID(ctx))
		finish(http.StatusServiceUnavailable, ResultUnavailable,
			response{Status: ResultUnavailable, DeliveryID: d.ID, Message: "database unavailable; retry"}, retryAfter(5))
		return
	}
	switch {
	case out.Replayed:
		// Answered like a duplicate (the sender learns nothing), counted and logged apart.
		h.opts.Logger.Warn("signed body replayed under a new delivery id; nothing written",
			"delivery_id", d.ID, "event", d.Event, "payload_sha256", hex.EncodeToString(d.PayloadSHA256[:]),
			"first_inbox_id", out.InboxID, "trace_id", telemetry.TraceID(ctx))
		finish(http.StatusOK, ResultReplayed, response{Status: ResultDuplicate, DeliveryID: d.ID})
		return
	case out.Duplicate:
		finish(http.StatusOK, ResultDuplicate, response{Status: ResultDuplicate, DeliveryID: d.ID})
		return
	case d.Ignored:
		finish(http.StatusAccepted, ResultIgnored, response{Status: ResultIgnored, DeliveryID: d.ID})
		return
	}
	if h.opts.OnAccepted != nil {
		h.opts.OnAccepted()
	}
	finish(http.StatusAccepted, ResultAccepted, response{Status: ResultAccepted, DeliveryID: d.ID})
}

func retryAfter(seconds int) func(http.Header) {
	return func(h http.Header) { h.Set("Retry-After", strconv.Itoa(seconds)) }
}
