package daemon

import (
	"runtime/debug"

	"github.com/boardreadyops/cloud/pkg/config"
)

// GC is a service's garbage-collector policy, applied by Main before the service starts. The
// standard GOGC and GOMEMLIMIT environment variables, when set, win over it (the chart sets
// GOMEMLIMIT from each container's memory limit).
//
// Go's default (GOGC=100, no limit) collects whenever the heap doubles; the services keep a small
// live heap and allocate per request, so they spent an eighth of their CPU marking (the outbox
// dispatcher at 20,000 effects/s: GOGC=400 gave 11 % more throughput, docs/performance.md). A
// larger percentage with a soft memory limit collects rarely while memory is plentiful and as
// often as needed near the limit.
type GC struct {
	// Percent is the GOGC default: the heap may grow this percentage over the live heap before a
	// collection. 0 keeps Go's default (100).
	Percent int
	// MemoryLimit is the GOMEMLIMIT default in bytes: a soft limit the collector works to stay
	// under (it never refuses memory). 0 sets none.
	MemoryLimit int64
}

// DefaultGC is the policy of every service unless its main names another: collections at five
// times the live heap, and a soft limit of 96 MiB, under the 100 MiB each service is meant to
// stay within (docs/performance.md).
func DefaultGC() GC { return GC{Percent: 400, MemoryLimit: 96 << 20} }

// Apply sets the parts of the policy that the environment leaves unset (the Go runtime has
// already read GOGC and GOMEMLIMIT when they are set).
func (g GC) Apply(getenv config.Getenv) {
	if getenv("GOGC") == "" && g.Percent > 0 {
		debug.SetGCPercent(g.Percent)
	}
	if getenv("GOMEMLIMIT") == "" && g.MemoryLimit > 0 {
		debug.SetMemoryLimit(g.MemoryLimit)
	}
}
