package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// procCPU returns a process's user+system CPU seconds, plus its waited-for children's when
// children is set, from /proc/<pid>/stat.
func procCPU(pid string, children bool) (float64, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0, false
	}
	// Fields after the command name, which is parenthesised and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime, stime, cutime, cstime are fields 14..17.
	if len(f) < 15 {
		return 0, false
	}
	sum := 0.0
	idx := []int{11, 12}
	if children {
		idx = append(idx, 13, 14)
	}
	for _, k := range idx {
		v, _ := strconv.ParseFloat(f[k], 64)
		sum += v
	}
	return sum / clockTicks, true
}

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
		if v, ok := procCPU(pid, false); ok {
			out[name] = v
		}
	}
	if v, ok := procCPU("self", false); ok {
		out["loadgen"] = v
	}
	if postmaster <= 0 {
		return out
	}
	pg, ok := procCPU(strconv.Itoa(postmaster), true)
	if !ok {
		return out
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if parentPID(e.Name()) == postmaster {
			if v, ok := procCPU(e.Name(), false); ok {
				pg += v
			}
		}
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

// parentPID returns the parent of pid from /proc/<pid>/stat, or -1.
func parentPID(pid string) int {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return -1
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return -1
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return ppid
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
