package worker_test

import (
	"strings"
	"testing"
)

// The tag pushes of one batch create their runs in one set-based call (migration 00056) with
// exactly the writes of the single-row function, under each job's own span; a push of a tag
// already released at that commit and a branch push create nothing, and a push after a job that
// is neither a push nor a completed workflow run waits for its turn: it sees the installation
// suspended by the job before it.
func TestTagPushesCreateRunsTogether(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// written is what a run's creation wrote, with its ids named; the traceparents (a span each)
	// are compared apart.
	written := func(tag string) string {
		t.Helper()
		var s string
		if err := b.pool.QueryRow(b.ctx, `
			WITH r AS (SELECT * FROM release_runs WHERE ref = 'refs/tags/' || $1)
			SELECT jsonb_build_object(
				'run', (SELECT to_jsonb(r) - 'id' - 'created_at' - 'updated_at' - 'ref' FROM r),
				'attempts', (SELECT jsonb_agg(to_jsonb(a) - 'id' - 'release_run_id' - 'created_at' - 'updated_at')
				             FROM execution_attempts a JOIN r ON a.release_run_id = r.id),
				'effects', (SELECT jsonb_agg(to_jsonb(o) - 'id' - 'traceparent' - 'created_at' - 'updated_at' - 'available_at'
				                             - 'release_run_id' ORDER BY o.id)
				            FROM control_plane_outbox o JOIN r ON o.release_run_id = r.id),
				'run id', (SELECT id FROM r))::text`, tag).Scan(&s); err != nil {
			t.Fatal(err)
		}
		var run string
		if err := b.pool.QueryRow(b.ctx, `SELECT coalesce((SELECT id::text FROM release_runs WHERE ref = 'refs/tags/' || $1), '')`, tag).Scan(&run); err != nil {
			t.Fatal(err)
		}
		if run == "" {
			return ""
		}
		return strings.NewReplacer(run, "RUN", strings.TrimPrefix(tag, "v"), "TAG").Replace(s)
	}

	// The reference: one push created alone (a batch of one job).
	b.deliver(pushTag("v0.9.0", sha))
	b.drain()
	reference := written("v0.9.0")
	if !strings.Contains(reference, `"status": "check_pending"`) || !strings.Contains(reference, `"github.check_run.create"`) {
		t.Fatalf("the single-row function created no run: %s", reference)
	}

	// From here the worker's statements are logged.
	log := b.logQueries()

	// One batch: three tag pushes, the first again, a branch push, then (after the suspension)
	// two more tag pushes.
	tags := []string{"v1.0.0", "v1.1.0", "v1.2.0"}
	var together []int64
	for _, tag := range tags {
		together = append(together, b.deliver(pushTag(tag, sha)))
	}
	again := b.deliver(pushTag("v1.0.0", sha))
	branch := pushTag("main", sha)
	branch.Push.Ref = "refs/heads/main"
	onBranch := b.deliver(branch)
	suspend := b.deliver(installationEvent("suspend"))
	late := []int64{b.deliver(pushTag("v2.0.0", sha)), b.deliver(pushTag("v2.1.0", sha))}
	if n := b.drain(); n != 8 {
		t.Fatalf("drained %d jobs, want 8 in one batch", n)
	}

	// One set-based call for the five pushes before the suspension; none alone.
	if batch, alone := log.calls("boardreadyops_release_run_create_from_push_batch("), log.calls("boardreadyops_release_run_create_from_push("); batch != 1 || alone != 0 {
		t.Errorf("%d set-based and %d single creations, want 1 and 0", batch, alone)
	}
	// The reference run's check-run creation was dead-lettered by the suspension as theirs were.
	reference = written("v0.9.0")
	for _, tag := range tags {
		if got := written(tag); got != reference {
			t.Errorf("%s, created together:\n%s\ncreated alone:\n%s", tag, got, reference)
		}
	}
	for _, tag := range []string{"v2.0.0", "v2.1.0"} {
		if got := written(tag); got != "" {
			t.Errorf("%s, pushed after the suspension: a run was created: %s", tag, got)
		}
	}
	if n := b.count(`SELECT count(*) FROM release_runs`); n != 4 {
		t.Errorf("%d release runs, want 4 (one per tag, none for the repeated push, the branch or the suspended installation)", n)
	}
	for _, id := range append(append(together, again, onBranch, suspend), late...) {
		if s := b.jobStatus(id); s != "completed" {
			t.Errorf("job %d: %s, want completed", id, s)
		}
	}
	// Each creation carries its own job's span (the delivery's trace, not the delivery's span).
	seen := b.ownJobSpans(`SELECT traceparent FROM control_plane_outbox
		WHERE effect_type = 'github.check_run.create' AND payload->>'tag' LIKE 'v1.%'`)
	if seen != len(tags) {
		t.Errorf("%d check-run creations of the batch, want %d", seen, len(tags))
	}
}

// A push that fails its checks fails CreateRuns: every push of the batch is then handled alone,
// the others' runs created, its own job retried (lifecycle does not panic on it either).
func TestTagPushesAloneWhenOneFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	log := b.logQueries()

	first := b.deliver(pushTag("v1.0.0", sha))
	malformed := pushTag("v1.1.0", sha)
	malformed.Push = nil // a stored push without its push: the handler refuses it
	bad := b.deliver(malformed)
	last := b.deliver(pushTag("v1.2.0", sha))
	if n := b.drain(); n != 3 {
		t.Fatalf("drained %d jobs, want 3 in one batch", n)
	}
	// CreateRuns failed on the malformed push's checks, before its statement; alone, the failure
	// redid the batch with a savepoint per job: three single creations, the fast path's first
	// one rolled back.
	if batch, alone := log.calls("boardreadyops_release_run_create_from_push_batch("), log.calls("boardreadyops_release_run_create_from_push("); batch != 0 || alone != 3 {
		t.Errorf("%d set-based and %d single creations, want 0 and 3", batch, alone)
	}
	if n := b.count(`SELECT count(*) FROM release_runs WHERE ref IN ('refs/tags/v1.0.0', 'refs/tags/v1.2.0')`); n != 2 {
		t.Errorf("%d runs of the two good pushes, want 2", n)
	}
	for id, want := range map[int64]string{first: "completed", last: "completed", bad: "available"} {
		if s := b.jobStatus(id); s != want {
			t.Errorf("job %d: %s, want %s", id, s, want)
		}
	}
}
