package queuerun

import (
	"context"
	"log/slog"
	"time"
)

// Recovery is a queue's lease recovery: rows whose worker died mid-lease go back to the queue
// (or wherever the queue's recovery function sends them).
type Recovery[R any] struct {
	// Name says what the task does ("recover job leases"). Required.
	Name string
	// Interval is the mean wait between recoveries; it must be positive.
	Interval time.Duration
	// Recover runs the queue's recovery function once and returns the rows it recovered.
	Recover func(ctx context.Context) ([]R, error)
	// Message is logged (warning) for every recovered row ("recovered expired job lease").
	Message string
	// Describe returns the state a recovered row moved to (the log's "status" and the
	// recovered counter's "state") and the log attributes that name the row.
	Describe func(R) (state string, attrs []any)
}

// Task returns the recovery as an upkeep task: each recovered row is logged and counted in
// m.Recovered by its new state, and wake is called when any row came back, since it may be
// due now.
func (r Recovery[R]) Task(m *Metrics, wake func(), logger *slog.Logger) Task {
	return Task{Name: r.Name, Interval: r.Interval, Run: func(ctx context.Context) error {
		rec, err := r.Recover(ctx)
		if err != nil {
			return err
		}
		for _, row := range rec {
			state, attrs := r.Describe(row)
			logger.Warn(r.Message, append(attrs, "status", state)...)
			m.Recovered.WithLabelValues(state).Inc()
		}
		if len(rec) > 0 {
			wake()
		}
		return nil
	}}
}
