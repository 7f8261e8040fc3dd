package proccpu_test

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
	"github.com/boardreadyops/cloud/pkg/testkit/proccpu"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// This process's CPU grows with work; its parent is read from /proc.
func TestProcess(t *testing.T) {
	t.Parallel()
	before, ok := proccpu.Process("self", false)
	if !ok {
		t.Fatal("no CPU reading for this process")
	}
	x := 0
	for i := 0; i < 1e9 && x >= 0; i++ {
		x += i % 7
		if i%1e6 == 0 {
			if now, _ := proccpu.Process("self", false); now-before >= 0.05 {
				break
			}
		}
	}
	if now, _ := proccpu.Process("self", false); now <= before {
		t.Errorf("CPU %v after busy work, %v before", now, before)
	}
	if got := proccpu.Parent(strconv.Itoa(os.Getpid())); got != os.Getppid() {
		t.Errorf("Parent = %d, want %d", got, os.Getppid())
	}
	if _, ok := proccpu.Process("-1", false); ok {
		t.Error("a reading for a process that does not exist")
	}
}

// The test server's CPU, found through a backend, covers at least that backend's.
func TestServer(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	var backend int
	if err := pool.QueryRow(context.Background(), `SELECT pg_backend_pid() FROM pg_sleep(0)`).Scan(&backend); err != nil {
		t.Fatal(err)
	}
	postmaster := proccpu.Postmaster(backend)
	if postmaster <= 1 {
		t.Fatalf("the test server's postmaster: %d (pgtest runs a local server)", postmaster)
	}
	total, ok := proccpu.Server(postmaster)
	own, ok2 := proccpu.Process(strconv.Itoa(backend), false)
	if !ok || !ok2 || total < own {
		t.Errorf("server CPU %v (%v), its backend's %v (%v)", total, ok, own, ok2)
	}
	if _, ok := proccpu.ServerRunQueue(postmaster); !ok {
		t.Error("no run-queue reading for the test server")
	}
	if _, ok := proccpu.Server(0); ok {
		t.Error("a reading without a postmaster")
	}
}

// More busy processes than cores wait for them in turn: their run-queue readings grow. Not
// parallel: it keeps every core busy while it runs.
func TestRunQueue(t *testing.T) {
	// Linux keeps schedstat with CONFIG_SCHED_INFO, which every kernel this runs on has (the
	// load tools' figures depend on it).
	if _, ok := proccpu.RunQueue("self"); !ok {
		t.Fatal("no run-queue reading for this process: /proc/self/task/*/schedstat is missing")
	}
	var pids []string
	for range runtime.NumCPU() + 1 {
		// Each loop ends by itself after 30 s, should this test binary die before its cleanup.
		cmd := exec.Command("bash", "-c", "while ((SECONDS < 30)); do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		pids = append(pids, strconv.Itoa(cmd.Process.Pid))
	}
	waited := func() float64 {
		sum := 0.0
		for _, pid := range pids {
			v, ok := proccpu.RunQueue(pid)
			if !ok {
				t.Fatalf("no run-queue reading for busy process %s", pid)
			}
			sum += v
		}
		return sum
	}
	for deadline := time.Now().Add(10 * time.Second); waited() < 0.01; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d busy processes on %d cores waited %v s on the run queue in 10 s", len(pids), runtime.NumCPU(), waited())
		}
	}
	if _, ok := proccpu.RunQueue("-1"); ok {
		t.Error("a reading for a process that does not exist")
	}
	if _, ok := proccpu.ServerRunQueue(0); ok {
		t.Error("a reading without a postmaster")
	}
}
