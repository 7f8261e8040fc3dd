package worker_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// startRuns pushes the tags and plays the dispatcher's part for each run: check run 4001, and
// workflow run 9000+i for the i-th tag. It returns the runs by tag.
func (b *bundle) startRuns(tags ...string) map[string]string {
	b.t.Helper()
	for _, tag := range tags {
		b.deliver(pushTag(tag, sha))
	}
	b.drain()
	runs := map[string]string{}
	rows, err := b.pool.Query(b.ctx, `SELECT substr(ref, 11), id::text FROM release_runs`)
	if err != nil {
		b.t.Fatal(err)
	}
	for rows.Next() {
		var tag, id string
		if err := rows.Scan(&tag, &id); err != nil {
			b.t.Fatal(err)
		}
		runs[tag] = id
	}
	b.playDispatcher(4001, func(runID string) int64 {
		for tag, id := range runs {
			if id == runID {
				return workflowRunOf(tags, tag)
			}
		}
		return 0
	})
	return runs
}

var timestamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00`)

func workflowRunOf(tags []string, tag string) int64 {
	for i, t := range tags {
		if t == tag {
			return int64(9000 + i)
		}
	}
	return 0
}

// The completed workflow runs of one batch finish their attempts in one set-based call
// (migration 00052) with exactly the writes of the single-row function, the check run's final
// update included, under each job's own span; the jobs it leaves out are handled alone with
// their own outcomes: a run delivered twice is finished by the first job and the redelivery is
// ignored, an in-progress event is recorded only. (A job that waits — a workflow run not recorded yet — redoes its batch job by
// job, as any deferral does: TestOutOfOrderWorkflowRun.)
func TestWorkflowRunsFinishTogether(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tags := []string{"v0.9.0", "v1.0.0", "v1.1.0", "v1.2.0", "v1.3.0", "v1.4.0"}
	runs := b.startRuns(tags...)

	// written is what a run's finish wrote, with its ids named; the traceparents (a span each)
	// are compared apart.
	written := func(tag string) string {
		t.Helper()
		var s string
		if err := b.pool.QueryRow(b.ctx, `
			SELECT jsonb_build_object(
				'run', (SELECT to_jsonb(r) - 'id' - 'created_at' - 'updated_at' - 'completed_at' - 'ref' FROM release_runs r WHERE r.id = $1),
				'attempt', (SELECT to_jsonb(a) - 'id' - 'created_at' - 'updated_at' - 'dispatched_at' - 'completed_at' - 'workflow_run_id'
				            FROM execution_attempts a WHERE a.release_run_id = $1),
				'page', (SELECT to_jsonb(w) - 'execution_attempt_id' - 'started_at' - 'updated_at' FROM execution_attempt_workflow_runs w
				         JOIN execution_attempts a ON a.id = w.execution_attempt_id WHERE a.release_run_id = $1),
				'update', (SELECT to_jsonb(o) - 'id' - 'traceparent' - 'created_at' - 'updated_at' - 'available_at' - 'execution_attempt_id'
				                  - 'idempotency_key' - 'release_run_id' - 'superseded_by'
				           FROM control_plane_outbox o WHERE o.release_run_id = $1 AND o.effect_type = 'github.check_run.complete'
				           ORDER BY o.id DESC LIMIT 1))::text`, runs[tag]).Scan(&s); err != nil {
			t.Fatal(err)
		}
		var attempt string
		if err := b.pool.QueryRow(b.ctx, `SELECT id::text FROM execution_attempts WHERE release_run_id = $1`, runs[tag]).Scan(&attempt); err != nil {
			t.Fatal(err)
		}
		s = strings.NewReplacer(runs[tag], "RUN", attempt, "ATTEMPT", fmt.Sprint(workflowRunOf(tags, tag)), "WORKFLOWRUN",
			strings.TrimPrefix(tag, "v"), "TAG").Replace(s)
		return timestamp.ReplaceAllString(s, "TIME") // the database clock: each run's own
	}

	// The reference: one workflow run finished alone (a batch of one job).
	b.deliver(workflowRun("completed", workflowRunOf(tags, "v0.9.0"), "success"))
	b.drain()
	reference := written("v0.9.0")
	if !strings.Contains(reference, `"state": "succeeded"`) || !strings.Contains(reference, `"status": "succeeded"`) {
		t.Fatalf("the single-row function did not finish the run: %s", reference)
	}

	// From here the worker's statements are logged.
	log := b.logQueries()

	// One batch: four runs finish together, a redelivery of the first, an in-progress event of
	// the fifth run.
	var together []int64
	for _, tag := range []string{"v1.0.0", "v1.1.0", "v1.2.0", "v1.3.0"} {
		together = append(together, b.deliver(workflowRun("completed", workflowRunOf(tags, tag), "success")))
	}
	again := b.deliver(workflowRun("completed", workflowRunOf(tags, "v1.0.0"), "success"))
	progress := b.deliver(workflowRun("in_progress", workflowRunOf(tags, "v1.4.0"), ""))
	if n := b.drain(); n != 6 {
		t.Fatalf("drained %d jobs, want 6 in one batch", n)
	}

	// One set-based call; alone: both jobs of the redelivered run (in their order) and the
	// in-progress event.
	if batch, alone := log.calls("boardreadyops_execution_attempt_finish_batch("), log.calls("boardreadyops_execution_attempt_finish("); batch != 1 || alone != 3 {
		t.Errorf("%d set-based and %d single finishes, want 1 and 3", batch, alone)
	}
	for _, tag := range []string{"v1.0.0", "v1.1.0", "v1.2.0", "v1.3.0"} {
		if got := written(tag); got != reference {
			t.Errorf("%s, finished together:\n%s\nfinished alone:\n%s", tag, got, reference)
		}
	}
	for _, id := range append(together, again, progress) {
		if s := b.jobStatus(id); s != "completed" {
			t.Errorf("job %d: %s, want completed", id, s)
		}
	}
	if n := b.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.check_run.complete' AND status = 'available'
		AND payload->>'state' = 'succeeded'`); n != 5 {
		t.Errorf("%d final check-run updates waiting, want 5 (one per finished run, none for the redelivery)", n)
	}
	if r, a, _ := b.runStatus(runs["v1.4.0"]); r != "running" || a != "running" {
		t.Errorf("run of the in-progress event: %s / %s, want running", r, a)
	}
	// Each update carries its own job's span (the delivery's trace, not the delivery's span).
	b.ownJobSpans(`SELECT traceparent FROM control_plane_outbox WHERE effect_type = 'github.check_run.complete'
		AND payload->>'state' = 'succeeded'`)
}

// ownJobSpans checks the traceparents query returns: each under the delivery's trace, with a
// span of its own job's (not the delivery's, nor another job's). It returns how many it read.
func (b *bundle) ownJobSpans(query string) int {
	b.t.Helper()
	rows, err := b.pool.Query(b.ctx, query)
	if err != nil {
		b.t.Fatal(err)
	}
	seen := map[string]bool{}
	for rows.Next() {
		var tp string
		if err := rows.Scan(&tp); err != nil {
			b.t.Fatal(err)
		}
		if !strings.HasPrefix(tp, "00-4bf92f3577b34da6a3ce929d0e0e4736-") || strings.Contains(tp, "-00f067aa0ba902b7-") || seen[tp] {
			b.t.Errorf("traceparent %s: want the delivery's trace under a span of its own job", tp)
		}
		seen[tp] = true
	}
	if err := rows.Err(); err != nil {
		b.t.Fatal(err)
	}
	return len(seen)
}

// logQueries rebuilds the pool and the worker so that every query they send is logged.
func (b *bundle) logQueries() *queryLog {
	b.t.Helper()
	log := &queryLog{}
	cfg := b.pool.Config().Copy()
	cfg.ConnConfig.Tracer = log
	traced, err := pgxpool.NewWithConfig(b.ctx, cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(traced.Close)
	b.pool = traced
	b.withWorker(nil)
	return log
}

// queryLog records the SQL of every query a pool sends.
type queryLog struct {
	mu  sync.Mutex
	sql []string
}

func (l *queryLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sql = append(l.sql, d.SQL)
	return ctx
}

func (l *queryLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// calls counts the queries that call function (its name and opening parenthesis).
func (l *queryLog) calls(function string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, sql := range l.sql {
		n += strings.Count(sql, function)
	}
	return n
}
