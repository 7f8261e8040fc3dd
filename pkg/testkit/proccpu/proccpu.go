// Package proccpu reads the CPU time of processes on this machine from /proc, for the benchmarks
// and load tools that report CPU per unit of work: this process, any process by pid, and a local
// PostgreSQL server as a whole (its postmaster, the live backends and the exited ones it waited
// for). It also reads how long their threads waited on the run queue, ready to run while every
// core was busy (RunQueue, ServerRunQueue). Linux only; elsewhere every reading reports false.
package proccpu

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// stat returns the fields of /proc/<pid>/stat after the command name (which is parenthesised and
// may hold spaces): f[0] is field 3 (state).
func stat(pid string) ([]string, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return nil, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, false
	}
	f := strings.Fields(s[i+1:])
	return f, len(f) >= 15
}

// Process returns a process's user+system CPU seconds ("self" for this one), plus its waited-for
// children's when children is set.
func Process(pid string, children bool) (float64, bool) {
	f, ok := stat(pid)
	if !ok {
		return 0, false
	}
	// utime, stime, cutime, cstime are fields 14..17.
	idx := []int{11, 12}
	if children {
		idx = append(idx, 13, 14)
	}
	sum := 0.0
	for _, k := range idx {
		v, _ := strconv.ParseFloat(f[k], 64)
		sum += v
	}
	return sum / clockTicks, true
}

// Parent returns the parent of pid, or -1.
func Parent(pid string) int {
	f, ok := stat(pid)
	if !ok {
		return -1
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return ppid
}

// Server returns the CPU seconds a PostgreSQL server has used so far: the postmaster, its live
// children and the exited backends it waited for (a backend that exits between two readings
// moves from the live processes to the postmaster's children, so a difference stays right).
// Other servers on the machine are not counted.
func Server(postmaster int) (float64, bool) {
	return server(postmaster, func(pid string) (float64, bool) { return Process(pid, true) },
		func(pid string) (float64, bool) { return Process(pid, false) })
}

// server sums a reading over a postmaster (own) and its live children (child).
func server(postmaster int, own, child func(pid string) (float64, bool)) (float64, bool) {
	if postmaster <= 0 {
		return 0, false
	}
	total, ok := own(strconv.Itoa(postmaster))
	if !ok {
		return 0, false
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if Parent(e.Name()) == postmaster {
			if v, ok := child(e.Name()); ok {
				total += v
			}
		}
	}
	return total, true
}

// Postmaster returns the pid of the postmaster of the server behind backendPID (the parent of a
// session's backend, from SELECT pg_backend_pid()), or -1 when the server is not on this machine.
func Postmaster(backendPID int) int {
	return Parent(strconv.Itoa(backendPID))
}

// RunQueue returns the seconds a process's threads (every one, "self" for this process) have
// spent ready to run but waiting for a core, from /proc/<pid>/task/*/schedstat (its second field,
// run_delay in nanoseconds; the kernel keeps it with CONFIG_SCHED_INFO). Threads that exited are
// not counted, so read it over the life of long-lived threads.
func RunQueue(pid string) (float64, bool) {
	tasks, err := os.ReadDir(filepath.Join("/proc", pid, "task"))
	if err != nil {
		return 0, false
	}
	total, read := 0.0, false
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc", pid, "task", t.Name(), "schedstat"))
		if err != nil {
			continue // exited meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		ns, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		total += ns / 1e9
		read = true
	}
	return total, read
}

// ServerRunQueue is RunQueue for a PostgreSQL server: its postmaster and its live children. A
// process that exits between two readings takes its wait with it (unlike its CPU, which its
// postmaster collects), so the difference of two readings is a lower bound: close for a pooled
// load, whose backends live through it, and low by what exited workers (autovacuum's) waited.
func ServerRunQueue(postmaster int) (float64, bool) { return server(postmaster, RunQueue, RunQueue) }
