package dispatcher_test

import (
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
	"github.com/boardreadyops/cloud/services/outbox-dispatcher/internal/dispatcher"
)

// blockedByDeadLetter brings a release run to blocked: its workflow has no workflow_dispatch
// trigger, so GitHub refuses the dispatch (422) and it is dead-lettered; the check run shows why,
// with Retry. The developer then fixes the workflow.
func (e *env) blockedByDeadLetter() string {
	e.t.Helper()
	e.sim.AddInstallation(55501, "octo-org")
	e.sim.AddRepository(55501, 1, "octo-org/hello-world", map[string]githubsim.Workflow{
		"boardreadyops-release.yml": {Dispatchable: false}})
	run := e.release(55501, "octo-org/hello-world", "v5.0.0")
	e.runUntil(e.dispatcher(10*time.Second), func() bool {
		return e.count(`SELECT count(*) FROM release_runs WHERE status = 'blocked'`) == 1 &&
			e.count(`SELECT count(*) FROM control_plane_outbox WHERE status NOT IN ('completed', 'dead_letter')`) == 0
	})
	e.sim.SetWorkflow("octo-org/hello-world", "boardreadyops-release.yml", githubsim.ReleaseWorkflow())
	return run
}

// pressRetry is lifecycle's part of a Retry pressed by login: the permission read it enqueues.
func (e *env) pressRetry(run, login string) {
	e.t.Helper()
	if _, err := e.pool.Exec(e.ctx, `SELECT boardreadyops_outbox_enqueue_collaborator_permission_read($1::uuid, $2, 583008, 'delivery-1', NULL)`,
		run, login); err != nil {
		e.t.Fatal(err)
	}
}

// The dispatcher asks GitHub for the sender's permission with the installation token; only
// write access or more replays the dead-lettered dispatch. Anyone else (read, triage, or not a
// collaborator: GitHub's 404) replays nothing, and the check run stays failed with Retry and
// says why.
func TestRetryNeedsWriteAccess(t *testing.T) {
	t.Parallel()
	tests := []struct {
		role    string // "" : not a collaborator
		replays bool
	}{
		{githubsim.RoleAdmin, true},
		{githubsim.RoleMaintain, true},
		{githubsim.RoleWrite, true},
		{"release-manager:" + githubsim.RoleWrite, true},
		{githubsim.RoleTriage, false},
		{githubsim.RoleRead, false},
		{"auditor:" + githubsim.RoleRead, false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run("role "+tt.role, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			run := e.blockedByDeadLetter()
			e.sim.SetCollaborator("octo-org/hello-world", "mona", tt.role)
			e.pressRetry(run, "mona")
			// As deployed: a login of the boardreadyops_dispatcher role.
			d := e.replica(10*time.Second, func(*dispatcher.Config) {})
			if tt.replays {
				e.runUntil(d, func() bool { return e.count(`SELECT count(*) FROM release_runs WHERE status = 'running'`) == 1 })
				if n := e.count(`SELECT count(*) FROM control_plane_audit WHERE action = 'outbox.replay' AND operator = 'github:mona'`); n != 1 {
					t.Fatalf("%d replays", n)
				}
				return
			}
			e.runUntil(d, func() bool {
				return e.statuses()["github.collaborator_permission.read/completed"] == 1 &&
					e.count(`SELECT count(*) FROM control_plane_outbox WHERE status IN ('available', 'leased')`) == 0
			})
			status := map[bool]int{true: 200, false: 404}[tt.role != ""]
			if n := e.sim.Count(githubsim.OpGetCollaboratorPermission, status); n != 1 {
				t.Fatalf("%d permission reads answered %d", n, status)
			}
			if n := e.sim.Count(githubsim.OpDispatchWorkflow, 0); n != 1 {
				t.Fatalf("%d dispatches sent, want only the refused first one", n)
			}
			if r := e.count(`SELECT count(*) FROM release_runs WHERE status = 'blocked'`); r != 1 ||
				e.count(`SELECT count(*) FROM control_plane_audit WHERE action = 'check_run.retry.refused' AND operator = 'github:mona'`) != 1 ||
				e.count(`SELECT count(*) FROM control_plane_audit WHERE action = 'outbox.replay'`) != 0 {
				t.Fatal("a refused Retry replayed, or was not audited")
			}
			c := e.checkRuns(run)[0]
			if c.Status != "completed" || *c.Conclusion != "failure" || len(c.Actions) != 1 || c.Actions[0].Identifier != "retry" ||
				!strings.Contains(*c.Output.Summary, "Retry requested by @mona was refused") {
				t.Fatalf("check run %+v, summary %q", c, *c.Output.Summary)
			}
		})
	}
}

// The read's failures follow the rules of every replay-safe effect (docs/dispatcher.md,
// "Failures, by class"): not delivered or maybe delivered (5xx, a connection dropped after
// GitHub answered) is retried and the Retry replays once; a rate limit defers it; a rejection
// (403 "Resource not accessible by integration") dead-letters the read, which retries nothing
// and blocks nothing more.
func TestPermissionReadFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		fault   githubsim.Fault
		replays bool
	}{
		{"5xx is retried", githubsim.Fault{ServerErrorRate: 1, Times: 2}, true},
		{"a dropped answer is retried", githubsim.Fault{DropAfterProcessing: true, Times: 1}, true},
		{"a rate limit defers it", githubsim.Fault{SecondaryRateLimit: true, RetryAfter: time.Second, Times: 1}, true},
		{"a rejection dead-letters it", githubsim.Fault{Response: &githubsim.Response{Status: 403,
			Body: `{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/rest/collaborators/collaborators#get-repository-permissions-for-a-user"}`}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			run := e.blockedByDeadLetter()
			e.sim.SetCollaborator("octo-org/hello-world", "mona", githubsim.RoleWrite)
			tt.fault.Operation = githubsim.OpGetCollaboratorPermission
			e.sim.AddFault(tt.fault)
			e.pressRetry(run, "mona")
			d := e.dispatcher(10 * time.Second)
			if tt.replays {
				e.runUntil(d, func() bool { return e.count(`SELECT count(*) FROM release_runs WHERE status = 'running'`) == 1 })
				if n := e.count(`SELECT count(*) FROM control_plane_audit WHERE action = 'outbox.replay'`); n != 1 {
					t.Fatalf("%d replays, want 1", n)
				}
				if n := e.sim.Count(githubsim.OpDispatchWorkflow, 204) + e.sim.Count(githubsim.OpDispatchWorkflow, 200); n != 1 {
					t.Fatalf("%d dispatches accepted, want 1", n)
				}
				return
			}
			e.runUntil(d, func() bool {
				return e.statuses()["github.collaborator_permission.read/dead_letter"] == 1 &&
					e.count(`SELECT count(*) FROM control_plane_outbox WHERE status IN ('available', 'leased')`) == 0
			})
			if e.count(`SELECT count(*) FROM release_runs WHERE status = 'blocked'`) != 1 ||
				e.count(`SELECT count(*) FROM control_plane_audit`) != 0 {
				t.Fatal("a Retry whose permission could not be read changed the run")
			}
			c := e.checkRuns(run)[0]
			if *c.Conclusion != "failure" || len(c.Actions) != 1 ||
				!strings.Contains(*c.Output.Summary, "could not be read from GitHub") || !strings.Contains(*c.Output.Summary, "workflow_dispatch") {
				t.Fatalf("check run summary %q", *c.Output.Summary)
			}
		})
	}
}
