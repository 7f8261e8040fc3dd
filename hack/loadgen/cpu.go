package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/boardreadyops/cloud/pkg/testkit/proccpu"
)

// cpuSeconds reports the CPU seconds each name=pid has used so far, plus "postgres": the
// postmaster, its live children and the exited backends it waited for. Other PostgreSQL servers
// on the machine are not counted. Callers subtract a snapshot taken when the load starts.
func cpuSeconds(spec string, postmaster int) map[string]float64 {
	out := map[string]float64{}
	for _, kv := range strings.Split(spec, ",") {
		name, pid, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if v, ok := proccpu.Process(pid, false); ok {
			out[name] = v
		}
	}
	if v, ok := proccpu.Process("self", false); ok {
		out["loadgen"] = v
	}
	if postmaster <= 0 {
		return out
	}
	pg, ok := proccpu.Server(postmaster)
	if !ok {
		return out
	}
	out["postgres"] = pg
	return out
}

// cpuSince subtracts an earlier snapshot. A backend that exited between the snapshots moves
// from the live processes to its postmaster's children, so the total is still right.
func cpuSince(now, then map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range now {
		out[k] = v - then[k]
	}
	return out
}

// formatCPU renders CPU seconds per process with each one's share of one core over the run.
func formatCPU(cpu map[string]float64, wall float64) string {
	names := make([]string, 0, len(cpu))
	for n := range cpu {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s %.1f s (%.0f%% of a core); ", n, cpu[n], 100*cpu[n]/wall)
	}
	return strings.TrimSuffix(b.String(), "; ")
}
