package attack_test

import (
	"context"

	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/hack/test/proctest"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
)

// TestAttacks runs each attack of docs/security.md ("Webhooks") against one running product, one
// installation and repository range per attack, and checks the state the attack aimed at.
func TestAttacks(t *testing.T) {
	t.Parallel()
	p := start(t)
	ctx := context.Background()

	// A signed JSON push of a branch whose commit message carries "&payload=<document>": read as a
	// form, it was a tag push of another installation's repository, and lifecycle created a
	// release run for it.
	t.Run("content-type swap", func(t *testing.T) {
		inner := encode(tagPush(1001, repository("victim/app"), "v6.6.6", strings.Repeat("b", 40)))
		outer := map[string]any{"ref": "refs/heads/main", "before": strings.Repeat("0", 40), "after": strings.Repeat("a", 40),
			"created": false, "deleted": false, "installation": map[string]any{"id": 1002}, "repository": repository("attacker/app"),
			"head_commit": map[string]any{"message": "docs&payload=" + url.QueryEscape(string(inner)) + "&z="}}
		body := p.mustDeliver(t, "push", "", outer)
		if form, err := url.ParseQuery(string(body)); err != nil || form.Get("payload") != string(inner) {
			t.Fatalf("the body does not carry the smuggled document as a form field: %v", err)
		}
		code := p.deliver(t, "push", "", "application/x-www-form-urlencoded", body)
		p.settle(t)
		if n := p.count(t, `SELECT count(*) FROM release_runs WHERE repository_id = $1`, githubsim.RepositoryID("victim/app")); n != 0 {
			t.Fatalf("the swapped delivery (answered %d) created %d release runs for the smuggled repository", code, n)
		}
		if code != http.StatusUnsupportedMediaType {
			t.Fatalf("swapped content type answered %d, want 415", code)
		}
	})

	// A signed repository.deleted body resent as an installation event marked the installation
	// deleted.
	t.Run("event swap", func(t *testing.T) {
		repo := repository("acme/site")
		p.mustDeliver(t, "installation", "", installationEvent("created", 2001, "acme", repo))
		deleted := p.mustDeliver(t, "repository", "", map[string]any{"action": "deleted", "installation": map[string]any{"id": 2001},
			"repository": repo, "sender": account("acme")})
		code := p.deliver(t, "installation", "", "", deleted)
		p.settle(t)
		if n := p.count(t, `SELECT count(*) FROM installations WHERE id = 2001 AND deleted_at IS NULL`); n != 1 {
			t.Fatalf("the swapped delivery (answered %d) deleted the installation", code)
		}
		if code != http.StatusBadRequest {
			t.Fatalf("swapped event answered %d, want 400", code)
		}
	})

	// A captured check_run.rerequested resent under a fresh delivery id started another execution
	// attempt and dispatched the release workflow again.
	t.Run("replayed rerequest", func(t *testing.T) {
		repo := repository("octo/release-me")
		repoID := repo["id"]
		p.mustDeliver(t, "installation", "", installationEvent("created", 3001, "octo", repo))
		p.mustDeliver(t, "push", "", tagPush(3001, repo, "v1.0.0", strings.Repeat("c", 40)))
		p.waitFor(t, 1, `SELECT count(*) FROM release_runs WHERE repository_id = $1 AND status = 'succeeded'`, repoID)
		var runID string
		var checkRunID int64
		if err := p.pool.QueryRow(ctx, `SELECT id::text, check_run_id FROM release_runs WHERE repository_id = $1`, repoID).Scan(&runID, &checkRunID); err != nil {
			t.Fatal(err)
		}
		rerequest := p.mustDeliver(t, "check_run", "", map[string]any{"action": "rerequested", "installation": map[string]any{"id": 3001},
			"repository": repo, "sender": account("octo"),
			"check_run": map[string]any{"id": checkRunID, "external_id": runID, "name": "BoardReadyOps release", "head_sha": strings.Repeat("c", 40),
				"status": "completed", "conclusion": "success", "app": map[string]any{"id": appID}}})
		p.waitFor(t, 2, `SELECT count(*) FROM execution_attempts WHERE release_run_id = $1::uuid AND status = 'succeeded'`, runID)

		code := p.deliver(t, "check_run", "", "", rerequest) // the same body, a fresh delivery id
		p.settle(t)
		attempts := p.count(t, `SELECT count(*) FROM execution_attempts WHERE release_run_id = $1::uuid`, runID)
		dispatches := p.count(t, `SELECT count(*) FROM control_plane_outbox WHERE release_run_id = $1::uuid AND effect_type = 'github.workflow.dispatch'`, runID)
		if attempts != 2 || dispatches != 2 {
			t.Fatalf("after the replay (answered %d): %d attempts and %d dispatches, want 2 and 2", code, attempts, dispatches)
		}
		if code != http.StatusOK {
			t.Fatalf("replay answered %d, want 200 (duplicate)", code)
		}
	})

	// An old installation.created resent under a fresh delivery id brought a deleted installation
	// back.
	t.Run("replayed installation", func(t *testing.T) {
		created := p.mustDeliver(t, "installation", "", installationEvent("created", 4001, "gone", repository("gone/app")))
		// Applied before the deletion is sent: two lifecycle claim loops may otherwise apply the
		// deletion first (lifecycle applies installation events in the order its claim loops
		// commit them, not GitHub's), and the attack here is the replay, not the order.
		p.settle(t)
		p.mustDeliver(t, "installation", "", installationEvent("deleted", 4001, "gone", repository("gone/app")))
		p.settle(t)
		code := p.deliver(t, "installation", "", "", created)
		p.settle(t)
		if n := p.count(t, `SELECT count(*) FROM installations WHERE id = 4001 AND deleted_at IS NOT NULL`); n != 1 {
			t.Fatalf("the replay (answered %d) brought the deleted installation back", code)
		}
	})

	// workflow_run was matched to an attempt by workflow_run_id alone: a completion naming another
	// repository finished this repository's running attempt.
	t.Run("cross-repository completion", func(t *testing.T) {
		repo := repository("bank/ledger")
		repoID := githubsim.RepositoryID("bank/ledger")
		p.mustDeliver(t, "installation", "", installationEvent("created", 5001, "bank", repo))
		p.gate.holdCompletions(repoID)
		p.mustDeliver(t, "push", "", tagPush(5001, repo, "v2.0.0", strings.Repeat("d", 40)))
		p.waitFor(t, 1, `SELECT count(*) FROM execution_attempts a JOIN release_runs r ON r.id = a.release_run_id
			WHERE r.repository_id = $1 AND a.status = 'running'`, repoID)
		var workflowRunID int64
		if err := p.pool.QueryRow(ctx, `SELECT a.workflow_run_id FROM execution_attempts a JOIN release_runs r ON r.id = a.release_run_id
			WHERE r.repository_id = $1`, repoID).Scan(&workflowRunID); err != nil {
			t.Fatal(err)
		}
		other := repository("mallory/tools")
		p.mustDeliver(t, "installation", "", installationEvent("created", 5002, "mallory", other))
		p.mustDeliver(t, "workflow_run", "", map[string]any{"action": "completed", "installation": map[string]any{"id": 5002},
			"repository": other, "sender": account("mallory"), "workflow": map[string]any{"id": 1, "path": ".github/workflows/release.yml"},
			"workflow_run": map[string]any{"id": workflowRunID, "run_attempt": 1, "status": "completed", "conclusion": "failure",
				"event": "workflow_dispatch", "path": ".github/workflows/release.yml", "head_sha": strings.Repeat("d", 40)}})
		p.settle(t)
		if n := p.count(t, `SELECT count(*) FROM execution_attempts a JOIN release_runs r ON r.id = a.release_run_id
			WHERE r.repository_id = $1 AND a.status = 'running'`, repoID); n != 1 {
			t.Fatal("another repository's workflow_run finished this repository's attempt")
		}
		// The genuine completion still matches.
		p.gate.release(t)
		p.waitFor(t, 1, `SELECT count(*) FROM release_runs WHERE repository_id = $1 AND status = 'succeeded'`, repoID)
	})

	// A tag push naming a repository of another installation started a release run for it under
	// the delivery's installation.
	t.Run("tag push from another installation", func(t *testing.T) {
		repo := repository("corp/product")
		repoID := repo["id"]
		p.mustDeliver(t, "installation", "", installationEvent("created", 6001, "corp", repo))
		p.mustDeliver(t, "installation", "", installationEvent("created", 6002, "intruder", repository("intruder/x")))
		p.settle(t)
		p.mustDeliver(t, "push", "", tagPush(6002, repo, "v3.0.0", strings.Repeat("e", 40)))
		p.settle(t)
		if n := p.count(t, `SELECT count(*) FROM release_runs WHERE repository_id = $1`, repoID); n != 0 {
			t.Fatalf("a push of installation 6002 created %d release runs for installation 6001's repository", n)
		}
		// The repository's own installation still releases it.
		p.mustDeliver(t, "push", "", tagPush(6001, repo, "v3.0.1", strings.Repeat("f", 40)))
		p.waitFor(t, 1, `SELECT count(*) FROM release_runs WHERE repository_id = $1 AND installation_id = 6001`, repoID)
	})

	// Retry on a blocked run's check run replayed its dead letters for whoever the payload named
	// as sender: anyone who can make GitHub send requested_action (a user with read access, or
	// another App's rerequest) could start the release workflow. Now GitHub is asked for the
	// sender's permission, and only write access replays.
	t.Run("retry without write access", func(t *testing.T) {
		repo := repository("dev/blocked")
		repoID := githubsim.RepositoryID("dev/blocked")
		p.sim.AddRepository(7001, repoID, "dev/blocked", map[string]githubsim.Workflow{"boardreadyops-release.yml": {Dispatchable: false}})
		p.mustDeliver(t, "installation", "", installationEvent("created", 7001, "dev", repo))
		p.mustDeliver(t, "push", "", tagPush(7001, repo, "v7.0.0", strings.Repeat("7", 40)))
		p.waitFor(t, 1, `SELECT count(*) FROM release_runs WHERE repository_id = $1 AND status = 'blocked'`, repoID)
		p.settle(t)
		var runID string
		var checkRunID int64
		if err := p.pool.QueryRow(ctx, `SELECT id::text, check_run_id FROM release_runs WHERE repository_id = $1`, repoID).Scan(&runID, &checkRunID); err != nil {
			t.Fatal(err)
		}
		// The workflow is fixed: a replay now would start it.
		p.sim.SetWorkflow("dev/blocked", "boardreadyops-release.yml", githubsim.ReleaseWorkflow())
		p.sim.SetCollaborator("dev/blocked", "reader", githubsim.RoleRead)
		p.sim.SetCollaborator("dev/blocked", "dev-lead", githubsim.RoleWrite)
		press := func(login string, id int64) []byte {
			return p.mustDeliver(t, "check_run", "", map[string]any{"action": "requested_action", "installation": map[string]any{"id": 7001},
				"repository": repo, "sender": map[string]any{"login": login, "id": id, "type": "User"},
				"requested_action": map[string]any{"identifier": "retry"},
				"check_run": map[string]any{"id": checkRunID, "external_id": runID, "name": "BoardReadyOps release", "head_sha": strings.Repeat("7", 40),
					"status": "completed", "conclusion": "failure", "app": map[string]any{"id": appID}}})
		}
		press("reader", 700001)
		press("stranger", 700002) // not a collaborator: GitHub answers 404
		p.settle(t)
		if n := p.count(t, `SELECT count(*) FROM control_plane_audit WHERE action = 'outbox.replay'`); n != 0 ||
			p.count(t, `SELECT count(*) FROM release_runs WHERE id = $1::uuid AND status = 'blocked'`, runID) != 1 {
			t.Fatalf("a Retry without write access replayed %d dead letters\n%s", n, p.state(t))
		}
		if n := p.count(t, `SELECT count(*) FROM control_plane_audit WHERE action = 'check_run.retry.refused' AND release_run_id = $1::uuid
			AND operator IN ('github:reader', 'github:stranger')`, runID); n != 2 {
			t.Fatalf("%d refusals audited, want 2", n)
		}
		// The genuine press replays once, also when its body is sent again.
		genuine := press("dev-lead", 700003)
		p.waitFor(t, 1, `SELECT count(*) FROM release_runs WHERE id = $1::uuid AND status = 'succeeded'`, runID)
		p.deliver(t, "check_run", "", "", genuine)
		p.settle(t)
		if n := p.count(t, `SELECT count(*) FROM control_plane_audit WHERE action = 'outbox.replay' AND operator = 'github:dev-lead'`); n != 1 {
			t.Fatalf("%d replays for the writer's Retry, want 1", n)
		}
	})
}

// A webhook secret shorter than 16 bytes is refused at start with a message that says so.
func TestShortSecretRefusedAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := proctest.Build(dir, "ingest"); err != nil {
		t.Fatal(err)
	}
	secretFile := filepath.Join(dir, "webhook-secret")
	if err := os.WriteFile(secretFile, []byte("short-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	metrics := proctest.FreeAddr(t)
	proc := &proctest.Process{Name: "ingest", Bin: filepath.Join(dir, "ingest"), MetricsAddr: metrics, Env: []string{
		"DATABASE_URL=postgres://postgres@127.0.0.1:1/none?sslmode=disable", "LISTEN_ADDR=" + proctest.FreeAddr(t),
		"METRICS_ADDR=" + metrics, "BOARDREADYOPS_WEBHOOK_SECRET_FILE=" + secretFile}}
	proc.Start(t)
	select {
	case <-proc.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("ingest runs with a 12-byte webhook secret:\n%s", proc.Log.String())
	}
	if log := proc.Log.String(); !strings.Contains(log, "12 bytes, want at least 16") || strings.Contains(log, "short-secret") {
		t.Fatalf("ingest output does not refuse the short secret clearly (or echoes it):\n%s", log)
	}
}
