// Package chaos is the fault-injection suite: the real ingest, lifecycle and outbox-dispatcher
// binaries on one database with the GitHub simulator, under load, with crashes and GitHub faults
// injected; after each scenario an invariant checker proves nothing was lost and nothing done
// twice. `make test` runs the short variant; `make chaos` the full one (BOARDREADYOPS_CHAOS=full)
// and prints each scenario's report.
package chaos_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/hack/test/proctest"
	"github.com/boardreadyops/cloud/pkg/hubsig"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// TestMain removes the binaries built once per test process (115 MB; they piled up in the
// temporary directory, one set per run).
func TestMain(m *testing.M) {
	pgtest.Main(m, func() {
		if binDir != "" {
			_ = os.RemoveAll(binDir)
		}
	})
}

const appID = 4343

// full reports whether the long variant runs (make chaos).
func full() bool { return os.Getenv("BOARDREADYOPS_CHAOS") == "full" }

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds the services and brops once per test process.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "boardreadyops-chaos-bin-")
		if buildErr != nil {
			return
		}
		buildErr = proctest.Build(binDir, "ingest", "lifecycle", "outbox-dispatcher", "brops")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// env is one scenario's whole product: database, simulator, services, sender.
type env struct {
	t                   *testing.T
	dbURL               string
	pool                *pgxpool.Pool
	sim                 *githubsim.Simulator
	gh                  *httptest.Server
	secret              []byte
	keyFile, secretFile string
	ingestAddr          string
	svc                 map[string]*proctest.Process

	mu        sync.Mutex
	acked     map[string]bool      // delivery ids answered 2xx
	ackedAt   map[string]time.Time // when deliver saw the 2xx
	ackedBody map[string][]byte    // what deliver sent (for the failover scenarios' redelivery)
	crashes   int
	retries   int
	extraRuns int            // release runs created beyond the load (the mid-request crash's push)
	poisonOut map[string]int // poison deliveries by answer
}

// envOptions shape a scenario's deployment.
type envOptions struct {
	// dispatchers is the number of outbox-dispatcher replicas (at least 1).
	dispatchers int
}

// newEnv starts a scenario on a fresh database of the package's shared server.
func newEnv(t *testing.T) *env { t.Helper(); return newEnvOn(t, pgtest.NewURL(t), envOptions{}) }

// newEnvOn starts a scenario on the migrated database at dbURL.
func newEnvOn(t *testing.T, dbURL string, opts envOptions) *env {
	t.Helper()
	dir := t.TempDir()
	bin := binaries(t)
	e := &env{t: t, dbURL: dbURL, acked: map[string]bool{}, ackedAt: map[string]time.Time{}, ackedBody: map[string][]byte{}, poisonOut: map[string]int{}, svc: map[string]*proctest.Process{}}
	var err error
	if e.pool, err = pgxpool.New(context.Background(), e.dbURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.pool.Close)
	key, pub, err := githubsim.NewAppKey()
	if err != nil {
		t.Fatal(err)
	}
	var sb [24]byte
	_, _ = rand.Read(sb[:])
	e.secret = []byte(hex.EncodeToString(sb[:]))
	e.keyFile, e.secretFile = filepath.Join(dir, "app-key.pem"), filepath.Join(dir, "webhook-secret")
	if err := os.WriteFile(e.keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.secretFile, e.secret, 0o600); err != nil {
		t.Fatal(err)
	}
	e.ingestAddr = proctest.FreeAddr(t)
	e.sim = githubsim.New(githubsim.Options{AppID: appID, AppPublicKey: pub, AutoRepositories: true, TagCommit: tagCommit,
		WebhookURL: "http://" + e.ingestAddr + "/webhook", WebhookSecret: e.secret, RunDelay: 100 * time.Millisecond})
	e.gh = httptest.NewServer(e.sim)
	t.Cleanup(func() { e.gh.Close(); e.sim.Close() })

	common := []string{"DATABASE_URL=" + e.dbURL, "LOG_LEVEL=warn", fmt.Sprintf("BOARDREADYOPS_GITHUB_APP_ID=%d", appID)}
	add := func(name string, extra ...string) {
		s := &proctest.Process{Name: name, Bin: filepath.Join(bin, name), MetricsAddr: proctest.FreeAddr(t)}
		// A replica's worker identity differs by pid; its metrics address by port.
		s.Env = append(append(append([]string{}, common...), "METRICS_ADDR="+s.MetricsAddr), extra...)
		e.svc[name] = s
	}
	add("ingest", "LISTEN_ADDR="+e.ingestAddr, "BOARDREADYOPS_WEBHOOK_SECRET_FILE="+e.secretFile)
	// Short leases so that work a killed process held is recovered within seconds.
	// A short job backoff so that a workflow_run deferred while its dispatch awaits
	// reconciliation is retried soon after the operator resolves it.
	add("lifecycle", "BOARDREADYOPS_LIFECYCLE_LEASE=5s", "BOARDREADYOPS_JOB_MAX_BACKOFF=2s")
	dispatcherEnv := []string{"BOARDREADYOPS_GITHUB_API_URL=" + e.gh.URL, "BOARDREADYOPS_GITHUB_PRIVATE_KEY_FILE=" + e.keyFile,
		"BOARDREADYOPS_DISPATCHER_LEASE=10s", "BOARDREADYOPS_GITHUB_REQUEST_TIMEOUT=2s", "BOARDREADYOPS_EFFECT_MAX_BACKOFF=2s",
		// Paced as in production (one request per installation at once), with a shorter interval
		// than GitHub's second so that three installations' load finishes within the test.
		"BOARDREADYOPS_DISPATCHER_MUTATION_INTERVAL=20ms"}
	for i := 2; i <= opts.dispatchers; i++ {
		// Further replicas: the same binary and settings; they coordinate only through the database.
		add("outbox-dispatcher", dispatcherEnv...)
		name := fmt.Sprintf("outbox-dispatcher-%d", i)
		e.svc[name] = e.svc["outbox-dispatcher"]
		e.svc[name].Name = name
	}
	add("outbox-dispatcher", dispatcherEnv...)
	for _, s := range e.svc {
		s.Start(t)
	}
	for _, s := range e.svc {
		s.WaitReady(t)
	}
	t.Cleanup(func() {
		for _, s := range e.svc {
			_ = s.Stop()
		}
		if t.Failed() {
			for _, s := range e.svc {
				t.Logf("%s log (tail):\n%s", s.Name, tail(s.Log.String(), 3000))
			}
		}
	})
	return e
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// stopServices stops every service (SIGTERM), as before a restore.
func (e *env) stopServices() {
	e.t.Helper()
	for _, s := range e.svc {
		if err := s.Stop(); err != nil {
			e.t.Errorf("stop %s: %v", s.Name, err)
		}
	}
}

// startServicesOn points every service and the checker at dbURL and starts the services again.
func (e *env) startServicesOn(dbURL string) {
	e.t.Helper()
	e.dbURL = dbURL
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(pool.Close)
	e.pool = pool
	for _, s := range e.svc {
		for i, kv := range s.Env {
			if strings.HasPrefix(kv, "DATABASE_URL=") {
				s.Env[i] = "DATABASE_URL=" + dbURL
			}
		}
		s.Start(e.t)
	}
	for _, s := range e.svc {
		s.WaitReady(e.t)
	}
}

// restart kills (SIGKILL) a service and starts it again.
func (e *env) restart(name string) {
	e.t.Helper()
	s := e.svc[name]
	s.Kill()
	e.mu.Lock()
	e.crashes++
	e.mu.Unlock()
	s.Start(e.t)
}

// killIngestMidRequest kills ingest while a delivery is in flight: the request's headers and
// half its body have arrived, no answer has been sent. The sender sees the connection drop and,
// as GitHub does, delivers the same delivery id again (to the restarted ingest).
func (e *env) killIngestMidRequest() {
	e.t.Helper()
	body, _ := json.Marshal(push(99, int(time.Now().UnixNano()%100000)))
	id := newID()
	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPost, "http://"+e.ingestAddr+"/webhook", pr)
	req.ContentLength = int64(len(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", hubsig.Sign(e.secret, body))
	done := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	_, _ = pw.Write(body[:len(body)/2])
	time.Sleep(50 * time.Millisecond) // the half body is read by ingest
	e.restart("ingest")
	_ = pw.CloseWithError(io.ErrUnexpectedEOF)
	if code := <-done; code >= 200 && code < 300 {
		e.t.Errorf("a request cut off by the crash was answered %d", code)
	}
	e.svc["ingest"].WaitReady(e.t)
	// GitHub's retry of the same delivery.
	for deadline := time.Now().Add(30 * time.Second); ; {
		code := e.post(id, "push", body, true)
		e.mu.Lock()
		e.retries++
		e.mu.Unlock()
		if code >= 200 && code < 300 {
			e.mu.Lock()
			e.acked[id] = true
			e.extraRuns++
			e.mu.Unlock()
			return
		}
		if time.Now().After(deadline) {
			e.t.Errorf("retried delivery %s never accepted (last %d)", id, code)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// post sends one delivery once and returns the status (0 when the connection failed).
func (e *env) post(id, event string, body []byte, sign bool) int {
	code, _ := e.postAnswer(id, event, body, sign)
	return code
}

// postAnswer is post, also returning the start of the answer's body.
func (e *env) postAnswer(id, event string, body []byte, sign bool) (int, string) {
	req, _ := http.NewRequest(http.MethodPost, "http://"+e.ingestAddr+"/webhook", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	if sign {
		req.Header.Set("X-Hub-Signature-256", hubsig.Sign(e.secret, body))
	} else {
		req.Header.Set("X-Hub-Signature-256", hubsig.Sign([]byte("not-the-secret"), body))
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	return resp.StatusCode, string(answer)
}

// deliver sends a delivery as GitHub does after a failure: the same delivery id again until it
// is answered 2xx (ingest may be down or restarting).
func (e *env) deliver(event string, payload any) {
	body, _ := json.Marshal(payload)
	id := newID()
	deadline := time.Now().Add(90 * time.Second)
	for {
		code := e.post(id, event, body, true)
		// GitHub's delivery log, which brops webhooks redeliver reads.
		e.sim.RecordDelivery(id, event, "", code, body, time.Now())
		if code >= 200 && code < 300 {
			e.mu.Lock()
			e.acked[id] = true
			e.ackedAt[id] = time.Now()
			e.ackedBody[id] = body
			e.mu.Unlock()
			return
		}
		if time.Now().After(deadline) {
			e.t.Errorf("delivery %s never accepted (last status %d)", id, code)
			return
		}
		e.mu.Lock()
		e.retries++
		e.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
	}
}

// deliverFiltered sends a delivery that ingest's filter drops (docs/webhooks.md, "Filtered
// deliveries"), such as a branch push, as GitHub does: again until answered 2xx. It logs it in
// GitHub's delivery log, and requires the answer to say it was filtered; it is not counted among
// the acknowledged deliveries that the inbox must hold. It returns the delivery's id.
func (e *env) deliverFiltered(event string, payload any) string {
	body, _ := json.Marshal(payload)
	id := newID()
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, answer := e.postAnswer(id, event, body, true)
		e.sim.RecordDelivery(id, event, "", code, body, time.Now())
		if code >= 200 && code < 300 {
			if !strings.Contains(answer, `"filtered"`) {
				e.t.Errorf("delivery %s answered %d %q, not filtered", id, code, answer)
			}
			return id
		}
		if time.Now().After(deadline) {
			e.t.Errorf("filtered delivery %s never accepted (last status %d)", id, code)
			return id
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// branchPush is a push to a branch of repository r, which ingest filters.
func branchPush(r, n int) map[string]any {
	p := push(r, n)
	p["ref"] = fmt.Sprintf("refs/heads/feature-%d", n)
	p["created"] = false
	return p
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// pushedSHA is the commit every release-tag push of the load points at.
const pushedSHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"

// tagCommit is the simulator's view of the pushed tags: each points at pushedSHA.
func tagCommit(_, _ string) string { return pushedSHA }

// push is a release-tag push for repository r (installations 7000, 7001, 7002 by r % 3).
func push(r, tag int) map[string]any {
	return map[string]any{
		"ref": fmt.Sprintf("refs/tags/v1.%d.0", tag), "before": strings.Repeat("0", 40), "after": pushedSHA,
		"created": true, "deleted": false, "installation": map[string]any{"id": 7000 + r%3},
		"repository": map[string]any{"id": githubsim.RepositoryID(fmt.Sprintf("org-%d/repo-%d", r%3, r)), "name": fmt.Sprintf("repo-%d", r), "full_name": fmt.Sprintf("org-%d/repo-%d", r%3, r),
			"default_branch": "main", "owner": map[string]any{"login": fmt.Sprintf("org-%d", r%3), "type": "Organization"}},
	}
}

// loadRepos is the number of repositories the load spreads its pushes over.
const loadRepos = 12

// load sends runs release-tag pushes from a few concurrent senders, spread over duration, and
// returns when every one was accepted.
func (e *env) load(runs int, duration time.Duration) { e.loadFrom(0, runs, duration) }

// loadFrom is load for the releases numbered first to first+runs-1: release n is the push of tag
// n / loadRepos to repository n % loadRepos, so a second load from where the first ended pushes
// new releases only.
func (e *env) loadFrom(first, runs int, duration time.Duration) {
	const senders, repos = 4, loadRepos
	var wg sync.WaitGroup
	gap := duration / time.Duration(max(runs/senders, 1))
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := s; i < runs; i += senders {
				n := first + i
				e.deliver("push", push(n%repos, n/repos))
				time.Sleep(gap)
			}
		}()
	}
	wg.Wait()
}
