package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/hack/test/proctest"
	"github.com/boardreadyops/cloud/pkg/hubsig"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// stack is the product (three processes) on its own database with a simulator that knows one
// installation and one repository.
type stack struct {
	t     *testing.T
	ctx   context.Context
	pool  *pgxpool.Pool
	sim   *githubsim.Simulator
	procs []*proctest.Process
	send  func(event string, payload any)
}

const (
	stuckInstallation = 7001
	stuckRepo         = "octo-org/stuck"
	workflowFile      = "boardreadyops-release.yml"
)

func newStack(t *testing.T, workflow githubsim.Workflow) *stack {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	build(t, dir)
	dbURL := pgtest.NewURL(t)
	pool, err := pxpool(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	pub, secret, keyFile, secretFile := appCredentials(t, dir)
	ingestAddr := proctest.FreeAddr(t)
	sim := githubsim.New(githubsim.Options{AppID: appID, AppPublicKey: pub, TagCommit: githubsim.TagsAt(pushedSHA),
		WebhookURL: "http://" + ingestAddr + "/webhook", WebhookSecret: secret, RunDelay: 100 * time.Millisecond})
	t.Cleanup(sim.Close)
	sim.AddInstallation(stuckInstallation, "octo-org")
	sim.AddRepository(stuckInstallation, githubsim.RepositoryID(stuckRepo), stuckRepo, map[string]githubsim.Workflow{workflowFile: workflow})
	gh := httptest.NewServer(sim)
	t.Cleanup(gh.Close)
	common := []string{"DATABASE_URL=" + dbURL, "LOG_LEVEL=warn", fmt.Sprintf("BOARDREADYOPS_GITHUB_APP_ID=%d", appID),
		"BOARDREADYOPS_WORKFLOW_RUN_MATCH_WINDOW=1m"}
	s := &stack{t: t, ctx: ctx, pool: pool, sim: sim}
	s.procs = startProduct(t, dir, common, ingestAddr, secretFile, gh.URL, keyFile)
	s.send = webhookSender(t, secret, ingestAddr)
	t.Cleanup(func() {
		for _, p := range s.procs {
			stop(t, p)
		}
	})
	return s
}

// appCredentials generates the App's key and a webhook secret and writes both to files in dir.
func appCredentials(t *testing.T, dir string) (pub *rsa.PublicKey, secret []byte, keyFile, secretFile string) {
	t.Helper()
	key, pub, err := githubsim.NewAppKey()
	if err != nil {
		t.Fatal(err)
	}
	var secretBytes [24]byte
	_, _ = rand.Read(secretBytes[:])
	secret = []byte(hex.EncodeToString(secretBytes[:]))
	keyFile, secretFile = filepath.Join(dir, "app-key.pem"), filepath.Join(dir, "webhook-secret")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	return pub, secret, keyFile, secretFile
}

// webhookSender posts signed deliveries to ingest and expects 202.
func webhookSender(t *testing.T, secret []byte, ingestAddr string) func(event string, payload any) {
	return func(event string, payload any) {
		t.Helper()
		body, _ := json.Marshal(payload)
		var id [16]byte
		_, _ = rand.Read(id[:])
		req, _ := http.NewRequest(http.MethodPost, "http://"+ingestAddr+"/webhook", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", event)
		req.Header.Set("X-GitHub-Delivery", hex.EncodeToString(id[:]))
		req.Header.Set("X-Hub-Signature-256", hubsig.Sign(secret, body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s webhook: %s", event, resp.Status)
		}
	}
}

// pushTag sends the tag push and returns the release run id.
func (s *stack) pushTag(tag string) string {
	s.t.Helper()
	s.send("push", map[string]any{
		"ref": "refs/tags/" + tag, "before": strings.Repeat("0", 40), "after": pushedSHA,
		"created": true, "deleted": false, "installation": map[string]any{"id": stuckInstallation},
		"repository": map[string]any{"id": githubsim.RepositoryID(stuckRepo), "name": "stuck", "full_name": stuckRepo,
			"default_branch": "main", "owner": map[string]any{"login": "octo-org", "type": "Organization"}},
	})
	var run string
	s.until("the release run exists", func() bool {
		return s.pool.QueryRow(s.ctx, `SELECT id::text FROM release_runs WHERE ref = $1`, "refs/tags/"+tag).Scan(&run) == nil
	})
	return run
}

// until waits (polling, bounded) for cond; the failure names what was awaited and shows the logs.
func (s *stack) until(what string, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(150 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			for _, p := range s.procs {
				s.t.Logf("%s log:\n%s", p.Name, p.Log.String())
			}
			s.t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *stack) runStatus(run string) string {
	var status string
	_ = s.pool.QueryRow(s.ctx, `SELECT status FROM release_runs WHERE id = $1`, run).Scan(&status)
	return status
}

// checkRun is the run's only check run on GitHub once it exists (found by the identity the
// dispatcher writes, boardreadyops_release_run_external_id).
func (s *stack) checkRun(run string) (githubsim.CheckRun, bool) {
	var externalID string
	_ = s.pool.QueryRow(s.ctx, `SELECT boardreadyops_release_run_external_id(repository_id, ref) FROM release_runs WHERE id = $1`, run).Scan(&externalID)
	crs := s.sim.CheckRuns(externalID)
	if len(crs) != 1 {
		return githubsim.CheckRun{}, false
	}
	return crs[0], true
}

func (s *stack) checkRunSays(run, status, text string) func() bool {
	return func() bool {
		c, ok := s.checkRun(run)
		return ok && c.Status == status && c.Output.Summary != nil && strings.Contains(*c.Output.Summary, text)
	}
}

func (s *stack) attempt(run string) (id string, workflowRunID int64) {
	s.t.Helper()
	var wf *int64
	if err := s.pool.QueryRow(s.ctx, `SELECT a.id::text, a.workflow_run_id FROM execution_attempts a
		JOIN release_runs r ON r.id = a.release_run_id AND a.number = r.current_attempt WHERE r.id = $1`, run).Scan(&id, &wf); err != nil {
		s.t.Fatal(err)
	}
	if wf != nil {
		workflowRunID = *wf
	}
	return id, workflowRunID
}

// A dispatch GitHub refuses (the workflow has no workflow_dispatch trigger) dead-letters: the
// run is blocked and its check run says why, with Retry. Re-run is answered (nothing started);
// the developer fixes the workflow; a Retry by a user with read access only is refused; the
// developer (write access) presses Retry: the dead letter is replayed, audited under their GitHub
// login, and the release succeeds with one dispatch. A re-run of that workflow run
// from the Actions UI is then followed to its new conclusion.
func TestDeadLetteredDispatchRetriedFromTheCheckRun(t *testing.T) {
	t.Parallel()
	broken := githubsim.ReleaseWorkflow()
	broken.Dispatchable = false
	s := newStack(t, broken)
	run := s.pushTag("v2.0.0")

	s.until("the check run says the workflow could not be started",
		s.checkRunSays(run, "completed", "The release workflow could not be started: "))
	c, _ := s.checkRun(run)
	if s.runStatus(run) != "blocked" || *c.Conclusion != "failure" || len(c.Actions) != 1 || c.Actions[0].Identifier != "retry" ||
		!strings.Contains(*c.Output.Summary, "workflow_dispatch") || !strings.Contains(*c.Output.Title, "v2.0.0") {
		t.Fatalf("run %s, check run %+v (summary %q)", s.runStatus(run), c, *c.Output.Summary)
	}

	// Re-run on the unfinished (blocked) run starts nothing and is answered.
	if err := s.sim.Rerequest(s.ctx, c.ID, "octocat"); err != nil {
		t.Fatal(err)
	}
	s.until("the Re-run is answered", s.checkRunSays(run, "completed", "Re-run requested by @octocat while the release is blocked"))
	attempt, _ := s.attempt(run)
	if n := s.sim.Dispatches(attempt); n != 0 {
		t.Fatalf("%d dispatches accepted", n)
	}

	s.sim.SetWorkflow(stuckRepo, workflowFile, githubsim.ReleaseWorkflow())
	// Retry from someone with read access only is refused: GitHub is asked, not the payload.
	s.sim.SetCollaborator(stuckRepo, "watcher", githubsim.RoleRead)
	if err := s.sim.RequestAction(s.ctx, c.ID, "retry", "watcher"); err != nil {
		t.Fatal(err)
	}
	s.until("the reader's Retry is refused", s.checkRunSays(run, "completed", "Retry requested by @watcher was refused"))
	if n := s.sim.Dispatches(attempt); n != 0 || s.runStatus(run) != "blocked" {
		t.Fatalf("after a refused Retry: %d dispatches accepted, run %s", n, s.runStatus(run))
	}
	s.sim.SetCollaborator(stuckRepo, "octocat", githubsim.RoleWrite)
	if err := s.sim.RequestAction(s.ctx, c.ID, "retry", "octocat"); err != nil {
		t.Fatal(err)
	}
	s.until("the retried release succeeds", func() bool {
		c, ok := s.checkRun(run)
		return s.runStatus(run) == "succeeded" && ok && c.Status == "completed" && *c.Conclusion == "success"
	})
	attempt, wfRun := s.attempt(run)
	if n := s.sim.Dispatches(attempt); n != 1 {
		t.Fatalf("%d dispatches, want 1", n)
	}
	var operator, reason string
	if err := s.pool.QueryRow(s.ctx, `SELECT operator, reason FROM control_plane_audit WHERE action = 'outbox.replay'`).Scan(&operator, &reason); err != nil ||
		operator != "github:octocat" || !strings.Contains(reason, "GitHub user octocat") {
		t.Fatalf("audit: operator %q reason %q (%v)", operator, reason, err)
	}
	c, _ = s.checkRun(run)
	wantURL := fmt.Sprintf("https://github.com/%s/actions/runs/%d", stuckRepo, wfRun)
	if c.DetailsURL != wantURL || len(c.Actions) != 0 || c.Output.Text == nil || !strings.Contains(*c.Output.Text, wantURL) {
		t.Fatalf("check run after success %+v", c)
	}

	// "Re-run all jobs" in the Actions UI: the same workflow run, run attempt 2, fails.
	if err := s.sim.RerunWorkflowRun(wfRun, "failure"); err != nil {
		t.Fatal(err)
	}
	s.until("the Actions re-run is followed to its failure", func() bool {
		c, ok := s.checkRun(run)
		return s.runStatus(run) == "failed" && ok && c.Status == "completed" && *c.Conclusion == "failure" &&
			c.Output.Text != nil && strings.Contains(*c.Output.Text, "run attempt 2")
	})

	// "Re-run all checks" on the commit (check_suite rerequested): the failed release gets attempt 2,
	// with its own dispatch, and succeeds.
	if err := s.sim.RerequestSuite(s.ctx, c.ID, "octocat"); err != nil {
		t.Fatal(err)
	}
	s.until("the suite's re-run releases again and succeeds", func() bool {
		c, ok := s.checkRun(run)
		return s.runStatus(run) == "succeeded" && ok && c.Status == "completed" && *c.Conclusion == "success"
	})
	if next, _ := s.attempt(run); next == attempt || s.sim.Dispatches(next) != 1 {
		t.Fatalf("attempt %s after the suite's re-run (was %s), %d dispatches; want a new attempt dispatched once", next, attempt, s.sim.Dispatches(next))
	}
}

// A dispatch whose response is lost after GitHub created the run needs reconciliation: the check
// run says it is not known whether the workflow started, and Retry is not offered. The workflow
// run completes meanwhile and its webhook is recorded as unmatched (after the 1-minute match
// window). An operator's late repair records the run id: the stored completion is matched again
// and the release run completes without another webhook or dispatch.
func TestLateRepairCompletesFromTheStoredCompletion(t *testing.T) {
	t.Parallel()
	s := newStack(t, githubsim.ReleaseWorkflow())
	s.sim.AddFault(githubsim.Fault{Operation: githubsim.OpDispatchWorkflow, DropAfterProcessing: true, Times: 1})
	run := s.pushTag("v3.0.0")
	s.until("the check run says the start is unknown",
		s.checkRunSays(run, "in_progress", "It is not known whether the release workflow started; an operator has been asked to check"))
	if c, _ := s.checkRun(run); len(c.Actions) != 0 || s.runStatus(run) != "blocked" {
		t.Fatalf("run %s, check run actions %+v", s.runStatus(run), c.Actions)
	}
	s.until("the completion is recorded as unmatched", func() bool {
		var n int
		_ = s.pool.QueryRow(s.ctx, `SELECT count(*) FROM webhook_inbox i JOIN control_plane_jobs j ON j.inbox_id = i.id
			WHERE i.event = 'workflow_run' AND i.action = 'completed' AND j.status = 'completed'`).Scan(&n)
		return n == 1
	})
	if s.runStatus(run) != "blocked" {
		t.Fatalf("run %s before the repair", s.runStatus(run))
	}
	runs := s.sim.WorkflowRuns()
	if len(runs) != 1 {
		t.Fatalf("%d workflow runs", len(runs))
	}
	var outboxID int64
	if err := s.pool.QueryRow(s.ctx, `SELECT id FROM control_plane_outbox WHERE status = 'reconciliation_required'`).Scan(&outboxID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(s.ctx, `SELECT boardreadyops_outbox_resolve_reconciliation($1, 'operator@example.com', $2, 'found the run in the Actions list')`,
		outboxID, runs[0].ID); err != nil {
		t.Fatal(err)
	}
	s.until("the release completes from the stored completion", func() bool {
		c, ok := s.checkRun(run)
		return s.runStatus(run) == "succeeded" && ok && c.Status == "completed" && *c.Conclusion == "success"
	})
	attempt, _ := s.attempt(run)
	if n := s.sim.Dispatches(attempt); n != 1 {
		t.Fatalf("%d dispatches, want the one whose response was lost", n)
	}
	var lastError string
	if err := s.pool.QueryRow(s.ctx, `SELECT coalesce(j.last_error, '') FROM webhook_inbox i JOIN control_plane_jobs j ON j.inbox_id = i.id
		WHERE i.event = 'workflow_run' AND i.action = 'completed'`).Scan(&lastError); err != nil || !strings.Contains(lastError, "re-matched") {
		t.Fatalf("completion job: %q (%v)", lastError, err)
	}
}
