// Package attack runs the attacks of docs/security.md against the real product: the ingest,
// lifecycle and outbox-dispatcher binaries as separate processes on one PostgreSQL, the GitHub
// simulator over HTTP, and signed deliveries in. Each attack is sent the way an attacker who
// captured one signed body would send it, and the test proves it had no effect on the state.
package attack_test

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

func TestMain(m *testing.M) { pgtest.Main(m) }

const appID = 4343

// product is one running product: its processes, database, simulator and webhook secret.
type product struct {
	dir        string
	pool       *pgxpool.Pool
	sim        *githubsim.Simulator
	secret     []byte
	ingestURL  string
	procs      []*proctest.Process
	gate       *gate
	secretFile string
}

// gate sits between the simulator and ingest: it forwards every webhook, except the workflow_run
// completions it is told to hold, so a test can keep an attempt running.
type gate struct {
	target string
	mu     sync.Mutex
	hold   map[int64]bool // repository ids whose workflow_run completions are held
	held   []heldDelivery
}

type heldDelivery struct {
	header http.Header
	body   []byte
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var p struct {
		Action     string `json:"action"`
		Repository struct {
			ID int64 `json:"id"`
		} `json:"repository"`
	}
	_ = json.Unmarshal(body, &p)
	g.mu.Lock()
	if r.Header.Get("X-GitHub-Event") == "workflow_run" && p.Action == "completed" && g.hold[p.Repository.ID] {
		g.held = append(g.held, heldDelivery{r.Header.Clone(), body})
		g.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		return
	}
	g.mu.Unlock()
	code, _ := post(g.target, r.Header, body)
	w.WriteHeader(code)
}

func (g *gate) holdCompletions(repositoryID int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold[repositoryID] = true
}

// release forwards the held deliveries.
func (g *gate) release(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	held := g.held
	g.held, g.hold = nil, map[int64]bool{}
	g.mu.Unlock()
	for _, d := range held {
		if code, err := post(g.target, d.header, d.body); err != nil || code != http.StatusAccepted {
			t.Fatalf("held delivery: %d %v", code, err)
		}
	}
}

func post(url string, h http.Header, body []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for _, k := range []string{"Content-Type", "X-GitHub-Event", "X-GitHub-Delivery", "X-Hub-Signature-256"} {
		req.Header.Set(k, h.Get(k))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// start builds the services and starts ingest, lifecycle and outbox-dispatcher on a fresh database.
func start(t *testing.T) *product {
	t.Helper()
	ctx := context.Background()
	p := &product{dir: t.TempDir()}
	if err := proctest.Build(p.dir, "ingest", "lifecycle", "outbox-dispatcher"); err != nil {
		t.Fatal(err)
	}
	dbURL := pgtest.NewURL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	p.pool = pool

	key, pub, err := githubsim.NewAppKey()
	if err != nil {
		t.Fatal(err)
	}
	var sb [24]byte
	_, _ = rand.Read(sb[:])
	p.secret = []byte(hex.EncodeToString(sb[:]))
	keyFile := filepath.Join(p.dir, "app-key.pem")
	p.secretFile = filepath.Join(p.dir, "webhook-secret")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.secretFile, p.secret, 0o600); err != nil {
		t.Fatal(err)
	}
	ingestAddr := proctest.FreeAddr(t)
	p.ingestURL = "http://" + ingestAddr + "/webhook"
	p.gate = &gate{target: p.ingestURL, hold: map[int64]bool{}}
	gateSrv := httptest.NewServer(p.gate)
	t.Cleanup(gateSrv.Close)
	p.sim = githubsim.New(githubsim.Options{AppID: appID, AppPublicKey: pub, AutoRepositories: true,
		WebhookURL: gateSrv.URL, WebhookSecret: p.secret, RunDelay: 50 * time.Millisecond})
	t.Cleanup(p.sim.Close)
	gh := httptest.NewServer(p.sim)
	t.Cleanup(gh.Close)

	common := []string{"DATABASE_URL=" + dbURL, "LOG_LEVEL=warn", fmt.Sprintf("BOARDREADYOPS_GITHUB_APP_ID=%d", appID)}
	own := map[string][]string{
		"ingest":            {"LISTEN_ADDR=" + ingestAddr, "BOARDREADYOPS_WEBHOOK_SECRET_FILE=" + p.secretFile},
		"lifecycle":         nil,
		"outbox-dispatcher": {"BOARDREADYOPS_GITHUB_API_URL=" + gh.URL, "BOARDREADYOPS_GITHUB_PRIVATE_KEY_FILE=" + keyFile},
	}
	for _, name := range []string{"ingest", "lifecycle", "outbox-dispatcher"} {
		addr := proctest.FreeAddr(t)
		env := append(append(append([]string{}, common...), own[name]...), "METRICS_ADDR="+addr)
		proc := &proctest.Process{Name: name, Bin: filepath.Join(p.dir, name), Env: env, MetricsAddr: addr}
		proc.Start(t)
		p.procs = append(p.procs, proc)
	}
	for _, proc := range p.procs {
		proc.WaitReady(t)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, proc := range p.procs {
				t.Logf("%s log:\n%s", proc.Name, proc.Log.String())
			}
		}
	})
	return p
}

// deliver sends a body signed with the webhook secret, as GitHub (or a replaying attacker, who
// holds a signed body) would, and returns the status.
func (p *product) deliver(t *testing.T, event, delivery, contentType string, body []byte) int {
	t.Helper()
	if delivery == "" {
		delivery = newID()
	}
	if contentType == "" {
		contentType = "application/json"
	}
	h := http.Header{}
	h.Set("Content-Type", contentType)
	h.Set("X-GitHub-Event", event)
	h.Set("X-GitHub-Delivery", delivery)
	h.Set("X-Hub-Signature-256", hubsig.Sign(p.secret, body))
	code, err := post(p.ingestURL, h, body)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// mustDeliver sends a genuine delivery, which must be accepted.
func (p *product) mustDeliver(t *testing.T, event, delivery string, payload any) []byte {
	t.Helper()
	body := encode(payload)
	// A genuine tag push: the tag exists on GitHub, where the dispatcher reads it before dispatching.
	if m, ok := payload.(map[string]any); ok && event == "push" {
		repo, _ := m["repository"].(map[string]any)
		ref, _ := m["ref"].(string)
		commit, _ := m["after"].(string)
		if hc, ok := m["head_commit"].(map[string]any); ok {
			if id, ok := hc["id"].(string); ok && id != "" {
				commit = id // the tagged commit: an annotated tag's after is the tag object
			}
		}
		name, _ := repo["full_name"].(string)
		if tag, isTag := strings.CutPrefix(ref, "refs/tags/"); isTag && name != "" {
			p.sim.SetTag(name, tag, commit)
		}
	}
	if code := p.deliver(t, event, delivery, "", body); code != http.StatusAccepted {
		t.Fatalf("genuine %s delivery: %d", event, code)
	}
	return body
}

// encode marshals like GitHub: '&', '<' and '>' are not escaped.
func encode(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSpace(b.Bytes())
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// settle waits until lifecycle and the dispatcher have done everything that is due: no job or
// effect available now or leased. Deferred jobs (available later) do not count.
func (p *product) settle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		var pending int
		err := p.pool.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM control_plane_jobs WHERE status = 'leased' OR (status = 'available' AND available_at <= now()))
		  + (SELECT count(*) FROM control_plane_outbox WHERE status = 'leased' OR (status = 'available' AND available_at <= now()))`).Scan(&pending)
		if err != nil {
			t.Fatal(err)
		}
		if pending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs and effects still pending", pending)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFor polls q (one integer) until it is want.
func (p *product) waitFor(t *testing.T, want int, q string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		got := p.count(t, q, args...)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %d, want %d\n%s", q, got, want, p.state(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// state describes the release runs, effects and jobs, for failure messages.
func (p *product) state(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT format('run %s repo %s: %s', id, repository_id, status) FROM release_runs ORDER BY created_at`,
		`SELECT format('effect %s %s: %s %s', id, effect_type, status, coalesce(last_error, '')) FROM control_plane_outbox ORDER BY id`,
		`SELECT format('job %s %s: %s %s', j.id, j.kind, j.status, coalesce(j.last_error, '')) FROM control_plane_jobs j WHERE j.status <> 'completed' ORDER BY j.id`,
	} {
		rows, err := p.pool.Query(context.Background(), q)
		if err != nil {
			return err.Error()
		}
		for rows.Next() {
			var line string
			_ = rows.Scan(&line)
			b.WriteString(line + "\n")
		}
		rows.Close()
	}
	return b.String()
}

func (p *product) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := p.pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Payload builders, shaped like GitHub's.

func account(login string) map[string]any {
	return map[string]any{"login": login, "type": "Organization"}
}

// repository is a repository payload with the id the simulator gives the repository.
func repository(fullName string) map[string]any {
	owner, name, _ := strings.Cut(fullName, "/")
	return map[string]any{"id": githubsim.RepositoryID(fullName), "name": name, "full_name": fullName, "default_branch": "main", "owner": account(owner)}
}

func installationEvent(action string, id int64, login string, repos ...map[string]any) map[string]any {
	refs := []any{}
	for _, r := range repos {
		refs = append(refs, map[string]any{"id": r["id"], "full_name": r["full_name"]})
	}
	return map[string]any{"action": action, "installation": map[string]any{"id": id, "app_id": appID, "account": account(login),
		"repository_selection": "selected"}, "repositories": refs, "sender": account(login)}
}

func tagPush(installationID int64, repo map[string]any, tag, sha string) map[string]any {
	return map[string]any{"ref": "refs/tags/" + tag, "before": strings.Repeat("0", 40), "after": sha, "created": true, "deleted": false,
		"installation": map[string]any{"id": installationID}, "repository": repo, "head_commit": map[string]any{"id": sha, "message": "release " + tag}}
}
