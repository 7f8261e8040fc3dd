package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

type ops struct {
	t    *testing.T
	ctx  context.Context
	pool *pgxpool.Pool
	env  map[string]string
	st   *outbox.Store
}

func newOps(t *testing.T) *ops {
	t.Helper()
	url := pgtest.NewURL(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &ops{t: t, ctx: context.Background(), pool: pool, st: &outbox.Store{},
		env: map[string]string{"DATABASE_URL": url, "BOARDREADYOPS_OPERATOR": "alice"}}
}

// dispatch creates a release run and brings its workflow dispatch to the given state; it returns
// the dispatch's effect id and its payload's run and attempt ids.
func (o *ops) dispatch(state string) (int64, string, string) {
	o.t.Helper()
	dispatchID, run := o.enqueueDispatch()
	o.claimFor(run, outbox.EffectWorkflowDispatch)
	var err error
	switch state {
	case "dead_letter":
		err = o.st.DeadLetter(o.ctx, o.pool, dispatchID, "w", "github dispatch_workflow: rejected (HTTP 404)")
	case "reconciliation_required":
		if _, err = o.st.StartDelivery(o.ctx, o.pool, dispatchID, "w"); err == nil {
			err = o.st.RequireReconciliation(o.ctx, o.pool, dispatchID, "w", "connection lost after write")
		}
	}
	if err != nil {
		o.t.Fatal(err)
	}
	// The failure blocked the run and enqueued its check-run update (migration 00021): delivered,
	// as a dispatcher would, so that the queue holds only the dispatch under test.
	if _, err := o.pool.Exec(o.ctx, `UPDATE control_plane_outbox SET status = 'completed', completed_at = now()
		WHERE release_run_id = $1 AND effect_type = 'github.check_run.complete' AND status = 'available'`, run); err != nil {
		o.t.Fatal(err)
	}
	e, _ := outbox.Get(o.ctx, o.pool, dispatchID)
	return dispatchID, run, *e.ExecutionAttemptID
}

// enqueueDispatch creates a release run and completes its check-run creation, which enqueues
// the workflow dispatch; it returns the dispatch's effect id and the run id.
func (o *ops) enqueueDispatch() (int64, string) {
	o.t.Helper()
	run := o.createRun()
	create := o.claimFor(run, outbox.EffectCheckRunCreate)
	dispatchID, err := o.st.CompleteCheckRunCreate(o.ctx, o.pool, create, "w", 4001)
	if err != nil {
		o.t.Fatal(err)
	}
	return dispatchID, run
}

// createRun creates a release run, its check-run creation available, and returns its id.
func (o *ops) createRun() string {
	o.t.Helper()
	var run string
	err := o.pool.QueryRow(o.ctx, `
		WITH i AS (INSERT INTO installations (id, account_login, account_type) VALUES (55501, 'octo-org', 'Organization') ON CONFLICT DO NOTHING),
		r AS (INSERT INTO repositories (id, installation_id, full_name) VALUES (1, 55501, 'octo-org/hello-world') ON CONFLICT DO NOTHING)
		SELECT 1`).Scan(new(int))
	if err != nil {
		o.t.Fatal(err)
	}
	tag := "refs/tags/v" + strconv.FormatInt(time.Now().UnixNano(), 10)
	if err := o.pool.QueryRow(o.ctx, `SELECT boardreadyops_release_run_create(1, 55501, $1, repeat('a', 40), 'boardreadyops-release.yml', 'BoardReadyOps release')::text`, tag).Scan(&run); err != nil {
		o.t.Fatal(err)
	}
	return run
}

// claimFor claims the effect of a run as worker "w" and gives back whatever else it claimed.
func (o *ops) claimFor(run, effectType string) int64 {
	o.t.Helper()
	claimed, err := o.st.Claim(o.ctx, o.pool, "w", 100, time.Minute)
	if err != nil {
		o.t.Fatal(err)
	}
	var id int64
	for _, e := range claimed {
		if e.ReleaseRunID == run && e.EffectType == effectType {
			id = e.ID
			continue
		}
		if err := o.st.Release(o.ctx, o.pool, e.ID, "w"); err != nil {
			o.t.Fatal(err)
		}
	}
	if id == 0 {
		o.t.Fatalf("no %s for run %s among %d claimed", effectType, run, len(claimed))
	}
	return id
}

// ref is the release run's tag ref.
func (o *ops) ref(run string) string {
	o.t.Helper()
	var ref string
	if err := o.pool.QueryRow(o.ctx, `SELECT ref FROM release_runs WHERE id = $1`, run).Scan(&ref); err != nil {
		o.t.Fatal(err)
	}
	return ref
}

func (o *ops) status(id int64) string {
	o.t.Helper()
	e, err := outbox.Get(o.ctx, o.pool, id)
	if err != nil {
		o.t.Fatal(err)
	}
	return e.Status
}

func TestOutboxReplay(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	dead, _, _ := o.dispatch("dead_letter")
	recon, _, _ := o.dispatch("reconciliation_required")

	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"reason required", []string{"outbox", "replay", strconv.FormatInt(dead, 10)}, 2, "--reason is required"},
		{"ids or filter", []string{"outbox", "replay", "--reason", "x"}, 2, "give record ids or --all-dead-letters"},
		{"reconciliation refused with guidance", []string{"outbox", "replay", strconv.FormatInt(recon, 10), "--reason", "retry"}, 1, "brops reconcile inspect"},
		{"dry run changes nothing", []string{"outbox", "replay", "--all-dead-letters", "--dry-run", "--reason", "x"}, 0, "would replay 1"},
		{"replay", []string{"outbox", "replay", strconv.FormatInt(dead, 10), "--reason", "workflow restored"}, 0, "available"},
		{"replay again refused", []string{"outbox", "replay", strconv.FormatInt(dead, 10), "--reason", "again"}, 1, "only dead letters can be replayed"},
	}
	for _, tt := range tests {
		code, out, errOut := run(t, o.env, tt.args...)
		if code != tt.wantCode || !strings.Contains(out+errOut, tt.want) {
			t.Fatalf("%s: exit %d, output %q %q; want %d and %q", tt.name, code, out, errOut, tt.wantCode, tt.want)
		}
	}
	if o.status(dead) != outbox.StatusAvailable || o.status(recon) != outbox.StatusReconciliationRequired {
		t.Fatalf("statuses %s %s", o.status(dead), o.status(recon))
	}
	code, out, _ := run(t, o.env, "outbox", "show", strconv.FormatInt(dead, 10), "-o", "json")
	var shown struct {
		Audit []struct{ Operator, Action, Reason string } `json:"audit"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || len(shown.Audit) != 1 ||
		shown.Audit[0].Operator != "alice" || shown.Audit[0].Action != "outbox.replay" || shown.Audit[0].Reason != "workflow restored" {
		t.Fatalf("show: %d %s", code, out)
	}
	// Bulk replay needs confirmation unless --yes.
	o.dispatch("dead_letter")
	o.dispatch("dead_letter")
	if code, _, errOut := run(t, o.env, "outbox", "replay", "--all-dead-letters", "--reason", "bulk"); code != 2 || !strings.Contains(errOut, "not confirmed") {
		t.Fatalf("unconfirmed bulk replay: %d %s", code, errOut)
	}
	if code, out, _ := run(t, o.env, "outbox", "replay", "--all-dead-letters", "--reason", "bulk", "--yes", "-o", "json"); code != 0 || strings.Count(out, `"available"`) != 2 {
		t.Fatalf("bulk replay: %d %s", code, out)
	}
}

func TestReconcileResolve(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	repair, runID, attempt := o.dispatch("reconciliation_required")
	supersede, supersedeRun, _ := o.dispatch("reconciliation_required")
	dead, _, _ := o.dispatch("dead_letter")

	if code, out, _ := run(t, o.env, "reconcile", "list", "-o", "json"); code != 0 || strings.Count(out, `"reconciliation_required"`) != 2 {
		t.Fatalf("list: %d %s", code, out)
	}
	refusals := [][]string{
		{"reconcile", "resolve", strconv.FormatInt(repair, 10), "--evidence", "x"},                                               // neither
		{"reconcile", "resolve", strconv.FormatInt(repair, 10), "--workflow-run-id", "5", "--not-dispatched", "--evidence", "x"}, // both
		{"reconcile", "resolve", strconv.FormatInt(repair, 10), "--workflow-run-id", "5"},                                        // no evidence
	}
	for _, args := range refusals {
		if code, _, _ := run(t, o.env, args...); code != 2 {
			t.Fatalf("%v: exit %d, want 2", args, code)
		}
	}
	if code, _, errOut := run(t, o.env, "reconcile", "resolve", strconv.FormatInt(dead, 10), "--not-dispatched", "--evidence", "x"); code != 1 ||
		!strings.Contains(errOut, "not reconciliation_required") {
		t.Fatalf("resolve a dead letter: %d %s", code, errOut)
	}
	if code, out, errOut := run(t, o.env, "reconcile", "resolve", strconv.FormatInt(repair, 10), "--workflow-run-id", "777", "--evidence", "run 777 found"); code != 0 {
		t.Fatalf("repair: %d %s %s", code, out, errOut)
	}
	var wfRun int64
	var runStatus string
	if err := o.pool.QueryRow(o.ctx, `SELECT a.workflow_run_id, r.status FROM execution_attempts a JOIN release_runs r ON r.id = a.release_run_id WHERE a.id = $1`, attempt).
		Scan(&wfRun, &runStatus); err != nil || wfRun != 777 || runStatus != "running" {
		t.Fatalf("after repair: run %d status %s (%v); run id %s", wfRun, runStatus, err, runID)
	}
	code, out, _ := run(t, o.env, "reconcile", "resolve", strconv.FormatInt(supersede, 10), "--not-dispatched", "--evidence", "no run after 10 min", "-o", "json")
	var res struct{ Replacement int64 }
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Replacement == 0 || o.status(res.Replacement) != outbox.StatusAvailable {
		t.Fatalf("supersede: %d %s", code, out)
	}
	// The run's timeline must not say GitHub received the dispatch the operator found never sent.
	if code, out, errOut := run(t, o.env, "release-runs", "show", supersedeRun); code != 0 || strings.Contains(out, "dispatch sent") ||
		!strings.Contains(out, "dispatch not sent") || !strings.Contains(out, fmt.Sprintf("superseded by effect %d", res.Replacement)) {
		t.Fatalf("show after --not-dispatched: %d %s %s; want the dispatch shown as not sent", code, out, errOut)
	}
	var audits int
	_ = o.pool.QueryRow(o.ctx, `SELECT count(*) FROM control_plane_audit WHERE operator = 'alice' AND action LIKE 'outbox.reconciliation.%'`).Scan(&audits)
	if audits != 2 {
		t.Fatalf("%d reconciliation audit rows, want 2", audits)
	}
}

func TestReconcileInspectFindsTheRunAmongDecoys(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	id, runID, attempt := o.dispatch("reconciliation_required")
	e, _ := outbox.Get(o.ctx, o.pool, id)
	started := *e.DeliveryStartedAt

	key, pub, err := githubsim.NewAppKey()
	if err != nil {
		t.Fatal(err)
	}
	sim := githubsim.New(githubsim.Options{AppID: 7, AppPublicKey: pub})
	t.Cleanup(sim.Close)
	sim.AddInstallation(55501, "octo-org")
	sim.AddRepository(55501, 1, "octo-org/hello-world", map[string]githubsim.Workflow{"boardreadyops-release.yml": githubsim.ReleaseWorkflow()})
	title := func(r, a string) string { return "release " + r + " attempt " + a }
	sim.AddWorkflowRun("octo-org/hello-world", "boardreadyops-release.yml", "workflow_dispatch", title(runID, "another-attempt"), started.Add(time.Second))
	sim.AddWorkflowRun("octo-org/hello-world", "boardreadyops-release.yml", "workflow_dispatch", title(runID, attempt), started.Add(-time.Hour)) // long before
	sim.AddWorkflowRun("octo-org/hello-world", "boardreadyops-release.yml", "push", title(runID, attempt), started.Add(2*time.Second))           // not a dispatch
	want := sim.AddWorkflowRun("octo-org/hello-world", "boardreadyops-release.yml", "workflow_dispatch", title(runID, attempt), started.Add(3*time.Second))
	sim.SetWorkflowRunHead(want, strings.TrimPrefix(o.ref(runID), "refs/tags/"), strings.Repeat("a", 40))
	decoy := sim.AddWorkflowRun("octo-org/hello-world", "boardreadyops-release.yml", "workflow_dispatch", title(runID, attempt), started.Add(4*time.Second))
	sim.SetWorkflowRunHead(decoy, "main", strings.Repeat("a", 40)) // named for the attempt, on another branch
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	keyFile := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": o.env["DATABASE_URL"], "BOARDREADYOPS_GITHUB_API_URL": srv.URL,
		"BOARDREADYOPS_GITHUB_APP_ID": "7", "BOARDREADYOPS_GITHUB_PRIVATE_KEY_FILE": keyFile}

	code, out, errOut := run(t, env, "reconcile", "inspect", strconv.FormatInt(id, 10), "-o", "json")
	var res struct {
		Candidates []struct {
			ID    int64  `json:"id"`
			Match string `json:"match"`
		}
		Advice string
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("inspect: %d %s %s", code, out, errOut)
	}
	exact := 0
	for _, c := range res.Candidates {
		if c.Match == "exact" {
			exact++
			if c.ID != want {
				t.Fatalf("exact match %d, want %d", c.ID, want)
			}
		}
	}
	if exact != 1 || len(res.Candidates) != 3 || !strings.Contains(res.Advice, "--workflow-run-id "+strconv.FormatInt(want, 10)) {
		t.Fatalf("candidates %+v advice %q", res.Candidates, res.Advice)
	}
}

func TestStatsAndReleaseRuns(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	_, runID, _ := o.dispatch("reconciliation_required")
	code, out, _ := run(t, o.env, "stats", "-o", "json")
	var st struct {
		Outbox struct {
			ReconciliationRequired int `json:"reconciliation_required"`
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Outbox.ReconciliationRequired != 1 {
		t.Fatalf("stats: %d %s", code, out)
	}
	code, out, _ = run(t, o.env, "release-runs", "show", runID)
	if code != 0 || !regexp.MustCompile(`github\.workflow\.dispatch +reconciliation_required`).MatchString(out) || !strings.Contains(out, "4001") {
		t.Fatalf("release-runs show: %d\n%s", code, out)
	}
	if code, out, _ := run(t, o.env, "release-runs", "list", "-o", "json"); code != 0 || !strings.Contains(out, runID) {
		t.Fatalf("release-runs list: %d %s", code, out)
	}
	if code, out, _ := run(t, o.env, "jobs", "list"); code != 0 || !strings.HasPrefix(out, "ID") {
		t.Fatalf("jobs list: %d %s", code, out)
	}
}

// reconcile list shows the newest 1,000 records and says how many there are when there are more
// (after a restore there can be), instead of leaving the rest out silently.
func TestReconcileListSaysWhatItLeavesOut(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	id, _, _ := o.dispatch("reconciliation_required")
	// 1,000 copies of the record as later generations of the same attempt: the effect key differs.
	if _, err := o.pool.Exec(o.ctx, `INSERT INTO control_plane_outbox (effect_type, idempotency_key, generation, payload, status, attempts,
			max_attempts, available_at, delivery_started_at, last_error, release_run_id, execution_attempt_id, installation_id, created_at, updated_at)
		SELECT effect_type, idempotency_key || ':g' || g, g, payload, status, attempts, max_attempts, available_at, delivery_started_at,
			last_error, release_run_id, execution_attempt_id, installation_id, created_at, updated_at
		FROM control_plane_outbox, generate_series(1, 1000) g WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, o.env, "reconcile", "list", "-o", "json")
	var listed []json.RawMessage
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1000 || !strings.Contains(errOut, "brops: the newest 1000 of 1001 shown") {
		t.Fatalf("list of 1,001: %d, %d listed, stderr %q", code, len(listed), errOut)
	}
	if code, out, _ := run(t, o.env, "reconcile", "list"); code != 0 || !strings.HasPrefix(out, "the newest 1000 of 1001 shown\n") {
		t.Fatalf("list of 1,001, table: %d %.200s", code, out)
	}
}
