package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/migrate"
	"github.com/boardreadyops/cloud/pkg/testkit/pgcluster"
)

// pair is a primary with one streaming standby, and the multi-host URL the services use.
type pair struct {
	primary, standby *pgcluster.Cluster
	url              string // both hosts, target_session_attrs=read-write
}

// newPair starts a durable primary, takes a base backup of it into a streaming standby
// ("standby1"), migrates, and waits until the standby streams (and, with sync, is the
// synchronous standby: synchronous_commit = on, synchronous_standby_names = standby1).
func newPair(t *testing.T, sync bool) *pair {
	t.Helper()
	ctx := context.Background()
	p := startMigrated(t, pgcluster.Options{Durable: true})
	s, err := p.StartStandby(ctx, "standby1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	if sync {
		// Only now: with no standby connected, every commit would wait for one.
		conn, err := pgx.Connect(ctx, p.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = 'standby1'")
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT pg_reload_conf()")
		}
		_ = conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := p.WaitStreaming(ctx, "standby1", sync); err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "postgres", User: url.User(pgcluster.Superuser),
		Host:     fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", p.Port(), s.Port()),
		Path:     "/postgres",
		RawQuery: "sslmode=disable&target_session_attrs=read-write&connect_timeout=2"}
	return &pair{primary: p, standby: s, url: u.String()}
}

// startMigrated starts a private cluster (stopped when the test ends) and migrates its postgres
// database.
func startMigrated(t *testing.T, opts pgcluster.Options) *pgcluster.Cluster {
	t.Helper()
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	m, err := migrate.Open(c.URL("postgres"), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// firstAckAfter is how long after t0 the first delivery was answered 2xx (0: none was).
func (e *env) firstAckAfter(t0 time.Time) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	var first time.Duration
	for _, at := range e.ackedAt {
		if d := at.Sub(t0); d > 0 && (first == 0 || d < first) {
			first = d
		}
	}
	return first
}

// TestFailoverSynchronous kills the primary (SIGKILL of the whole server) while the load runs
// and promotes its synchronous standby. The services were started once with a DATABASE_URL that
// names both hosts and target_session_attrs=read-write; they are not restarted. Every
// acknowledged delivery must be on the new primary (a commit returned only once the standby had
// flushed it), every run terminal, nothing duplicated on GitHub's side.
func TestFailoverSynchronous(t *testing.T) {
	t.Parallel()
	pr := newPair(t, true)
	e := newEnvOn(t, pr.url, envOptions{})
	runs, over := size()
	var killed time.Time
	var promoted time.Duration
	during(e, runs, over, 1, func(int) {
		killed = time.Now()
		pr.primary.Kill()
		if err := pr.standby.Promote(context.Background()); err != nil {
			t.Fatalf("promote: %v", err)
		}
		promoted = time.Since(killed)
		e.mu.Lock()
		e.crashes++
		e.mu.Unlock()
	})
	// Deliveries answered 503 while there was no primary are not retried by GitHub; the chart's
	// redelivery CronJob (brops webhooks redeliver) brings them back, as it does here.
	e.redeliverEvery(3 * time.Second)
	r := e.check("failover, synchronous standby", runs)
	first := e.firstAckAfter(killed.Add(promoted))
	t.Logf("failover: kill → standby promoted %v; kill → first delivery committed on the new primary %v",
		promoted.Round(time.Millisecond), (promoted + first).Round(time.Millisecond))
	if r.Lost != 0 || r.Duplicates != 0 {
		t.Errorf("report %s", r)
	}
	e.requireRunning()
}

// requireRunning fails the test when a service exited: they must ride out database faults.
func (e *env) requireRunning() {
	e.t.Helper()
	for name, s := range e.svc {
		select {
		case <-s.Exited():
			e.t.Errorf("%s exited; services must recover without a restart", name)
		default:
		}
	}
}

// ready is a service's /readyz status code (0 when it cannot be reached).
func (e *env) ready(name string) int {
	resp, err := http.Get("http://" + e.svc[name].MetricsAddr + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestReadOnlyPrimary turns the primary read-only under load, as a switchover does
// (default_transaction_read_only = on, reloaded), and back. While it lasts every service reports
// not ready and ingest refuses deliveries with 503 (GitHub would retry); afterwards everything
// recovers without a restart and the invariants hold.
func TestReadOnlyPrimary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := startMigrated(t, pgcluster.Options{Durable: true})
	e := newEnvOn(t, c.URL("postgres"), envOptions{})
	admin, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	// This session must write the switch back.
	if _, err := admin.Exec(ctx, "SET default_transaction_read_only = off"); err != nil {
		t.Fatal(err)
	}
	readOnly := func(on bool) {
		t.Helper()
		stmt := "ALTER SYSTEM RESET default_transaction_read_only"
		if on {
			stmt = "ALTER SYSTEM SET default_transaction_read_only = on"
		}
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
			t.Fatal(err)
		}
	}
	runs, over := size()
	notReady := map[string]bool{}
	refused := false
	during(e, runs, over, 1, func(int) {
		readOnly(true)
		deadline := time.Now().Add(20 * time.Second)
		for len(notReady) < len(e.svc) && time.Now().Before(deadline) {
			for name := range e.svc {
				if e.ready(name) == http.StatusServiceUnavailable {
					notReady[name] = true
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		if code := e.post(newID(), "ping", []byte(`{"zen":"read-only","hook_id":1}`), true); code == http.StatusServiceUnavailable {
			refused = true
		}
		readOnly(false)
		for name := range e.svc {
			for e.ready(name) != http.StatusOK {
				if time.Now().After(deadline.Add(20 * time.Second)) {
					t.Fatalf("%s not ready again after the switch back", name)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		e.mu.Lock()
		e.crashes++
		e.mu.Unlock()
	})
	e.check("read-only primary (switchover)", runs)
	for name := range e.svc {
		if !notReady[name] {
			t.Errorf("%s stayed ready while the database was read-only", name)
		}
	}
	if !refused {
		t.Error("ingest did not answer 503 to a delivery while the database was read-only")
	}
	e.requireRunning()
}

// TestFailoverAsynchronous shows what asynchronous replication loses. The standby stops receiving
// WAL (its primary_conninfo emptied) while the load goes on; the primary keeps acknowledging
// deliveries (202) that exist nowhere else; then it is killed and the standby promoted. The test
// lists exactly the acknowledged deliveries that are gone: each was acknowledged after the cut.
// Recovery is the restore runbook (docs/operations.md): the dispatcher is kept off the new
// primary until brops restore fence ran, the lost deliveries come back with the printed
// brops webhooks redeliver command, and the invariants then hold.
func TestFailoverAsynchronous(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pr := newPair(t, false)
	e := newEnvOn(t, pr.url, envOptions{})
	runs, over := size()
	// The last deliveries are sent after the cut by construction, so some acknowledged
	// deliveries are always lost however late the random cut falls or how long it takes.
	const afterCut = 4
	var cut time.Time
	during(e, runs-afterCut, over, 1, func(int) {
		conn, err := pgx.Connect(ctx, pr.standby.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, "ALTER SYSTEM SET primary_conninfo = ''")
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT pg_reload_conf()")
		}
		_ = conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for pid, _ := pr.standby.WALReceiverPID(ctx); pid != 0; pid, _ = pr.standby.WALReceiverPID(ctx) {
			time.Sleep(10 * time.Millisecond)
		}
		cut = time.Now()
	})
	for i := runs - afterCut; i < runs; i++ {
		e.deliver("push", push(i%loadRepos, i/loadRepos))
	}
	// The old primary's last acknowledgements, then its end.
	e.svc["outbox-dispatcher"].Kill()
	pr.primary.Kill()
	if err := pr.standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	acked := make([]string, 0, len(e.acked))
	for id := range e.acked {
		acked = append(acked, id)
	}
	e.mu.Unlock()
	var lost []string
	rows, err := e.pool.Query(ctx, `SELECT d.id FROM unnest($1::text[]) d(id) WHERE NOT EXISTS (SELECT 1 FROM webhook_inbox i WHERE i.delivery_id = d.id) ORDER BY 1`, acked)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		lost = append(lost, id)
	}
	rows.Close()
	early := 0
	for _, id := range lost {
		if at := e.ackedAt[id]; at.Before(cut.Add(-time.Second)) {
			early++
			t.Errorf("delivery %s acknowledged at %s, well before the cut (%s), is lost", id, at.Format(time.RFC3339Nano), cut.Format(time.RFC3339Nano))
		}
	}
	t.Logf("asynchronous failover: %d of %d acknowledged deliveries lost, all acknowledged after the standby stopped receiving: %v",
		len(lost), len(acked), lost)
	if len(lost) == 0 {
		t.Error("no acknowledged delivery was lost: the cut did not take effect before the kill")
	}

	out := e.brops("restore", "fence", "--since", cut.UTC().Format(time.RFC3339Nano), "--margin", "1m", "-o", "json")
	var fence struct {
		Redeliver string `json:"redeliver_command"`
	}
	if err := json.Unmarshal(out, &fence); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	e.dumpOnFailure()
	e.svc["outbox-dispatcher"].Start(t)
	e.svc["outbox-dispatcher"].WaitReady(t)
	e.redeliverAll(strings.Fields(strings.TrimPrefix(fence.Redeliver, "brops ")))
	e.closeHoldAfter(lost)
	r := e.check("failover, asynchronous standby", runs)
	if r.Duplicates != 0 || r.Lost != 0 {
		t.Errorf("report %s", r)
	}
	e.requireRunning()
}

// redeliverEvery runs `brops webhooks redeliver` every interval until the test ends, as the
// chart's CronJob does: GitHub never retries a failed delivery by itself, so a delivery answered
// 503 during a failover comes back only this way.
func (e *env) redeliverEvery(interval time.Duration) {
	e.t.Helper()
	stop := make(chan struct{})
	done := make(chan struct{})
	bin := filepath.Join(binaries(e.t), "brops")
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			cmd := exec.Command(bin, "webhooks", "redeliver", "--since", "1h", "--github-api-url", e.gh.URL+"/",
				"--github-app-id", strconv.Itoa(appID), "--github-private-key-file", e.keyFile)
			cmd.Env = append(os.Environ(), "DATABASE_URL="+e.dbURL, "BOARDREADYOPS_OPERATOR=chaos-suite")
			if out, err := cmd.CombinedOutput(); err != nil {
				e.t.Logf("brops webhooks redeliver: %v\n%s", err, out)
			}
		}
	}()
	e.t.Cleanup(func() {
		close(stop)
		<-done
	})
}
