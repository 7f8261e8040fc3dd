// Package scrape reads the outbox-dispatcher's /metrics endpoints and turns successive scrapes of
// several pods into the three broker-trigger signals: the claim latency percentile from histogram
// bucket deltas summed across pods, the completed-effects rate from counter deltas summed across
// pods, and the oldest available effect age (the largest any pod reports). Counter resets (a
// restarted pod or process) are handled as Prometheus does: a counter that went down restarted
// from zero.
package scrape

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// The dispatcher metrics the signals are computed from.
const (
	MetricClaimDuration = "boardreadyops_outbox_claim_duration_seconds"
	MetricProcessed     = "boardreadyops_outbox_effects_processed_total"
	MetricOldestAge     = "boardreadyops_outbox_oldest_available_effect_age_seconds"
)

// maxBody bounds one metrics response; a dispatcher's is a few KiB.
const maxBody = 4 << 20

// ErrNoDispatcherMetrics reports an endpoint that answered without the claim histogram, which
// means it is not an outbox-dispatcher (or an incompatible version of one).
var ErrNoDispatcherMetrics = errors.New("no outbox-dispatcher metrics in response")

// Bucket is one cumulative histogram bucket.
type Bucket struct {
	UpperBound float64
	Count      float64
}

// Sample is what one scrape of one pod yielded.
type Sample struct {
	Time time.Time
	// ClaimBuckets are the claim duration histogram's cumulative buckets, sorted by upper bound
	// and ending with +Inf; ClaimCount is the histogram's total count.
	ClaimBuckets []Bucket
	ClaimCount   float64
	// Completed is the sum of effects_processed_total{outcome="completed"} over effect types.
	Completed float64
	// OldestAge is the oldest available effect age in seconds; HasOldestAge is false when the
	// pod has not refreshed its queue statistics yet.
	OldestAge    float64
	HasOldestAge bool
}

// Fetch scrapes one metrics URL. The context bounds the request.
func Fetch(ctx context.Context, client *http.Client, url string, now time.Time) (Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Sample{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := client.Do(req)
	if err != nil {
		return Sample{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return Sample{}, fmt.Errorf("scrape %s: HTTP %d", url, resp.StatusCode)
	}
	s, err := Parse(io.LimitReader(resp.Body, maxBody), expfmt.ResponseFormat(resp.Header), now)
	if err != nil {
		return Sample{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	return s, nil
}

// Parse reads one metrics exposition and extracts the dispatcher's signals.
func Parse(r io.Reader, format expfmt.Format, now time.Time) (Sample, error) {
	s := Sample{Time: now}
	dec := expfmt.NewDecoder(r, format)
	sawClaims := false
	for {
		var mf dto.MetricFamily
		err := dec.Decode(&mf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Sample{}, fmt.Errorf("parse metrics: %w", err)
		}
		switch mf.GetName() {
		case MetricClaimDuration:
			sawClaims = true
			for _, m := range mf.GetMetric() {
				h := m.GetHistogram()
				if h == nil {
					continue
				}
				s.ClaimCount += float64(h.GetSampleCount())
				s.ClaimBuckets = addBuckets(s.ClaimBuckets, h)
			}
		case MetricProcessed:
			for _, m := range mf.GetMetric() {
				if label(m, "outcome") == "completed" && m.GetCounter() != nil {
					s.Completed += m.GetCounter().GetValue()
				}
			}
		case MetricOldestAge:
			for _, m := range mf.GetMetric() {
				if g := m.GetGauge(); g != nil && !math.IsNaN(g.GetValue()) {
					s.OldestAge = math.Max(s.OldestAge, g.GetValue())
					s.HasOldestAge = true
				}
			}
		}
	}
	if !sawClaims {
		return Sample{}, ErrNoDispatcherMetrics
	}
	return s, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// addBuckets adds a histogram's cumulative buckets (plus its +Inf bucket, which the exposition
// leaves implicit) into acc, keyed by upper bound.
func addBuckets(acc []Bucket, h *dto.Histogram) []Bucket {
	byBound := make(map[float64]float64, len(acc)+len(h.GetBucket())+1)
	for _, b := range acc {
		byBound[b.UpperBound] += b.Count
	}
	hasInf := false
	for _, b := range h.GetBucket() {
		byBound[b.GetUpperBound()] += float64(b.GetCumulativeCount())
		hasInf = hasInf || math.IsInf(b.GetUpperBound(), 1)
	}
	if !hasInf {
		byBound[math.Inf(1)] += float64(h.GetSampleCount())
	}
	out := make([]Bucket, 0, len(byBound))
	for ub, c := range byBound {
		out = append(out, Bucket{UpperBound: ub, Count: c})
	}
	sortBuckets(out)
	return out
}

func sortBuckets(bs []Bucket) {
	sort.Slice(bs, func(i, j int) bool { return bs[i].UpperBound < bs[j].UpperBound })
}

// Quantile estimates the q-quantile (0 < q < 1) of cumulative buckets as Prometheus's
// histogram_quantile does: linear interpolation within the bucket holding the rank, the highest
// finite bound when the rank falls in +Inf. ok is false when the buckets hold no observation.
func Quantile(q float64, buckets []Bucket) (v float64, ok bool) {
	if len(buckets) == 0 {
		return 0, false
	}
	total := buckets[len(buckets)-1].Count
	if total <= 0 {
		return 0, false
	}
	rank := q * total
	var lower, below float64
	for i, b := range buckets {
		if b.Count >= rank {
			if math.IsInf(b.UpperBound, 1) {
				if i == 0 {
					return 0, false
				}
				return buckets[i-1].UpperBound, true
			}
			inBucket := b.Count - below
			if inBucket <= 0 {
				return b.UpperBound, true
			}
			return lower + (b.UpperBound-lower)*(rank-below)/inBucket, true
		}
		lower, below = b.UpperBound, b.Count
	}
	return buckets[len(buckets)-1].UpperBound, true
}
