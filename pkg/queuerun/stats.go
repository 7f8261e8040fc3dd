package queuerun

import (
	"context"
	"time"
)

// Stats is a queue's statistics query, which refreshes the gauges of Metrics once per interval
// (one cheap query per interval, not one per scrape).
type Stats struct {
	// Name says what the task does ("read job queue statistics"). Required.
	Name string
	// Interval is the mean wait between queries; it must be positive. The first query runs at
	// start.
	Interval time.Duration
	// Read runs the query once: the age in seconds of the oldest row that is due and not
	// claimed, and the counts by state in the order of MetricsConfig.StateValues.
	Read func(ctx context.Context) (oldestAvailableAgeSeconds float64, counts []int64, err error)
}

// Task returns the statistics query as an upkeep task that sets m's gauges.
func (s Stats) Task(m *Metrics) Task {
	return Task{Name: s.Name, Interval: s.Interval, Immediately: true, Run: func(ctx context.Context) error {
		oldest, counts, err := s.Read(ctx)
		if err != nil {
			return err
		}
		return m.SetStats(oldest, counts...)
	}}
}
