package telemetry

import "time"

// SetClock makes the exemplar gates read clock until the returned function restores their own
// clock. Only for tests that are not parallel.
func SetClock(clock func() time.Time) (restore func()) {
	saved := now
	now = func() int64 { return clock().UnixNano() }
	return func() { now = saved }
}
