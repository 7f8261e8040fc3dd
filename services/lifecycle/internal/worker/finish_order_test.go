package worker_test

import (
	"strings"
	"testing"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
	"github.com/boardreadyops/cloud/services/lifecycle/internal/handler"
)

// finishState is what a scenario leaves, comparable between a worker that finishes workflow runs
// together and one that handles every job alone.
func (b *bundle) finishState() string {
	b.t.Helper()
	var s string
	if err := b.pool.QueryRow(b.ctx, `SELECT jsonb_build_object(
		'runs', (SELECT jsonb_agg(jsonb_build_object('ref', ref, 'status', status, 'cur', current_attempt) ORDER BY ref) FROM release_runs),
		'attempts', (SELECT jsonb_agg(jsonb_build_object('wr', workflow_run_id, 'n', number, 'status', a.status, 'c', conclusion)
		             ORDER BY workflow_run_id, number) FROM execution_attempts a),
		'pages', (SELECT jsonb_agg(jsonb_build_object('wr', x.workflow_run_id, 'url', w.workflow_run_url, 'att', w.workflow_run_attempt,
		           'started_eq_dispatched', w.started_at = x.dispatched_at) ORDER BY x.workflow_run_id)
		          FROM execution_attempt_workflow_runs w JOIN execution_attempts x ON x.id = w.execution_attempt_id),
		'outbox', (SELECT jsonb_agg(jsonb_build_object('t', effect_type, 's', status, 'g', generation, 'state', payload->>'state',
		             'notice', payload->>'notice', 'attempts', payload->'attempts')
		           ORDER BY (SELECT ref FROM release_runs r WHERE r.id = release_run_id), effect_type, generation, status)
		           FROM control_plane_outbox WHERE status <> 'completed' OR superseded_by IS NOT NULL),
		'jobs', (SELECT jsonb_agg(status ORDER BY id) FROM control_plane_jobs))::text`).Scan(&s); err != nil {
		b.t.Fatal(err)
	}
	return timestamp.ReplaceAllString(s, "TIME")
}

// Finishing a batch's completed workflow runs together (migration 00052) must leave exactly the
// state that handling its jobs one after another leaves, whatever else the batch holds: each
// scenario delivers one batch and drains it once, with the set-based finish and with a handler
// that is not a worker.Finisher (every job alone). From a fresh-eyes review, which found the
// first version hoisting finishes ahead of earlier jobs: a rerequest then re-ran a finished
// release (a second dispatch), a suspension dead-lettered the final updates, an earlier attempt
// was listed as still running, and a late run attempt reopened a finished attempt.
func TestFinishTogetherMatchesAlone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prepare func(b *bundle, runs map[string]string) []eventdoc.Document
	}{
		{"a rerequest before the completion of its run", func(b *bundle, runs map[string]string) []eventdoc.Document {
			return []eventdoc.Document{rerequest(runs["v1.0.0"], 4001),
				workflowRun("completed", 9000, "success"), workflowRun("completed", 9001, "success")}
		}},
		{"run attempts of one workflow run out of order", func(b *bundle, runs map[string]string) []eventdoc.Document {
			second := workflowRun("completed", 9000, "failure")
			second.WorkflowRun.RunAttempt = 2
			return []eventdoc.Document{second, workflowRun("completed", 9000, "success"), workflowRun("completed", 9001, "success")}
		}},
		{"a suspension before the completions", func(b *bundle, runs map[string]string) []eventdoc.Document {
			return []eventdoc.Document{installationEvent("suspend"),
				workflowRun("completed", 9000, "success"), workflowRun("completed", 9001, "success")}
		}},
		{"an earlier attempt re-run from Actions completing before the current one", func(b *bundle, runs map[string]string) []eventdoc.Document {
			b.deliver(workflowRun("completed", 9000, "failure"))
			b.drain()
			b.completeEffects(0, 0)
			b.deliver(rerequest(runs["v1.0.0"], 4001))
			b.drain()
			b.completeEffects(0, 9100) // attempt 2 of v1.0.0: workflow run 9100
			d := workflowRun("requested", 9000, "")
			d.WorkflowRun.RunAttempt = 2 // attempt 1's workflow run re-run from Actions
			b.deliver(d)
			b.drain()
			b.completeEffects(0, 0)
			old := workflowRun("completed", 9000, "success")
			old.WorkflowRun.RunAttempt = 2
			return []eventdoc.Document{old, workflowRun("completed", 9100, "success"), workflowRun("completed", 9001, "success")}
		}},
		{"pushes between the completions", func(b *bundle, runs map[string]string) []eventdoc.Document {
			return []eventdoc.Document{pushTag("v2.0.0", sha), workflowRun("completed", 9000, "success"), pushTag("v2.1.0", sha),
				workflowRun("completed", 9001, "failure"), workflowRun("completed", 9002, "cancelled")}
		}},
		{"a completion that waits, after the others", func(b *bundle, runs map[string]string) []eventdoc.Document {
			return []eventdoc.Document{workflowRun("completed", 9000, "success"), workflowRun("completed", 9001, "failure"),
				workflowRun("completed", 7777, "success")}
		}},
		{"conclusions and pages", func(b *bundle, runs map[string]string) []eventdoc.Document {
			a := workflowRun("completed", 9000, "")
			a.WorkflowRun.HTMLURL = ""
			c := workflowRun("completed", 9001, "cancelled")
			c.WorkflowRun.HTMLURL = "https://github.com/" + strings.Repeat("u", 2000)
			d := workflowRun("completed", 9002, strings.Repeat("timed_out", 12))
			d.WorkflowRun.RunAttempt = 0
			return []eventdoc.Document{a, c, d}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var states []string
			for _, together := range []bool{true, false} {
				b := setup(t)
				b.deliver(installationEvent("created"))
				tags := []string{"v1.0.0", "v1.1.0", "v1.2.0"}
				runs := b.startRuns(tags...)
				docs := tt.prepare(b, runs)
				if together {
					b.withWorker(nil)
				} else {
					b.withWorker(func(handler.Job) {}) // a hookHandler is not a worker.Finisher
				}
				for _, d := range docs {
					b.deliver(d)
				}
				if n := b.drain(); n != len(docs) {
					t.Fatalf("drained %d jobs, want %d", n, len(docs))
				}
				states = append(states, b.finishState())
			}
			if states[0] != states[1] {
				t.Errorf("finished together:\n%s\nalone:\n%s", states[0], states[1])
			}
		})
	}
}
