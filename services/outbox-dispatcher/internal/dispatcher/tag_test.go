package dispatcher_test

import (
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
)

// A release run's dispatch names its tag, and GitHub runs the workflow at whatever the tag points
// at when the dispatch arrives. A tag moved (or deleted and pushed again) after the run was created
// must not be dispatched: the workflow would release another commit under this run's check run.
// The dispatcher reads the tag first; these are the attacks and what each must leave.
func TestDispatchReadsTheTagFirst(t *testing.T) {
	t.Parallel()
	const repo, tag, other = "octo-org/hello-world", "v1.0.0", "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name string
		// change is what happens to the tag (or to reading it) before the dispatcher runs.
		change func(s *githubsim.Simulator)
		// dispatched: whether the workflow is dispatched; else reason is in the dead letter's error.
		dispatched bool
		reason     []string
	}{
		{"the tag still points at the run's commit", func(*githubsim.Simulator) {}, true, nil},
		{"the tag was moved to another commit", func(s *githubsim.Simulator) { s.SetTag(repo, tag, other) }, false,
			[]string{"tag v1.0.0 was moved", "points at commit " + other, "not at " + pushedSHA}},
		{"the tag was deleted", func(s *githubsim.Simulator) { s.DeleteTag(repo, tag) }, false,
			[]string{"tag v1.0.0 does not exist in " + repo, "HTTP 422"}},
		{"the repository is gone (404): not a missing tag", func(s *githubsim.Simulator) {
			s.AddFault(githubsim.Fault{Operation: githubsim.OpGetTagCommit, Response: &githubsim.Response{Status: 404, Body: `{"message":"Not Found"}`}})
		}, false, []string{"rejected (HTTP 404)"}},
		{"reading the tag failed once (502)", func(s *githubsim.Simulator) {
			s.AddFault(githubsim.Fault{Operation: githubsim.OpGetTagCommit, ServerErrorRate: 1, Times: 1})
		}, true, nil},
		{"a replica lagging the push: the first read sees another commit", func(s *githubsim.Simulator) {
			s.AddFault(githubsim.Fault{Operation: githubsim.OpGetTagCommit, Times: 1, Response: &githubsim.Response{Status: 200, Body: other}})
		}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			run := e.release(55501, repo, tag)
			tt.change(e.sim)
			d := e.dispatcher(10 * time.Second)
			if tt.dispatched {
				e.runUntil(d, func() bool { return e.statuses()["github.workflow.dispatch/completed"] == 1 })
				if n := e.sim.DispatchTotal(); n != 1 {
					t.Fatalf("%d dispatches, want 1", n)
				}
				// The read named the run's commit as the ETag and was answered 304, which GitHub
				// does not count against the rate limit.
				if n := e.sim.Count(githubsim.OpGetTagCommit, 304); n != 1 {
					t.Fatalf("%d tag reads answered 304, want 1", n)
				}
				return
			}
			e.runUntil(d, func() bool {
				return e.statuses()["github.workflow.dispatch/dead_letter"] == 1 && e.statuses()["github.check_run.complete/completed"] == 1
			})
			if n := e.sim.DispatchTotal(); n != 0 {
				t.Fatalf("%d dispatches of a tag that does not point at the run's commit", n)
			}
			var lastError, status string
			var started bool
			if err := e.pool.QueryRow(e.ctx, `SELECT o.last_error, o.delivery_started_at IS NOT NULL, r.status FROM control_plane_outbox o
				JOIN release_runs r ON r.id = o.release_run_id WHERE o.effect_type = 'github.workflow.dispatch'`).Scan(&lastError, &started, &status); err != nil {
				t.Fatal(err)
			}
			for _, want := range tt.reason {
				if !strings.Contains(lastError, want) {
					t.Errorf("dead letter's reason %q lacks %q", lastError, want)
				}
			}
			if started || status != "blocked" {
				t.Fatalf("delivery started %v, run %s; want not started, blocked", started, status)
			}
			// The check run says why, with Retry.
			c := e.checkRuns(run)[0]
			if c.Conclusion == nil || *c.Conclusion != "failure" || c.Output.Summary == nil || !strings.Contains(*c.Output.Summary, tt.reason[0]) {
				t.Fatalf("check run %+v, want failed with %q", c, tt.reason[0])
			}
			// Read three times before the dead letter: a moment's replica lag is not a moved tag.
			if n := e.count(`SELECT attempts FROM control_plane_outbox WHERE effect_type = 'github.workflow.dispatch'`); n != 3 && tt.reason[0] != "rejected (HTTP 404)" {
				t.Fatalf("dead-lettered at attempt %d, want 3", n)
			}
			// The tag is put back where the run was started: a replay reads it again and dispatches.
			e.sim.ClearFaults()
			e.sim.SetTag(repo, tag, pushedSHA)
			if _, err := e.pool.Exec(e.ctx, `SELECT boardreadyops_outbox_replay(id, 'test', 'tag restored') FROM control_plane_outbox
				WHERE effect_type = 'github.workflow.dispatch'`); err != nil {
				t.Fatal(err)
			}
			e.runUntil(d, func() bool { return e.statuses()["github.workflow.dispatch/completed"] == 1 })
			if n := e.sim.DispatchTotal(); n != 1 {
				t.Fatalf("%d dispatches after the replay, want 1", n)
			}
		})
	}
}
