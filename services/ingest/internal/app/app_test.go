package app_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/hubsig"
	"github.com/boardreadyops/cloud/pkg/migrate"
	"github.com/boardreadyops/cloud/pkg/testkit/freeport"
	"github.com/boardreadyops/cloud/pkg/testkit/pgcluster"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
	"github.com/boardreadyops/cloud/services/ingest/internal/app"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

type ingest struct {
	url, metrics string
	secret       []byte
	logs         *syncBuffer
}

func TestMain(m *testing.M) { pgtest.Main(m) }

// start runs the real service (config parsing, secrets file, pool, servers) against dbURL, with
// extra environment as name, value pairs.
func start(t *testing.T, dbURL string, extra ...string) *ingest {
	t.Helper()
	dir := t.TempDir()
	secret := []byte(fmt.Sprintf("generated-%d", time.Now().UnixNano()))
	secretFile := filepath.Join(dir, "secrets")
	if err := os.WriteFile(secretFile, append([]byte("retired-generated-secret\n"), secret...), 0o600); err != nil {
		t.Fatal(err)
	}
	in := &ingest{url: "http://" + freeAddr(t) + "/webhook", metrics: freeAddr(t), secret: secret, logs: &syncBuffer{}}
	env := map[string]string{
		"DATABASE_URL": dbURL, "METRICS_ADDR": in.metrics, "LISTEN_ADDR": strings.TrimSuffix(strings.TrimPrefix(in.url, "http://"), "/webhook"),
		"BOARDREADYOPS_WEBHOOK_SECRET_FILE": secretFile, "BOARDREADYOPS_INGEST_STORE_TIMEOUT": "2s",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, nil, func(k string) string { return env[k] }, in.logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("run: %v\n%s", err, in.logs)
			}
		case <-time.After(30 * time.Second):
			t.Error("ingest did not stop")
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + in.metrics + "/healthz")
		if err == nil {
			resp.Body.Close()
			if c, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(in.url, "http://"), "/webhook")); err == nil {
				c.Close()
				return in
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("ingest did not start:\n%s", in.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (in *ingest) ping(t *testing.T, delivery string) (int, string) {
	t.Helper()
	return in.pingWith(t, http.DefaultClient, delivery)
}

func (in *ingest) pingWith(t *testing.T, client *http.Client, delivery string) (int, string) {
	t.Helper()
	body := []byte(`{"zen":"Keep it logically awesome (` + delivery + `).","hook_id":1,"hook":{"app_id":7}}`) // a body per delivery: a body is never accepted twice
	r, _ := http.NewRequest(http.MethodPost, in.url, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-GitHub-Event", "ping")
	r.Header.Set("X-GitHub-Delivery", delivery)
	r.Header.Set("X-Hub-Signature-256", hubsig.Sign(in.secret, body))
	resp, err := client.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

func TestDatabaseOutageAnswers503AndRecovers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "ingest-outage-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	dbURL := cluster.URL("postgres")
	r, err := migrate.Open(dbURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Up(ctx); err != nil {
		t.Fatal(err)
	}
	r.Close()

	in := start(t, dbURL)
	if status, _ := in.ping(t, "before-outage"); status != http.StatusAccepted {
		t.Fatalf("before outage: %d\n%s", status, in.logs)
	}

	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	status, retry := in.ping(t, "during-outage")
	if status != http.StatusServiceUnavailable || retry == "" {
		t.Fatalf("during outage: %d Retry-After %q", status, retry)
	}
	if resp, err := http.Get("http://" + in.metrics + "/readyz"); err != nil || resp.StatusCode != 503 {
		t.Fatalf("readyz during outage: %v %v", resp, err)
	}

	restarted, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Port: cluster.Port()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = restarted.Stop() })
	// No restart of ingest: the pool reconnects.
	deadline := time.Now().Add(15 * time.Second)
	for {
		status, _ = in.ping(t, "during-outage") // GitHub's redelivery of the refused delivery
		if status == http.StatusAccepted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery: last status %d\n%s", status, in.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var inbox, jobs int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_inbox), (SELECT count(*) FROM control_plane_jobs)`).Scan(&inbox, &jobs); err != nil {
		t.Fatal(err)
	}
	if inbox != 2 || jobs != 2 {
		t.Fatalf("%d inbox rows and %d jobs, want 2 and 2 (nothing half-written, nothing lost)", inbox, jobs)
	}
}

func TestSlowClientIsCutOff(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "ingest-slow-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// The database is never reached; a URL is enough.
	in := start(t, "postgres://postgres@127.0.0.1:1/none?sslmode=disable")
	conn, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(in.url, "http://"), "/webhook"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Half a request line, then nothing: the server must close the connection (header timeout).
	if _, err := conn.Write([]byte("POST /webhook HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	start := time.Now()
	_, err = io.ReadAll(conn)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("server kept a slow client's connection open for 15s")
		}
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("connection closed only after %v", waited)
	}
}

// Idle keep-alive connections filling the connection cap: they are closed to make room, so a
// genuine delivery is answered within GitHub's 10 s, even though the idle timeout (here the
// longest allowed, 2 minutes) has not passed for any of them.
func TestIdleConnectionsAreShedAtTheCap(t *testing.T) {
	t.Parallel()
	const maxConns = 8
	in := start(t, pgtest.NewURL(t), "BOARDREADYOPS_INGEST_MAX_CONNECTIONS", fmt.Sprint(maxConns), "BOARDREADYOPS_INGEST_IDLE_TIMEOUT", "2m")
	// Each idle client sends one request on its own keep-alive connection and keeps it open.
	var idle []*http.Client
	for i := 0; i < maxConns; i++ {
		c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, IdleConnTimeout: 10 * time.Minute}}
		t.Cleanup(c.CloseIdleConnections)
		if status, _ := in.pingWith(t, c, fmt.Sprintf("idle-%d", i)); status != http.StatusAccepted {
			t.Fatalf("idle client %d: %d", i, status)
		}
		idle = append(idle, c)
	}
	genuine := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := 0; i < 3; i++ {
		if status, _ := in.pingWith(t, genuine, fmt.Sprintf("genuine-%d", i)); status != http.StatusAccepted {
			t.Fatalf("genuine delivery %d at the connection cap: %d", i, status)
		}
	}
	if len(idle) != maxConns {
		t.Fatal("idle clients lost")
	}
}

func TestConfigurationErrors(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	err := app.Run(context.Background(), nil, func(k string) string {
		return map[string]string{"DATABASE_URL": "postgres://x/y", "BOARDREADYOPS_WEBHOOK_PATH": "webhook", "BOARDREADYOPS_INGEST_STORE_TIMEOUT": "20s",
			"BOARDREADYOPS_WEBHOOK_CONTENT_TYPE": "xml", "BOARDREADYOPS_INGEST_MIN_BODY_RATE_KIB": "0", "BOARDREADYOPS_INGEST_IDLE_TIMEOUT": "10m"}[k]
	}, &logs)
	if err == nil {
		t.Fatal("bad configuration accepted")
	}
	for _, want := range []string{"BOARDREADYOPS_WEBHOOK_SECRET_FILE", "must start with /", "at most 9s",
		"want json or form", "BOARDREADYOPS_INGEST_MIN_BODY_RATE_KIB 0", "BOARDREADYOPS_INGEST_IDLE_TIMEOUT 10m0s"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("configuration error output lacks %q:\n%s", want, logs.String())
		}
	}
}

// A slow database keeps ingest ready: its readiness check runs out of time (here it waits on a
// lock another session holds) while deliveries are still stored (one in the last 30 s). Taking every replica out of the
// Service for it would refuse them at the ingress, where ingest counts nothing and GitHub does not
// retry.
func TestSlowDatabaseKeepsIngestReady(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewURL(t)
	in := start(t, dbURL)
	readyz := func() (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + in.metrics + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("readyz before: %d %s", code, body)
	}
	if status, _ := in.ping(t, "before-slow"); status != http.StatusAccepted { // deliveries are being stored
		t.Fatalf("delivery before: %d\n%s", status, in.logs)
	}

	// The readiness query reads the migrations' table; a session holding it locked makes that
	// query wait past the check's time, as a slow server or a pool busy with a burst would.
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE goose_db_version IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("readyz while the database is slow: %d %s\n%s", code, body, in.logs)
	}
	if status, _ := in.ping(t, "while-slow"); status != http.StatusAccepted {
		t.Fatalf("delivery while the database is slow: %d\n%s", status, in.logs)
	}
	if !strings.Contains(in.logs.String(), "staying ready") || strings.Contains(in.logs.String(), "not ready") {
		t.Errorf("want the slow check logged as such, not as not ready:\n%s", in.logs)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("readyz after: %d %s", code, body)
	}
}
