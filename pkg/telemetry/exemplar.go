package telemetry

import (
	"context"
	"math"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/trace"
)

// ExemplarInterval is the least time between two exemplars of one histogram bucket. A scrape sees
// only the last exemplar of each bucket, so one every ExemplarInterval per bucket shows what an
// exemplar on every observation would: a busy bucket still gets ten a second, and a rare one — the
// outlier a dashboard links from — gets every observation's that comes at least that long after
// the one before. Attaching one costs the client library about a microsecond and five
// allocations (a time stamp, a label pair, validation), which on every delivery was a tenth of
// the dispatcher's CPU (docs/performance.md).
const ExemplarInterval = 100 * time.Millisecond

// Observe records v on o with ctx's trace id as exemplar when there is one and o's bucket for v
// took none in the last ExemplarInterval, so a latency outlier on a dashboard links to its trace.
// Trace ids go into exemplars, never into labels.
func Observe(ctx context.Context, o prometheus.Observer, v float64) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		if eo := exemplarDue(o, v); eo != nil {
			eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": sc.TraceID().String()})
			return
		}
	}
	o.Observe(v)
}

// ObserveTraceID records v with traceID ("" for none) as exemplar, as Observe does.
func ObserveTraceID(o prometheus.Observer, v float64, traceID string) {
	if traceID != "" {
		if eo := exemplarDue(o, v); eo != nil {
			eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": traceID})
			return
		}
	}
	o.Observe(v)
}

// epoch and now are the exemplar gates' clock: monotonic nanoseconds since the process started,
// so that a wall-clock step back does not close every bucket for as long (tests move it).
var (
	epoch = time.Now()
	now   = func() int64 { return int64(time.Since(epoch)) }
)

// gates holds a bucketGate per histogram observed with exemplars (one per series: a vector's
// WithLabelValues returns the same histogram for the same labels), or a nil one for an observer
// whose buckets cannot be read. Entries are never removed: the services neither delete nor reset
// the series they observe, so there is one per series for the life of the process.
var gates sync.Map

// bucketGate is one histogram's buckets and when each takes an exemplar again.
type bucketGate struct {
	bounds []float64      // upper bounds, ascending, without +Inf
	next   []atomic.Int64 // per bucket, +Inf last: the clock (now) from which it takes one
}

// exemplarDue returns o to record v with an exemplar when o takes exemplars and its bucket for v
// may take one now (closing it for ExemplarInterval), nil otherwise. An observer whose buckets
// cannot be read (not a histogram series) always may.
func exemplarDue(o prometheus.Observer, v float64) prometheus.ExemplarObserver {
	eo, ok := o.(prometheus.ExemplarObserver)
	if !ok {
		return nil
	}
	g := gateOf(o)
	if g == nil {
		return eo
	}
	next := &g.next[sort.SearchFloat64s(g.bounds, v)] // the first bucket whose bound is ≥ v
	if t, at := next.Load(), now(); at >= t && next.CompareAndSwap(t, at+int64(ExemplarInterval)) {
		return eo
	}
	return nil
}

func gateOf(o prometheus.Observer) *bucketGate {
	// Only a pointer is a safe and lasting key (an ObserverFunc is not even comparable).
	if reflect.TypeOf(o).Kind() != reflect.Pointer {
		return nil
	}
	if g, ok := gates.Load(o); ok {
		return g.(*bucketGate)
	}
	// Looked at once: an observer without classic buckets (a summary, a native-only histogram) is
	// remembered as such rather than written out again on every observation.
	var pb dto.Metric
	if m, ok := o.(prometheus.Metric); !ok || m.Write(&pb) != nil || len(pb.GetHistogram().GetBucket()) == 0 {
		gates.Store(o, (*bucketGate)(nil))
		return nil
	}
	g := &bucketGate{}
	for _, b := range pb.GetHistogram().GetBucket() {
		if !math.IsInf(b.GetUpperBound(), +1) { // written when it holds an exemplar
			g.bounds = append(g.bounds, b.GetUpperBound())
		}
	}
	g.next = make([]atomic.Int64, len(g.bounds)+1)
	actual, _ := gates.LoadOrStore(o, g)
	return actual.(*bucketGate)
}
