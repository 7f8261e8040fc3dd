package scrape

import (
	"math"
	"time"
)

// Signals are the three trigger signals over the interval [Start, End]: since the previous
// evaluation. Each has its own validity: a signal is invalid when no pod could be diffed against
// an earlier scrape of itself, or (latency) when no claim happened in the interval.
type Signals struct {
	Start, End time.Time

	ClaimLatency      float64 // seconds, at the requested quantile
	ClaimLatencyValid bool
	Throughput        float64 // completed effects per second, summed across pods
	ThroughputValid   bool
	OldestAge         float64 // seconds, the largest any scraped pod reported
	OldestAgeValid    bool

	// PodsScraped is how many pods answered this scrape; PodsDiffed how many of them had an
	// earlier sample to diff against.
	PodsScraped, PodsDiffed int
}

// Aggregator keeps each pod's previous sample, which is all the history the windowed triggers
// need: the trigger package folds each interval's signals into its windows. It is not safe for
// concurrent use.
type Aggregator struct {
	prev map[string]Sample
	last time.Time
}

// NewAggregator returns an empty aggregator.
func NewAggregator() *Aggregator { return &Aggregator{prev: map[string]Sample{}} }

// Update folds one scrape round into the aggregator and returns the signals since the previous
// round. samples holds the pods that answered, keyed by an identity that changes when the pod is
// replaced (its UID); alive lists every pod that still exists, answered or not, so that a pod
// whose scrape failed keeps its previous sample and is diffed against it once it answers again.
// Pods no longer alive are forgotten.
func (a *Aggregator) Update(now time.Time, samples map[string]Sample, alive map[string]bool, quantile float64) Signals {
	sig := Signals{Start: a.last, End: now, PodsScraped: len(samples)}
	firstRound := a.last.IsZero()
	a.last = now

	var claims []Bucket
	claimDelta := 0.0
	for key, cur := range samples {
		if cur.HasOldestAge {
			sig.OldestAge = math.Max(sig.OldestAge, cur.OldestAge)
			sig.OldestAgeValid = true
		}
		prev, ok := a.prev[key]
		a.prev[key] = cur
		if !ok || !cur.Time.After(prev.Time) {
			continue
		}
		sig.PodsDiffed++
		completed := cur.Completed - prev.Completed
		if completed < 0 { // counter reset: the process restarted and counted from zero
			completed = cur.Completed
		}
		sig.Throughput += completed / cur.Time.Sub(prev.Time).Seconds()
		sig.ThroughputValid = true
		delta, count := bucketDelta(prev, cur)
		claims = sumBuckets(claims, delta)
		claimDelta += count
	}
	for key := range a.prev {
		if !alive[key] {
			delete(a.prev, key)
		}
	}
	if claimDelta > 0 {
		sig.ClaimLatency, sig.ClaimLatencyValid = Quantile(quantile, claims)
	}
	if firstRound {
		// Without an earlier round there is no interval the signals hold over.
		sig.ClaimLatencyValid, sig.ThroughputValid, sig.OldestAgeValid = false, false, false
	}
	return sig
}

// bucketDelta is cur − prev per bucket, or cur itself when the histogram was reset (its count
// went down, or its bucket layout changed with a new version of the dispatcher).
func bucketDelta(prev, cur Sample) ([]Bucket, float64) {
	reset := cur.ClaimCount < prev.ClaimCount || len(cur.ClaimBuckets) != len(prev.ClaimBuckets)
	if !reset {
		for i := range cur.ClaimBuckets {
			if cur.ClaimBuckets[i].UpperBound != prev.ClaimBuckets[i].UpperBound || cur.ClaimBuckets[i].Count < prev.ClaimBuckets[i].Count {
				reset = true
				break
			}
		}
	}
	if reset {
		return cur.ClaimBuckets, cur.ClaimCount
	}
	out := make([]Bucket, len(cur.ClaimBuckets))
	for i, b := range cur.ClaimBuckets {
		out[i] = Bucket{UpperBound: b.UpperBound, Count: b.Count - prev.ClaimBuckets[i].Count}
	}
	return out, cur.ClaimCount - prev.ClaimCount
}

// sumBuckets adds b into acc. Pods of one dispatcher version share a layout; when they do not
// (mid-rollout of a new layout), the union of bounds is used and a pod's count at a bound it does
// not have is its count at its next lower bound, which keeps every series cumulative.
func sumBuckets(acc, b []Bucket) []Bucket {
	if len(acc) == 0 {
		return append([]Bucket(nil), b...)
	}
	bounds := map[float64]bool{}
	for _, x := range acc {
		bounds[x.UpperBound] = true
	}
	for _, x := range b {
		bounds[x.UpperBound] = true
	}
	out := make([]Bucket, 0, len(bounds))
	for ub := range bounds {
		out = append(out, Bucket{UpperBound: ub, Count: countAt(acc, ub) + countAt(b, ub)})
	}
	sortBuckets(out)
	return out
}

// countAt is the cumulative count at bound ub: the count of the largest bound ≤ ub.
func countAt(bs []Bucket, ub float64) float64 {
	c := 0.0
	for _, b := range bs {
		if b.UpperBound > ub {
			break
		}
		c = b.Count
	}
	return c
}
