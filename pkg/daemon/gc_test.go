package daemon_test

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/boardreadyops/cloud/pkg/daemon"
)

// gcSettings reads the collector's percentage and soft memory limit without changing them.
func gcSettings() (percent int, limit int64) {
	percent = debug.SetGCPercent(100)
	debug.SetGCPercent(percent)
	return percent, debug.SetMemoryLimit(-1)
}

// The policy fills in what the environment leaves unset and never overrides GOGC or GOMEMLIMIT.
// Not parallel: the collector's settings are the process's.
func TestGCPolicyYieldsToTheEnvironment(t *testing.T) {
	percent0, limit0 := gcSettings()
	t.Cleanup(func() { debug.SetGCPercent(percent0); debug.SetMemoryLimit(limit0) })
	policy := daemon.GC{Percent: 400, MemoryLimit: 96 << 20}
	for _, tc := range []struct {
		name        string
		env         map[string]string
		wantPercent int
		wantLimit   int64
	}{
		{"unset: the policy", nil, 400, 96 << 20},
		{"GOGC set: only the limit", map[string]string{"GOGC": "150"}, 150, 96 << 20},
		{"GOMEMLIMIT set: only the percentage", map[string]string{"GOMEMLIMIT": "300MiB"}, 400, 300 << 20},
		{"both set: nothing", map[string]string{"GOGC": "150", "GOMEMLIMIT": "300MiB"}, 150, 300 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// What the runtime would have read from the environment at start-up.
			debug.SetGCPercent(150)
			debug.SetMemoryLimit(math.MaxInt64)
			if _, ok := tc.env["GOMEMLIMIT"]; ok {
				debug.SetMemoryLimit(300 << 20)
			}
			policy.Apply(func(k string) string { return tc.env[k] })
			if p, l := gcSettings(); p != tc.wantPercent || l != tc.wantLimit {
				t.Errorf("GOGC %d, GOMEMLIMIT %d; want %d, %d", p, l, tc.wantPercent, tc.wantLimit)
			}
		})
	}
}

// Every service's default stays under the 100 MiB each is meant to use, and collects less often
// than Go's default.
func TestDefaultGC(t *testing.T) {
	t.Parallel()
	gc := daemon.DefaultGC()
	if gc.Percent <= 100 || gc.MemoryLimit <= 0 || gc.MemoryLimit > 100<<20 {
		t.Errorf("DefaultGC() = %+v", gc)
	}
}
