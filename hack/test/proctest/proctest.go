// Package proctest runs the product's binaries as separate processes for the end-to-end and
// fault-injection tests: building them, free loopback ports, starting, killing (SIGKILL),
// stopping (SIGTERM) and waiting for /readyz, with each process's output kept across restarts.
package proctest

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/testkit/freeport"
)

// FreeAddr returns a loopback address for a process to listen on (package freeport: free, not
// handed out before, outside the ephemeral port range).
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Build compiles github.com/boardreadyops/cloud/services/<name> for each name into dir.
func Build(dir string, names ...string) error {
	for _, name := range names {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), "github.com/boardreadyops/cloud/services/"+name).CombinedOutput()
		if err != nil {
			return fmt.Errorf("build %s: %w\n%s", name, err, out)
		}
	}
	return nil
}

// LockedBuffer collects concurrent writes (a process's stdout and stderr).
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Process is one product process that a test starts, kills and restarts. Its output
// accumulates in Log across restarts.
type Process struct {
	Name, Bin   string
	Args        []string // command-line arguments
	Env         []string
	MetricsAddr string // where /readyz is served
	Log         LockedBuffer

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// Start starts the process and registers a cleanup that kills it if it still runs.
func (p *Process) Start(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = &p.Log, &p.Log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.Name, err)
	}
	exited := make(chan struct{})
	go func() { p.err = cmd.Wait(); close(exited) }()
	p.cmd, p.exited = cmd, exited
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
}

// Exited is closed when the current run of the process has ended.
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// Kill sends SIGKILL — no drain, no lease release, possibly mid-transaction — and waits.
func (p *Process) Kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// Stop sends SIGTERM and returns the exit error (nil for a clean exit); after 30 s it kills.
func (p *Process) Stop() error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return p.err
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%s did not stop on SIGTERM", p.Name)
	}
}

// WaitReady waits until /readyz on MetricsAddr answers 200; it fails the test, with the
// process's output, when the process exits or 30 s pass first.
func (p *Process) WaitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get("http://" + p.MetricsAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.Exited():
			t.Fatalf("%s exited before it was ready:\n%s", p.Name, p.Log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready:\n%s", p.Name, p.Log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
