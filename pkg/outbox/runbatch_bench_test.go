package outbox_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
	"github.com/boardreadyops/cloud/pkg/testkit/proccpu"
)

// BenchmarkRunTransitions: a lifecycle batch's tag pushes, a group commit's check-run creations
// and workflow-dispatch completions, and a lifecycle batch's finished workflow runs, 32 runs at a
// time on one connection, each run's single-row function pipelined in one transaction ("alone",
// as before migrations 00050–00052 and 00056) against the set-based call ("set").
// Reports the PostgreSQL backend's CPU per run (pg-µs/run, from /proc: Linux, a local server)
// besides the wall time; compare medians of -count N.
//
//	go test ./pkg/outbox -run '^$' -bench BenchmarkRunTransitions -count 5
func BenchmarkRunTransitions(b *testing.B) {
	const k = 32
	for _, transition := range []string{"push", "create", "dispatch", "finish"} {
		for _, mode := range []string{"alone", "set"} {
			b.Run(transition+"/"+mode, func(b *testing.B) {
				ctx := context.Background()
				pool := pgtest.NewPool(b)
				conn, err := pool.Acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer conn.Release()
				var pid int
				if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
					b.Fatal(err)
				}
				backend := strconv.Itoa(pid)
				mustExec(b, conn, `INSERT INTO installations (id, account_login, account_type) VALUES (1, 'org-1', 'Organization');
					INSERT INTO repositories (id, installation_id, full_name) VALUES (1, 1, 'org-1/repo-1')`)
				var cpu float64
				runs, next := 0, 0
				b.ResetTimer()
				for runs < b.N {
					b.StopTimer()
					ids := leaseRuns(b, conn, next, k, transition)
					next += k
					before, _ := proccpu.Process(backend, false)
					b.StartTimer()
					completeRuns(b, conn, transition, mode, ids)
					b.StopTimer()
					after, _ := proccpu.Process(backend, false)
					cpu += after - before
					runs += k
					b.StartTimer()
				}
				b.StopTimer()
				// Every run advanced, whichever way: the two modes did the same work.
				var advanced int
				if err := conn.QueryRow(ctx, `SELECT count(*) FROM release_runs WHERE status = $1`,
					map[string]string{"push": "check_pending", "create": "dispatching", "dispatch": "running", "finish": "succeeded"}[transition]).Scan(&advanced); err != nil || advanced != runs {
					b.Fatalf("%d of %d runs advanced (%v)", advanced, runs, err)
				}
				b.ReportMetric(cpu*1e6/float64(runs), "pg-µs/run")
			})
		}
	}
}

func mustExec(b *testing.B, conn *pgxpool.Conn, sql string, args ...any) {
	b.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		b.Fatal(err)
	}
}

// leaseRuns leases to worker w, for "push", a job per run of its tag push delivery; else it
// creates k release runs as lifecycle does (check_pending, attempt 1, the check-run creation)
// and leases their creations to w; for "dispatch" it completes the creations
// and leases the dispatches they enqueued, their delivery started; for "finish" it completes
// those too and leases to w a job per run of its completed workflow_run delivery.
func leaseRuns(b *testing.B, conn *pgxpool.Conn, from, k int, transition string) []int64 {
	b.Helper()
	ctx := context.Background()
	if transition == "push" {
		rows, _ := conn.Query(ctx, `
			WITH i AS (
				INSERT INTO webhook_inbox (delivery_id, event, installation_id, repository_id, payload, payload_sha256)
				SELECT 'p-' || g, 'push', 1, 1,
				       jsonb_build_object('event', 'push', 'installation_id', 1, 'repository', jsonb_build_object('id', 1),
				           'push', jsonb_build_object('ref', 'refs/tags/v' || g, 'after', repeat('a', 40), 'created', true)),
				       sha256(convert_to('p-' || g, 'UTF8'))
				FROM generate_series($1::int, $1 + $2 - 1) g
				RETURNING id
			)
			INSERT INTO control_plane_jobs (kind, inbox_id, status, attempts, lease_owner, lease_expires_at)
			SELECT 'push', i.id, 'leased', 1, 'w', now() + interval '1 minute' FROM i
			RETURNING id`, from, k)
		jobIDs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(jobIDs) != k {
			b.Fatalf("leased %d push jobs (%v), want %d", len(jobIDs), err, k)
		}
		return jobIDs
	}
	mustExec(b, conn, `
		WITH r AS (
			INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status)
			SELECT 1, 1, 'refs/tags/v' || g, repeat('a', 40), 'boardreadyops-release.yml', 'check_pending'
			FROM generate_series($1::int, $1 + $2 - 1) g RETURNING id
		), a AS (
			INSERT INTO execution_attempts (release_run_id, number) SELECT id, 1 FROM r
		)
		INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, release_run_id, installation_id)
		SELECT 'github.check_run.create', 'github.check_run.create:' || id, '{}', id, 1 FROM r`, from, k)
	lease := func(effectType string) []int64 {
		rows, _ := conn.Query(ctx, `UPDATE control_plane_outbox SET status = 'leased', lease_owner = 'w', lease_expires_at = now() + interval '1 minute',
				delivery_started_at = now(), attempts = attempts + 1
			WHERE status = 'available' AND effect_type = $1 RETURNING id`, effectType)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(ids) != k {
			b.Fatalf("leased %d effects of %s (%v), want %d", len(ids), effectType, err, k)
		}
		return ids
	}
	ids := lease("github.check_run.create")
	if transition == "create" {
		return ids
	}
	completeRuns(b, conn, "create", "set", ids)
	ids = lease("github.workflow.dispatch")
	if transition == "dispatch" {
		return ids
	}
	completeRuns(b, conn, "dispatch", "set", ids)
	rows, _ := conn.Query(ctx, `
		WITH i AS (
			INSERT INTO webhook_inbox (delivery_id, event, action, installation_id, repository_id, payload, payload_sha256)
			SELECT 'd-' || w, 'workflow_run', 'completed', 1, 1,
			       jsonb_build_object('event', 'workflow_run', 'action', 'completed', 'installation_id', 1, 'repository', jsonb_build_object('id', 1),
			           'workflow_run', jsonb_build_object('id', w, 'run_attempt', 1, 'status', 'completed', 'conclusion', 'success',
			               'event', 'workflow_dispatch', 'html_url', 'https://github.com/org-1/repo-1/actions/runs/' || w)),
			       sha256(convert_to('d-' || w, 'UTF8'))
			FROM unnest($1::bigint[]) AS w
			RETURNING id
		)
		INSERT INTO control_plane_jobs (kind, inbox_id, status, attempts, lease_owner, lease_expires_at)
		SELECT 'workflow_run', i.id, 'leased', 1, 'w', now() + interval '1 minute' FROM i
		RETURNING id`, workflowRuns(ids))
	jobIDs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(jobIDs) != k {
		b.Fatalf("leased %d workflow_run jobs (%v), want %d", len(jobIDs), err, k)
	}
	return jobIDs
}

// workflowRuns are the workflow run ids completeRuns gives the dispatches.
func workflowRuns(ids []int64) []int64 {
	w := make([]int64, len(ids))
	for i, id := range ids {
		w[i] = 5000 + id
	}
	return w
}

// completeRuns completes the leased effects of one transition in one transaction: each with its
// single-row function, pipelined (alone), or with one set-based call (set).
func completeRuns(b *testing.B, conn *pgxpool.Conn, transition, mode string, ids []int64) {
	b.Helper()
	batch := &pgx.Batch{}
	switch transition + "/" + mode {
	case "push/alone":
		for _, id := range ids {
			batch.Queue(`SELECT boardreadyops_release_run_create_from_push($1, 'w', 'boardreadyops-release.yml', 'BoardReadyOps release')`, id)
		}
	case "push/set":
		batch.Queue(`SELECT count(*) FROM boardreadyops_release_run_create_from_push_batch($1, 'w', 'boardreadyops-release.yml', 'BoardReadyOps release', $2)`,
			ids, make([]*string, len(ids)))
	case "create/alone":
		for _, id := range ids {
			batch.Queue(`SELECT boardreadyops_outbox_complete_check_run_create($1, 'w', $2)`, id, 1000+id)
		}
	case "create/set":
		checkRuns := make([]int64, len(ids))
		for i, id := range ids {
			checkRuns[i] = 1000 + id
		}
		batch.Queue(`SELECT count(*) FROM boardreadyops_outbox_complete_check_run_create_batch($1, $2, 'w')`, ids, checkRuns)
	case "dispatch/alone":
		for _, id := range ids {
			batch.Queue(`SELECT boardreadyops_outbox_complete_workflow_dispatch_with_run($1, 'w', $2, $3)`, id, 5000+id,
				fmt.Sprintf("https://github.com/org-1/repo-1/actions/runs/%d", 5000+id))
		}
	case "dispatch/set":
		pages := make([]string, len(ids))
		for i, id := range ids {
			pages[i] = fmt.Sprintf("https://github.com/org-1/repo-1/actions/runs/%d", 5000+id)
		}
		batch.Queue(`SELECT count(*) FROM boardreadyops_outbox_complete_workflow_dispatch_batch($1, $2, $3, 'w')`, ids, workflowRuns(ids), pages)
	case "finish/alone":
		for _, id := range ids {
			batch.Queue(`SELECT count(*) FROM boardreadyops_execution_attempt_finish($1, 'w', 'BoardReadyOps release')`, id)
		}
	case "finish/set":
		batch.Queue(`SELECT count(*) FROM boardreadyops_execution_attempt_finish_batch($1, 'w', 'BoardReadyOps release', $2)`,
			ids, make([]*string, len(ids)))
	}
	if err := conn.SendBatch(context.Background(), batch).Close(); err != nil {
		b.Fatalf("%s/%s: %v", transition, mode, err)
	}
}
