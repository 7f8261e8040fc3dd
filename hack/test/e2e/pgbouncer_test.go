package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/hack/test/proctest"
	"github.com/boardreadyops/cloud/pkg/hubsig"
	"github.com/boardreadyops/cloud/pkg/migrate"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
	"github.com/boardreadyops/cloud/pkg/testkit/pgcluster"
)

// bouncerMode is the pgx query mode behind a transaction-pooling PgBouncer (docs/operations.md,
// "Connection poolers"): unnamed statements only, one round trip, no statement cache, so it works
// with PgBouncer 1.18 (no prepared-statement support) and with ≥ 1.21.
const bouncerMode = "default_query_exec_mode=exec"

// TestPgBouncerEndToEnd runs the release loop four times on one server, each on its own
// database: directly (with LISTEN and polling only), and with every service connected through a real PgBouncer in transaction
// pooling mode (the migration runs on the direct URL: it holds a session advisory lock) — once
// with LISTEN disabled, as docs/operations.md says, and once with LISTEN left on by mistake.
// Through a transaction pooler a LISTEN lands on whichever server connection the pooler picked and
// its notifications are lost, so in both pooled runs every job and effect is found by polling:
// the loop completing proves the polling fallback. Each run's throughput is logged (runs/s from
// the first push to the last effect completed) for docs/performance.md.
func TestPgBouncerEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	version, err := pgcluster.BouncerVersion()
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	b, err := c.StartBouncer(ctx, pgcluster.BouncerOptions{PoolMode: "transaction", DefaultPoolSize: 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pgbouncer log:\n%s", b.Log())
		}
		_ = b.Stop()
	})
	dir := t.TempDir()
	build(t, dir)

	runs := 60
	if testing.Short() {
		runs = 24
	}
	variants := []struct {
		name, database string
		pooled         bool
		listen         string
	}{
		{"direct", "loop_direct", false, "true"},
		// Polling only, as through the pooler: the same wake-up path, so the ratio to the next
		// run is the pooler's own cost.
		{"direct, LISTEN off", "loop_direct_poll", false, "false"},
		{"pgbouncer", "loop_pooled", true, "false"},
		{"pgbouncer, LISTEN left on", "loop_pooled_listen", true, "true"},
	}
	for _, v := range variants {
		direct := c.URL(v.database)
		createMigrated(t, c, v.database)
		serviceURL := direct
		if v.pooled {
			serviceURL = b.URL(v.database) + "&" + bouncerMode
		}
		// A 100 ms poll in every run, so that polling latency does not hide the pooler's cost.
		elapsed := releaseLoop(t, dir, direct, serviceURL, []string{"BOARDREADYOPS_LISTEN=" + v.listen,
			"BOARDREADYOPS_LIFECYCLE_POLL_INTERVAL=100ms", "BOARDREADYOPS_DISPATCHER_POLL_INTERVAL=100ms"}, runs)
		t.Logf("throughput %s (PgBouncer %s): %d runs in %v = %.1f runs/s", v.name, version, runs,
			elapsed.Round(time.Millisecond), float64(runs)/elapsed.Seconds())
	}
}

// createMigrated creates database on c and migrates it over the direct URL.
func createMigrated(t *testing.T, c *pgcluster.Cluster, database string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{database}.Sanitize())
	_ = conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := migrate.Open(c.URL(database), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
}

// releaseLoop starts the product on serviceURL, sends runs release-tag pushes from 4 concurrent
// senders, waits until every run succeeded and every effect completed (checked over checkURL),
// asserts one check run and one dispatch per run on the simulator, stops the product, and returns
// the time from the first push to the end.
func releaseLoop(t *testing.T, dir, checkURL, serviceURL string, extraEnv []string, runs int) time.Duration {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, checkURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	key, pub, err := githubsim.NewAppKey()
	if err != nil {
		t.Fatal(err)
	}
	var sb [24]byte
	_, _ = rand.Read(sb[:])
	secret := []byte(hex.EncodeToString(sb[:]))
	sub := t.TempDir()
	keyFile, secretFile := filepath.Join(sub, "app-key.pem"), filepath.Join(sub, "webhook-secret")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	ingestAddr := proctest.FreeAddr(t)
	sim := githubsim.New(githubsim.Options{AppID: appID, AppPublicKey: pub, AutoRepositories: true, TagCommit: githubsim.TagsAt(pushedSHA),
		WebhookURL: "http://" + ingestAddr + "/webhook", WebhookSecret: secret, RunDelay: 100 * time.Millisecond})
	defer sim.Close()
	gh := httptest.NewServer(sim)
	defer gh.Close()
	common := append([]string{"DATABASE_URL=" + serviceURL, "LOG_LEVEL=warn", fmt.Sprintf("BOARDREADYOPS_GITHUB_APP_ID=%d", appID)}, extraEnv...)
	procs := startProduct(t, dir, common, ingestAddr, secretFile, gh.URL, keyFile)

	count := func(q string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	start := time.Now()
	const senders = 4
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := s; i < runs; i += senders {
				if code := postPush(secret, ingestAddr, i%6, i/6); code != http.StatusAccepted {
					t.Errorf("push %d: answered %d", i, code)
				}
			}
		}()
	}
	wg.Wait()
	// Done: every run succeeded, its three effects completed, and its four deliveries (the push
	// and three workflow_run webhooks) processed.
	for count(`SELECT count(*) FROM release_runs WHERE status = 'succeeded'`) < runs ||
		count(`SELECT count(*) FROM control_plane_outbox WHERE status = 'completed'`) < 3*runs ||
		count(`SELECT count(*) FROM control_plane_jobs WHERE status = 'completed'`) < 2*runs { // a push and a completed workflow run each (the filter drops requested, in_progress)
		if time.Since(start) > 3*time.Minute {
			for _, p := range procs {
				t.Logf("%s log:\n%s", p.Name, p.Log.String())
			}
			t.Fatalf("not finished: %d succeeded runs, %d completed effects", count(`SELECT count(*) FROM release_runs WHERE status = 'succeeded'`),
				count(`SELECT count(*) FROM control_plane_outbox WHERE status = 'completed'`))
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	if n := count(`SELECT count(*) FROM control_plane_jobs WHERE status <> 'completed'`); n != 0 {
		t.Errorf("%d jobs not completed", n)
	}
	rows, err := pool.Query(ctx, `SELECT r.id::text, a.id::text, boardreadyops_release_run_external_id(r.repository_id, r.ref) FROM release_runs r JOIN execution_attempts a ON a.release_run_id = r.id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var run, attempt, externalID string
		_ = rows.Scan(&run, &attempt, &externalID)
		if n := len(sim.CheckRuns(externalID)); n != 1 {
			t.Errorf("release run %s: %d check runs, want 1", run, n)
		}
		if n := sim.Dispatches(attempt); n != 1 {
			t.Errorf("attempt %s dispatched %d times, want 1", attempt, n)
		}
	}
	rows.Close()
	for _, p := range procs {
		stop(t, p)
	}
	return elapsed
}

// postPush sends one signed release-tag push for repository r and returns the status code.
func postPush(secret []byte, ingestAddr string, r, tag int) int {
	body, _ := json.Marshal(map[string]any{
		"ref": fmt.Sprintf("refs/tags/v1.%d.0", tag), "before": strings.Repeat("0", 40), "after": pushedSHA,
		"created": true, "deleted": false, "installation": map[string]any{"id": 6000 + r%2},
		"repository": map[string]any{"id": githubsim.RepositoryID(fmt.Sprintf("org-%d/repo-%d", r%2, r)), "name": fmt.Sprintf("repo-%d", r), "full_name": fmt.Sprintf("org-%d/repo-%d", r%2, r),
			"default_branch": "main", "owner": map[string]any{"login": fmt.Sprintf("org-%d", r%2), "type": "Organization"}},
	})
	var id [16]byte
	_, _ = rand.Read(id[:])
	req, _ := http.NewRequest(http.MethodPost, "http://"+ingestAddr+"/webhook", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", hex.EncodeToString(id[:]))
	req.Header.Set("X-Hub-Signature-256", hubsig.Sign(secret, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
