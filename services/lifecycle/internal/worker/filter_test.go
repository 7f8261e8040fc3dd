package worker_test

import (
	"testing"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
)

// Every delivery ingest's filter drops (eventdoc.Filter) changes nothing here, even in the state
// where its kept sibling acts: a finished run whose check run a rerequest would re-run, a running
// attempt a dispatched completion would finish, a tag pattern a created tag would match. So
// dropping them at ingest loses nothing (docs/webhooks.md, "Filtered deliveries").
func TestFilteredDeliveriesChangeNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deliver(pushTag("v1.0.0", sha))
	b.drain()
	finished := b.onlyRun()
	b.completeEffects(4001, 9001)
	b.deliver(workflowRun("completed", 9001, "failure"))
	b.drain()
	b.completeEffects(0, 0)
	b.deliver(pushTag("v2.0.0", "1111111111111111111111111111111111111111"))
	b.drain()
	b.completeEffects(4002, 9002) // the second run's attempt is running, as workflow run 9002
	var running string
	if err := b.pool.QueryRow(b.ctx, `SELECT id::text FROM release_runs WHERE id::text <> $1`, finished).Scan(&running); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := b.runStatus(finished); r != "failed" {
		t.Fatalf("first run %s, want failed", r)
	}
	if r, a, _ := b.runStatus(running); r != "running" || a != "running" {
		t.Fatalf("second run %s / %s, want running", r, a)
	}

	withAction := func(d eventdoc.Document, action string) eventdoc.Document { d.Action = action; return d }
	byBot := func(d eventdoc.Document) eventdoc.Document {
		if d.CheckRun != nil {
			d.CheckRun.SenderLogin, d.CheckRun.SenderType = "other-app[bot]", "Bot"
		}
		if d.CheckSuite != nil {
			d.CheckSuite.SenderLogin, d.CheckSuite.SenderType = "other-app[bot]", "Bot"
		}
		return d
	}
	notDispatched := workflowRun("completed", 9002, "success")
	notDispatched.WorkflowRun.Event = "push"
	branch := pushTag("x", "2222222222222222222222222222222222222222")
	branch.Push.Ref = "refs/heads/main"
	deleted := pushTag("v3.0.0", "0000000000000000000000000000000000000000")
	deleted.Push.Created, deleted.Push.Deleted = false, true
	moved := pushTag("v3.0.0", "3333333333333333333333333333333333333333")
	moved.Push.Created = false
	tests := []struct {
		name string
		doc  eventdoc.Document
	}{
		{"workflow_run requested of the running attempt", workflowRun("requested", 9002, "")},
		{"workflow_run in_progress of the running attempt", workflowRun("in_progress", 9002, "")},
		{"workflow_run completed of the running attempt's id, not dispatched", notDispatched},
		{"check_run created of the finished run", withAction(rerequest(finished, 4001), "created")},
		{"check_run completed of the finished run", withAction(rerequest(finished, 4001), "completed")},
		{"check_run rerequested of the finished run by a bot", byBot(rerequest(finished, 4001))},
		{"check_suite rerequested of the finished run's commit by a bot", byBot(suiteRerequest(sha))},
		{"branch push", branch},
		{"matching tag deleted", deleted},
		{"matching tag moved", moved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, filtered := eventdoc.Filter(&tt.doc); !filtered {
				t.Fatal("not a delivery the filter drops: the case proves nothing")
			}
			before := b.state()
			job := b.deliver(tt.doc)
			b.drain()
			if s := b.jobStatus(job); s != "completed" {
				t.Fatalf("job %s", s)
			}
			if after := b.state(); after != before {
				t.Fatalf("state changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}

	// The kept siblings do act in this state.
	b.deliver(rerequest(finished, 4001))
	completed := workflowRun("completed", 9002, "success")
	completed.WorkflowRun.HeadSHA = "1111111111111111111111111111111111111111" // the second run's commit
	b.deliver(completed)
	b.drain()
	if _, _, n := b.runStatus(finished); n != 2 {
		t.Fatalf("rerequest of the finished run: attempt %d, want 2", n)
	}
	if r, _, _ := b.runStatus(running); r != "succeeded" {
		t.Fatalf("dispatched completion: run %s, want succeeded", r)
	}
}

// state digests what a delivery could change: installations, repositories, runs, attempts and
// effects.
func (b *bundle) state() string {
	b.t.Helper()
	var s string
	err := b.pool.QueryRow(b.ctx, `SELECT concat_ws(' ',
		(SELECT md5(coalesce(string_agg(to_jsonb(t)::text, ',' ORDER BY t.id), '')) FROM installations t),
		(SELECT md5(coalesce(string_agg(to_jsonb(t)::text, ',' ORDER BY t.id), '')) FROM repositories t),
		(SELECT md5(coalesce(string_agg(to_jsonb(t)::text, ',' ORDER BY t.id), '')) FROM release_runs t),
		(SELECT md5(coalesce(string_agg(to_jsonb(t)::text, ',' ORDER BY t.id), '')) FROM execution_attempts t),
		(SELECT md5(coalesce(string_agg(to_jsonb(t)::text, ',' ORDER BY t.id), '')) FROM control_plane_outbox t))`).Scan(&s)
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}
