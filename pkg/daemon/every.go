package daemon

import (
	"context"
	"time"
)

// Every runs fn every interval until ctx ends (first run after one interval, or at once when
// now is set). A failing fn is reported by fn itself; Every never stops early, so a periodic
// duty (lease recovery, queue statistics) survives a passing database outage.
func Every(ctx context.Context, interval time.Duration, now bool, fn func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	if now {
		fn(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(ctx)
		}
	}
}
