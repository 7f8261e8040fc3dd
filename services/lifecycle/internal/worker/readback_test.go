package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/services/lifecycle/internal/worker"
)

// Lifecycle's upkeep reads back a running release run whose workflow run has been quiet for
// ReadBackAfter (its completion webhook lost), by enqueuing a github.workflow_run.read effect
// for the dispatcher, and leaves a run that changed recently alone.
func TestUpkeepReadsQuietRunsBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.withWorker(nil, func(c *worker.Config) { c.ReadBackAfter = 30 * time.Minute })
	for _, tag := range []string{"v1.0.0", "v1.0.1"} {
		b.deliver(pushTag(tag, sha))
	}
	b.drain()
	// Both dispatched (workflow run known, running); only v1.0.0 has been quiet for an hour.
	b.exec(`UPDATE release_runs SET status = 'running', check_run_id = 4001 WHERE ref IN ('refs/tags/v1.0.0', 'refs/tags/v1.0.1')`)
	b.exec(`UPDATE execution_attempts a SET status = 'running', dispatched_at = now(),
		workflow_run_id = CASE r.ref WHEN 'refs/tags/v1.0.0' THEN 9001 ELSE 9002 END
		FROM release_runs r WHERE r.id = a.release_run_id`)
	b.exec(`UPDATE release_runs SET created_at = now() - interval '1 hour' WHERE ref = 'refs/tags/v1.0.0'`)
	b.exec(`UPDATE execution_attempts a SET updated_at = now() - interval '1 hour' FROM release_runs r
		WHERE r.id = a.release_run_id AND r.ref = 'refs/tags/v1.0.0'`)
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	go func() { _ = b.worker.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for b.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.workflow_run.read'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no read enqueued for the quiet run")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := b.count(`SELECT count(*) FROM control_plane_outbox o JOIN release_runs r ON r.id = o.release_run_id
		WHERE o.effect_type = 'github.workflow_run.read' AND r.ref = 'refs/tags/v1.0.0'`); n != 1 {
		t.Fatalf("%d reads of the quiet run, want 1", n)
	}
	if n := b.count(`SELECT count(*) FROM control_plane_outbox o JOIN release_runs r ON r.id = o.release_run_id
		WHERE o.effect_type = 'github.workflow_run.read' AND r.ref = 'refs/tags/v1.0.1'`); n != 0 {
		t.Fatalf("%d reads of a run that changed recently, want 0", n)
	}
}
