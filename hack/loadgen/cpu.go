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
	return perProcess(spec, postmaster, func(pid string) (float64, bool) { return proccpu.Process(pid, false) }, proccpu.Server)
}

// runQueueSeconds reports, like cpuSeconds, how long each process's threads have waited on the run
// queue so far: ready to run while every core was busy (proccpu.RunQueue). PostgreSQL's is its
// postmaster's and live backends'. Callers subtract a snapshot taken when the load starts.
func runQueueSeconds(spec string, postmaster int) map[string]float64 {
	return perProcess(spec, postmaster, proccpu.RunQueue, proccpu.ServerRunQueue)
}

// perProcess reads one figure of each name=pid of spec, of this process ("loadgen") and of the
// PostgreSQL server behind postmaster ("postgres"); what cannot be read is left out.
func perProcess(spec string, postmaster int, read func(pid string) (float64, bool), server func(postmaster int) (float64, bool)) map[string]float64 {
	out := map[string]float64{}
	for _, kv := range strings.Split(spec, ",") {
		name, pid, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if v, ok := read(pid); ok {
			out[name] = v
		}
	}
	if v, ok := read("self"); ok {
		out["loadgen"] = v
	}
	if v, ok := server(postmaster); ok {
		out["postgres"] = v
	}
	return out
}

// formatRunQueue renders each process's run-queue wait per second of its CPU: how much longer
// than its CPU time its work took for want of a free core. On a saturated machine every latency
// of the load (a claim, a commit) is stretched by about 1 + this ratio.
func formatRunQueue(wait, cpu map[string]float64) string {
	names := make([]string, 0, len(wait))
	for n := range wait {
		if cpu[n] > 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.2f", n, wait[n]/cpu[n]))
	}
	return strings.Join(parts, ", ")
}

// cpuSince subtracts an earlier snapshot. For CPU a backend that exited between the snapshots
// moves from the live processes to its postmaster's children, so the total is still right; for
// run-queue waits its wait is lost with it, and the difference is a lower bound.
func cpuSince(now, then map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range now {
		out[k] = v - then[k]
	}
	return out
}

// formatCPU renders CPU seconds per process with each one's share of one core over the run and
// its CPU per release run, then the total per run (the machine's cost of one run).
func formatCPU(cpu map[string]float64, wall float64, runs int) string {
	names := make([]string, 0, len(cpu))
	for n := range cpu {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	total := 0.0
	for _, n := range names {
		fmt.Fprintf(&b, "%s %.1f s (%.0f%% of a core, %.2f ms per run); ", n, cpu[n], 100*cpu[n]/wall, perRunMs(cpu[n], runs))
		total += cpu[n]
	}
	fmt.Fprintf(&b, "total %.2f ms per run", perRunMs(total, runs))
	if r, ok := postgresPerServiceCPU(cpu); ok {
		fmt.Fprintf(&b, "; PostgreSQL per service CPU %.2f", r)
	}
	return b.String()
}

// services are the product's processes, whose code per release run is the same from one run of
// the load to the next.
var services = []string{"ingest", "lifecycle", "outbox-dispatcher"}

// postgresPerServiceCPU is PostgreSQL's CPU over the three services' CPU, every replica of each
// counted ("outbox-dispatcher-2", … beside "outbox-dispatcher"). The machine's noise (a neighbour,
// a slower core) scales both alike and cancels; a change in PostgreSQL's work per run, such as a
// worse plan, does not.
func postgresPerServiceCPU(cpu map[string]float64) (float64, bool) {
	pg, ok := cpu["postgres"]
	if !ok {
		return 0, false
	}
	sum := 0.0
	for _, n := range services {
		v, ok := cpu[n]
		if !ok {
			return 0, false
		}
		sum += v
		for name, v := range cpu {
			if replica, ok := strings.CutPrefix(name, n+"-"); ok && replica != "" && strings.Trim(replica, "0123456789") == "" {
				sum += v
			}
		}
	}
	if sum <= 0 {
		return 0, false
	}
	return pg / sum, true
}

// perRunMs is CPU seconds per release run, in milliseconds.
func perRunMs(seconds float64, runs int) float64 {
	if runs <= 0 {
		return 0
	}
	return 1000 * seconds / float64(runs)
}

// cpuPerRun is each process's CPU milliseconds per release run.
func cpuPerRun(cpu map[string]float64, runs int) map[string]float64 {
	out := make(map[string]float64, len(cpu))
	for n, v := range cpu {
		out[n] = perRunMs(v, runs)
	}
	return out
}
