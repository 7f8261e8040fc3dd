package cli_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
)

// githubEnv starts the simulator over HTTP with the test repository and returns it with the
// environment that points brops at it.
func (o *ops) githubEnv() (*githubsim.Simulator, map[string]string) {
	o.t.Helper()
	key, pub, err := githubsim.NewAppKey()
	if err != nil {
		o.t.Fatal(err)
	}
	sim := githubsim.New(githubsim.Options{AppID: 7, AppPublicKey: pub})
	o.t.Cleanup(sim.Close)
	sim.AddInstallation(55501, "octo-org")
	sim.AddRepository(55501, 1, "octo-org/hello-world", map[string]githubsim.Workflow{"boardreadyops-release.yml": githubsim.ReleaseWorkflow()})
	srv := httptest.NewServer(sim)
	o.t.Cleanup(srv.Close)
	keyFile := filepath.Join(o.t.TempDir(), "key.pem")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		o.t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": o.env["DATABASE_URL"], "BOARDREADYOPS_OPERATOR": "alice", "BOARDREADYOPS_GITHUB_API_URL": srv.URL,
		"BOARDREADYOPS_GITHUB_APP_ID": "7", "BOARDREADYOPS_GITHUB_PRIVATE_KEY_FILE": keyFile}
	return sim, env
}

func TestReconcileAutoResolvesOnlyOneExactMatch(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	sim, env := o.githubEnv()
	sha := strings.Repeat("a", 40)
	const file = "boardreadyops-release.yml"
	add := func(id int64, branch, head string) int64 {
		e, _ := outbox.Get(o.ctx, o.pool, id)
		var p struct {
			ReleaseRunID       string `json:"release_run_id"`
			ExecutionAttemptID string `json:"execution_attempt_id"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		run := sim.AddWorkflowRun("octo-org/hello-world", file, "workflow_dispatch", "release "+p.ReleaseRunID+" attempt "+p.ExecutionAttemptID, e.DeliveryStartedAt.Add(time.Second))
		sim.SetWorkflowRunHead(run, branch, head)
		return run
	}
	tagOf := func(run string) string { return strings.TrimPrefix(o.ref(run), "refs/tags/") }

	exact, exactRun, _ := o.dispatch("reconciliation_required")
	want := add(exact, tagOf(exactRun), sha)
	add(exact, "feature", sha) // a decoy beside the exact run does not prevent it
	branchDecoy, branchRun, _ := o.dispatch("reconciliation_required")
	add(branchDecoy, tagOf(branchRun)+"-decoy", sha)
	shaDecoy, shaRun, _ := o.dispatch("reconciliation_required")
	add(shaDecoy, tagOf(shaRun), strings.Repeat("b", 40))
	twice, twiceRun, _ := o.dispatch("reconciliation_required")
	add(twice, tagOf(twiceRun), sha)
	add(twice, tagOf(twiceRun), sha)
	none, _, _ := o.dispatch("reconciliation_required")

	type decision struct {
		Effect   int64
		Action   string
		Decision struct {
			WorkflowRunID int64 `json:"workflow_run_id"`
			Reason        string
		}
	}
	decide := func(args ...string) map[int64]decision {
		t.Helper()
		code, out, errOut := run(t, env, append([]string{"reconcile", "auto", "-o", "json"}, args...)...)
		var ds []decision
		if code != 0 || json.Unmarshal([]byte(out), &ds) != nil {
			t.Fatalf("reconcile auto %v: %d %s %s", args, code, out, errOut)
		}
		m := map[int64]decision{}
		for _, d := range ds {
			m[d.Effect] = d
		}
		return m
	}
	audits := func() int {
		var n int
		_ = o.pool.QueryRow(o.ctx, `SELECT count(*) FROM control_plane_audit WHERE action LIKE 'outbox.reconciliation.%'`).Scan(&n)
		return n
	}

	dry := decide("--dry-run")
	if dry[exact].Action != "would_resolve" || dry[exact].Decision.WorkflowRunID != want || audits() != 0 ||
		o.status(exact) != outbox.StatusReconciliationRequired {
		t.Fatalf("dry run: %+v, %d audit rows, status %s", dry[exact], audits(), o.status(exact))
	}
	got := decide()
	wantActions := map[int64]string{exact: "resolved", branchDecoy: "left", shaDecoy: "left", twice: "left", none: "left"}
	for id, action := range wantActions {
		if got[id].Action != action || got[id].Decision.Reason == "" {
			t.Errorf("effect %d: %+v, want %s", id, got[id], action)
		}
	}
	if !strings.Contains(got[branchDecoy].Decision.Reason, "another branch or commit") || !strings.Contains(got[twice].Decision.Reason, "2 runs match exactly") {
		t.Errorf("reasons: %q, %q", got[branchDecoy].Decision.Reason, got[twice].Decision.Reason)
	}
	var wfRun int64
	if err := o.pool.QueryRow(o.ctx, `SELECT a.workflow_run_id FROM execution_attempts a WHERE a.release_run_id = $1`, exactRun).Scan(&wfRun); err != nil || wfRun != want {
		t.Fatalf("exact run recorded %d (%v), want %d", wfRun, err, want)
	}
	for _, id := range []int64{branchDecoy, shaDecoy, twice, none} {
		if o.status(id) != outbox.StatusReconciliationRequired {
			t.Errorf("effect %d is %s: only the exact match may be resolved", id, o.status(id))
		}
	}
	var left, repaired int
	_ = o.pool.QueryRow(o.ctx, `SELECT count(*) FILTER (WHERE action = 'outbox.reconciliation.left'), count(*) FILTER (WHERE action = 'outbox.reconciliation.repair')
		FROM control_plane_audit WHERE operator = 'alice'`).Scan(&left, &repaired)
	if left != 4 || repaired != 1 {
		t.Fatalf("audit: %d left, %d repaired; want 4 and 1", left, repaired)
	}
	// More records than --limit: passes take turns, the least recently left first (the four were
	// left in this order above), and the rest are counted. Newest first, or oldest first alone,
	// records left for a person would keep every pass from the others.
	examined := func(args ...string) []int64 {
		t.Helper()
		code, out, errOut := run(t, env, append([]string{"reconcile", "auto", "--limit", "2", "-o", "json"}, args...)...)
		var ds []decision
		if code != 0 || json.Unmarshal([]byte(out), &ds) != nil || !strings.Contains(errOut, "brops: 2 more were not examined (--limit 2;") {
			t.Fatalf("--limit 2 %v: %d %s %s", args, code, out, errOut)
		}
		var ids []int64
		for _, d := range ds {
			ids = append(ids, d.Effect)
		}
		return ids
	}
	if got := examined("--dry-run"); !slices.Equal(got, []int64{branchDecoy, shaDecoy}) {
		t.Fatalf("--limit 2, dry run: %v, want %d and %d", got, branchDecoy, shaDecoy)
	}
	if got := examined(); !slices.Equal(got, []int64{branchDecoy, shaDecoy}) {
		t.Fatalf("--limit 2: %v, want %d and %d", got, branchDecoy, shaDecoy)
	}
	if got := examined(); !slices.Equal(got, []int64{twice, none}) {
		t.Fatalf("--limit 2, the next pass: %v, want %d and %d", got, twice, none)
	}
	if code, out, _ := run(t, env, "reconcile", "auto", "--dry-run", "--limit", "2"); code != 0 || !strings.Contains(out, "2 more were not examined") {
		t.Fatalf("--limit 2, table: %d %s", code, out)
	}
	// More workflow_dispatch runs since the dispatches started than are read: the oldest, nearest
	// the dispatches, are unread, so nothing is decided, and inspect says so instead of advising
	// --not-dispatched.
	for i := range 501 {
		sim.AddWorkflowRun("octo-org/hello-world", file, "workflow_dispatch", fmt.Sprintf("someone else's run %d", i), time.Now())
	}
	for id, d := range decide("--dry-run") {
		if d.Action != "would_leave" || !strings.Contains(d.Decision.Reason, "more than 500 workflow_dispatch runs") {
			t.Errorf("effect %d with 501 newer runs: %+v, want left with the reason", id, d)
		}
	}
	if code, out, errOut := run(t, env, "reconcile", "inspect", strconv.FormatInt(none, 10)); code != 1 || !strings.Contains(errOut, "never --not-dispatched") {
		t.Fatalf("inspect with 501 newer runs: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := run(t, map[string]string{"DATABASE_URL": o.env["DATABASE_URL"], "BOARDREADYOPS_OPERATOR": "alice"}, "reconcile", "auto"); code != 2 ||
		!strings.Contains(errOut, "BOARDREADYOPS_GITHUB_APP_ID") {
		t.Fatalf("without GitHub credentials: %d %s", code, errOut)
	}
}

// A malformed BOARDREADYOPS_GITHUB_APP_ID is reported as such by every command that asks GitHub,
// before it does anything, not read as unset ("set BOARDREADYOPS_GITHUB_APP_ID"); the flag, when
// given, wins over it.
func TestMalformedAppID(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://u@127.0.0.1:1/db?connect_timeout=5", "BOARDREADYOPS_OPERATOR": "alice",
		"BOARDREADYOPS_GITHUB_APP_ID": "12a", "BOARDREADYOPS_GITHUB_PRIVATE_KEY_FILE": filepath.Join(t.TempDir(), "absent.pem")}
	for _, args := range [][]string{{"reconcile", "inspect", "1"}, {"reconcile", "auto"}, {"webhooks", "redeliver"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			code, out, errOut := run(t, env, args...)
			if code != 2 || !strings.Contains(errOut, `BOARDREADYOPS_GITHUB_APP_ID="12a": not an integer`) {
				t.Errorf("exit %d (%s %s), want 2 and the variable's problem", code, out, errOut)
			}
			code, out, errOut = run(t, env, append(args, "--github-app-id", "7")...)
			if code != 1 || strings.Contains(errOut, "BOARDREADYOPS_GITHUB_APP_ID") {
				t.Errorf("with --github-app-id: exit %d (%s %s), want 1 for the absent key or database", code, out, errOut)
			}
		})
	}
}
