// Package e2e runs the product end to end: the real ingest, lifecycle and outbox-dispatcher
// binaries as separate processes on one database, the GitHub simulator over HTTP running the
// dispatched workflows, and signed webhooks in. It asserts what the product promises: every
// accepted delivery processed, exactly one check run per release run, exactly one dispatch per
// execution attempt, every effect terminal.
package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/hack/test/proctest"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const appID = 4242

// pushedSHA is the commit every tag the test pushes points at (the simulator's tags, githubsim.TagsAt).
const pushedSHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"

// build compiles the services once per test run.
func build(t *testing.T, dir string) {
	t.Helper()
	if err := proctest.Build(dir, "ingest", "lifecycle", "outbox-dispatcher"); err != nil {
		t.Fatal(err)
	}
}

// startProduct starts ingest, lifecycle and outbox-dispatcher from dir with the common
// environment and waits until each is ready.
func startProduct(t *testing.T, dir string, common []string, ingestAddr, secretFile, githubURL, keyFile string, databaseURLs ...map[string]string) []*proctest.Process {
	t.Helper()
	own := map[string][]string{
		"ingest":            {"LISTEN_ADDR=" + ingestAddr, "BOARDREADYOPS_WEBHOOK_SECRET_FILE=" + secretFile},
		"lifecycle":         nil,
		"outbox-dispatcher": {"BOARDREADYOPS_GITHUB_API_URL=" + githubURL, "BOARDREADYOPS_GITHUB_PRIVATE_KEY_FILE=" + keyFile},
	}
	var procs []*proctest.Process
	for _, name := range []string{"ingest", "lifecycle", "outbox-dispatcher"} {
		addr := proctest.FreeAddr(t)
		env := append(append(append([]string{}, common...), own[name]...), "METRICS_ADDR="+addr)
		for _, urls := range databaseURLs {
			if u, ok := urls[name]; ok {
				env = append(env, "DATABASE_URL="+u) // the last value of a key wins
			}
		}
		p := &proctest.Process{Name: name, Bin: filepath.Join(dir, name), Env: env, MetricsAddr: addr}
		p.Start(t)
		procs = append(procs, p)
	}
	for _, p := range procs {
		p.WaitReady(t)
	}
	return procs
}

// stop sends SIGTERM and expects a clean exit.
func stop(t *testing.T, p *proctest.Process) {
	t.Helper()
	if err := p.Stop(); err != nil {
		t.Errorf("%s: %v:\n%s", p.Name, err, p.Log.String())
	}
}

func TestReleasesEndToEnd(t *testing.T) {
	t.Parallel()
	releasesEndToEnd(t, pgtest.NewURL(t), nil)
}

// releasesEndToEnd runs the release loop on the migrated database at dbURL (a superuser URL,
// for the assertions); each service connects with logins[service] when given, else with dbURL.
func releasesEndToEnd(t *testing.T, dbURL string, logins map[string]string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	build(t, dir)
	pool, err := pxpool(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	pub, secret, keyFile, secretFile := appCredentials(t, dir)
	ingestAddr := proctest.FreeAddr(t)
	sim := githubsim.New(githubsim.Options{AppID: appID, AppPublicKey: pub, AutoRepositories: true, TagCommit: githubsim.TagsAt(pushedSHA),
		WebhookURL: "http://" + ingestAddr + "/webhook", WebhookSecret: secret, RunDelay: 100 * time.Millisecond, CheckEvents: true})
	defer sim.Close()
	gh := httptest.NewServer(sim)
	defer gh.Close()

	common := []string{"DATABASE_URL=" + dbURL, "LOG_LEVEL=warn", fmt.Sprintf("BOARDREADYOPS_GITHUB_APP_ID=%d", appID)}
	procs := startProduct(t, dir, common, ingestAddr, secretFile, gh.URL, keyFile, logins)

	send := webhookSender(t, secret, ingestAddr)
	const repos, tags = 4, 5
	for r := 0; r < repos; r++ {
		for i := 0; i < tags; i++ {
			send("push", map[string]any{
				"ref": fmt.Sprintf("refs/tags/v1.%d.0", i), "before": strings.Repeat("0", 40), "after": pushedSHA,
				"created": true, "deleted": false, "installation": map[string]any{"id": 5000 + r%2},
				"repository": map[string]any{"id": githubsim.RepositoryID(fmt.Sprintf("org-%d/repo-%d", r%2, r)), "name": fmt.Sprintf("repo-%d", r), "full_name": fmt.Sprintf("org-%d/repo-%d", r%2, r),
					"default_branch": "main", "owner": map[string]any{"login": fmt.Sprintf("org-%d", r%2), "type": "Organization"}},
			})
		}
	}
	// Deliveries that can never matter, which the filter (on by default) answers 202 and drops:
	// a branch push and a CI run's completion per repository, beside the simulator's requested
	// and in_progress of every dispatched run.
	for r := 0; r < repos; r++ {
		repo := map[string]any{"id": githubsim.RepositoryID(fmt.Sprintf("org-%d/repo-%d", r%2, r)), "name": fmt.Sprintf("repo-%d", r),
			"full_name": fmt.Sprintf("org-%d/repo-%d", r%2, r), "default_branch": "main", "owner": map[string]any{"login": fmt.Sprintf("org-%d", r%2), "type": "Organization"}}
		send("push", map[string]any{"ref": "refs/heads/main", "before": strings.Repeat("0", 40), "after": strings.Repeat("c", 40),
			"created": false, "deleted": false, "installation": map[string]any{"id": 5000 + r%2}, "repository": repo})
		send("workflow_run", map[string]any{"action": "completed", "installation": map[string]any{"id": 5000 + r%2}, "repository": repo,
			"workflow_run": map[string]any{"id": 900000 + r, "status": "completed", "conclusion": "success", "event": "push",
				"path": ".github/workflows/ci.yml", "head_sha": strings.Repeat("c", 40)}})
	}
	const runs = repos * tags
	count := func(q string) int {
		var n int
		if err := pool.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(90 * time.Second)
	// The jobs too: a workflow_run delivery that arrived before its dispatch was recorded is
	// deferred, and may still wait for its retry after the run it belongs to succeeded.
	for count(`SELECT count(*) FROM release_runs WHERE status = 'succeeded'`) < runs ||
		count(`SELECT count(*) FROM control_plane_outbox WHERE status = 'completed'`) < 4*runs ||
		count(`SELECT count(*) FROM control_plane_jobs WHERE status <> 'completed'`) > 0 {
		if time.Now().After(deadline) {
			for _, p := range procs {
				t.Logf("%s log:\n%s", p.Name, p.Log.String())
			}
			t.Fatalf("not finished: %d succeeded runs, %d completed effects, %d jobs not completed",
				count(`SELECT count(*) FROM release_runs WHERE status = 'succeeded'`),
				count(`SELECT count(*) FROM control_plane_outbox WHERE status = 'completed'`),
				count(`SELECT count(*) FROM control_plane_jobs WHERE status <> 'completed'`))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The filter drops the 40 requested/in_progress webhooks, 4 branch pushes and 4 CI runs, and
	// GitHub's check events (githubsim's CheckEvents): check_run created and completed of the
	// product's check run and of the workflow's job, and check_suite completed of the job's suite
	// and of the product's suite of a commit when its last check run completes (the 5 tags of a
	// repository share a commit: 1 to 5 of those per repository). They follow the check run's
	// completion, so they are waited for.
	// A check event counts once it was answered 202 (one refused under load is sent again, as
	// GitHub would, under its delivery id); ingest answers anything else only to a failure.
	checkEvents := func() (n int) {
		accepted := map[string]bool{}
		for _, d := range sim.Deliveries() {
			if (d.Event == "check_run" || d.Event == "check_suite") && d.StatusCode >= 400 && d.StatusCode < 500 && d.StatusCode != http.StatusRequestTimeout {
				t.Fatalf("%s %s refused: %d", d.Event, d.Action, d.StatusCode)
			}
			if (d.Event == "check_run" || d.Event == "check_suite") && d.StatusCode == http.StatusAccepted && !accepted[d.GUID] {
				accepted[d.GUID] = true
				n++
			}
		}
		return n
	}
	for {
		n, events := scrapeSum(t, procs[0].MetricsAddr, "boardreadyops_webhook_deliveries_filtered_total"), checkEvents()
		// At least: a delivery ingest answered whose answer the simulator did not see is sent
		// again and counted twice.
		if events >= runs*5+repos && n >= float64(runs*2+repos*2+events) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v deliveries filtered, want %d; %d check events, want at least %d", n, runs*2+repos*2+events, events, runs*5+repos)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Every stored delivery was processed: 20 tag pushes and 20 workflow_run completions, and
	// nothing else.
	if n, done := count(`SELECT count(*) FROM webhook_inbox`), count(`SELECT count(*) FROM control_plane_jobs WHERE status = 'completed'`); n != runs*2 || done != n {
		t.Fatalf("%d deliveries stored, %d jobs completed; want %d and all", n, done, runs*2)
	}
	if n := count(`SELECT count(*) FROM control_plane_outbox WHERE status <> 'completed'`); n != 0 {
		t.Fatalf("%d effects not terminal-completed", n)
	}
	rows, err := pool.Query(ctx, `SELECT r.id::text, a.id::text, boardreadyops_release_run_external_id(r.repository_id, r.ref) FROM release_runs r JOIN execution_attempts a ON a.release_run_id = r.id`)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for rows.Next() {
		var run, attempt, externalID string
		_ = rows.Scan(&run, &attempt, &externalID)
		crs := sim.CheckRuns(externalID)
		if len(crs) != 1 || crs[0].Status != "completed" || crs[0].Conclusion == nil || *crs[0].Conclusion != "success" {
			t.Errorf("release run %s: check runs %+v, want exactly one, completed with success", run, crs)
		}
		if n := sim.Dispatches(attempt); n != 1 {
			t.Errorf("attempt %s dispatched %d times, want exactly 1", attempt, n)
		}
		checked++
	}
	if checked != runs {
		t.Fatalf("%d attempts, want %d", checked, runs)
	}
	for _, p := range procs {
		stop(t, p)
	}
}

func pxpool(ctx context.Context, url string) (*pgxpool.Pool, error) { return pgxpool.New(ctx, url) }

// scrapeSum adds up every sample of a metric on a service's /metrics.
func scrapeSum(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		sum += v
	}
	return sum
}
