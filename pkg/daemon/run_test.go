package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/daemon"
	"github.com/boardreadyops/cloud/pkg/testkit/freeport"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func waitStatus(t *testing.T, url string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last int
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			last = resp.StatusCode
			resp.Body.Close()
			if last == want {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("GET %s: last status %d, want %d", url, last, want)
}

func TestRunServesAndStopsOnCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		dbURL     func(tb testing.TB) string
		wantReady int
	}{
		{"migrated database is ready", pgtest.NewURL, http.StatusOK},
		{"unmigrated database is not ready", pgtest.NewEmptyURL, http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr := freeAddr(t)
			env := map[string]string{"DATABASE_URL": tt.dbURL(t), "METRICS_ADDR": addr}
			ctx, cancel := context.WithCancel(context.Background())
			var logs syncBuffer
			var worked sync.WaitGroup
			worked.Add(1)
			done := make(chan error, 1)
			go func() {
				done <- daemon.Run(ctx, daemon.Spec{Name: "test", Work: func(ctx context.Context, b *daemon.Base) error {
					defer worked.Done()
					<-ctx.Done() // a service's work drains when its context ends
					return nil
				}}, nil, func(k string) string { return env[k] }, &logs)
			}()
			waitStatus(t, "http://"+addr+"/healthz", http.StatusOK)
			waitStatus(t, "http://"+addr+"/readyz", tt.wantReady)
			// Every service exports its pool's statistics (docs/operations.md).
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !bytes.Contains(body, []byte("\nboardreadyops_db_pool_max_connections 10\n")) {
				t.Errorf("/metrics lacks the pool's statistics:\n%s", body)
			}
			cancel()
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Fatalf("run: %v\n%s", err, logs.b.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatal("run did not stop after cancel")
			}
			worked.Wait()
		})
	}
}

func TestRunRejectsBadConfiguration(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	err := daemon.Run(context.Background(), daemon.Spec{Name: "test"}, []string{"--db-max-conns", "0"},
		func(string) string { return "" }, &logs)
	if !errors.Is(err, daemon.ErrUsage) {
		t.Fatalf("error %v, want ErrUsage", err)
	}
	out := logs.b.String()
	for _, want := range []string{"DATABASE_URL (or --database-url) is required", "BOARDREADYOPS_DB_MAX_CONNS 0"} {
		if !bytes.Contains([]byte(out), []byte(want)) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
}

func TestStartRequiresAName(t *testing.T) {
	t.Parallel()
	if _, err := daemon.Start(context.Background(), daemon.StartConfig{}); err == nil {
		t.Fatal("a base without a name was started")
	}
}

// Usage output never shows the database URL, whose password a deployment passes in DATABASE_URL:
// Go's flag package prints a flag's default on -h and on any unknown flag, to stderr, which is
// the container's log (README: secrets are never logged).
func TestRunUsageHidesTheDatabaseURL(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://u:s3cret@h/db"}
	for _, tt := range []struct {
		args    []string
		wantErr error
	}{
		{[]string{"--bogus"}, daemon.ErrUsage},
		{[]string{"-h"}, nil},
	} {
		t.Run(tt.args[0], func(t *testing.T) {
			t.Parallel()
			var logs syncBuffer
			err := daemon.Run(context.Background(), daemon.Spec{Name: "test"}, tt.args, func(k string) string { return env[k] }, &logs)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			out := logs.b.String()
			if !strings.Contains(out, "-database-url") {
				t.Fatalf("no usage printed:\n%s", out)
			}
			if strings.Contains(out, "s3cret") {
				t.Errorf("usage shows the database password:\n%s", out)
			}
		})
	}
}
