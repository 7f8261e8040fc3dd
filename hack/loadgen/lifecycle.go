package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
)

// lifecycleResult is one drain of preloaded push-tag jobs by a running lifecycle service.
type lifecycleResult struct {
	Jobs        int     `json:"jobs"`
	Seconds     float64 `json:"seconds"`
	JobsPerSec  float64 `json:"jobs_per_second"`
	ReleaseRuns int     `json:"release_runs"`
	Effects     int     `json:"effects"`
	PgbenchTPS  float64 `json:"pgbench_tps,omitempty"`
	Ratio       float64 `json:"ratio_to_pgbench,omitempty"`
}

// runLifecycle preloads jobs (each a release-tag push: one release run, one attempt and one
// github.check_run.create effect once applied) in one transaction, wakes the lifecycle service
// that runs against the same database, and times the drain.
func runLifecycle(args []string) error {
	fs := flag.NewFlagSet("lifecycle", flag.ContinueOnError)
	dbURL := fs.String("database-url", "", "database the lifecycle service works on")
	n := fs.Int("jobs", 60000, "push-tag jobs per run")
	repos := fs.Int("repositories", 100, "repositories the tags are spread over")
	runs := fs.Int("runs", 1, "runs (each preceded by emptying the tables)")
	pgbenchURL := fs.String("pgbench-database-url", "", "when set, measure pgbench -N -c 8 -j 2 after each run")
	pgbenchTime := fs.Duration("pgbench-duration", 30*time.Second, "pgbench run length")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up on a run after this long")
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 || *n > 1_000_000 || *repos < 1 || *runs < 1 || *runs > 9 {
		return fmt.Errorf("jobs 1..1e6, repositories >= 1, runs 1..9")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, *dbURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	var all []lifecycleResult
	for i := 0; i < *runs; i++ {
		res, err := drainOnce(ctx, conn, *n, *repos, *timeout)
		if err != nil {
			return err
		}
		if *pgbenchURL != "" {
			if res.PgbenchTPS, err = pgbench(*pgbenchURL, *pgbenchTime); err != nil {
				return err
			}
			res.Ratio = res.JobsPerSec / res.PgbenchTPS
		}
		all = append(all, res)
		if !*jsonOut {
			fmt.Printf("run %d: %d jobs in %.1fs = %.0f jobs/s (%d release runs, %d effects)", i+1, res.Jobs, res.Seconds, res.JobsPerSec, res.ReleaseRuns, res.Effects)
			if res.PgbenchTPS > 0 {
				fmt.Printf("; pgbench -N %.0f tps, ratio %.2f", res.PgbenchTPS, res.Ratio)
			}
			fmt.Println()
		}
	}
	med := func(f func(lifecycleResult) float64) float64 {
		v := make([]float64, len(all))
		for i, r := range all {
			v[i] = f(r)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	m := lifecycleResult{Jobs: *n, Seconds: med(func(r lifecycleResult) float64 { return r.Seconds }),
		JobsPerSec: med(func(r lifecycleResult) float64 { return r.JobsPerSec }),
		PgbenchTPS: med(func(r lifecycleResult) float64 { return r.PgbenchTPS }), Ratio: med(func(r lifecycleResult) float64 { return r.Ratio })}
	if *jsonOut {
		return json.NewEncoder(os.Stdout).Encode(map[string]any{"runs": all, "median": m})
	}
	fmt.Printf("median of %d: %.0f jobs/s", len(all), m.JobsPerSec)
	if m.PgbenchTPS > 0 {
		fmt.Printf("; pgbench -N %.0f tps, ratio %.2f", m.PgbenchTPS, m.Ratio)
	}
	fmt.Println()
	return nil
}

func drainOnce(ctx context.Context, conn *pgx.Conn, n, repos int, timeout time.Duration) (lifecycleResult, error) {
	_, err := conn.Exec(ctx, `TRUNCATE control_plane_outbox, execution_attempts, release_runs, control_plane_jobs, webhook_inbox,
		repository_release_settings, repositories, installations CASCADE`)
	if err != nil {
		return lifecycleResult{}, fmt.Errorf("empty tables: %w", err)
	}
	// One installation, repos repositories; job i pushes tag v1.<i>.0 to repository i % repos.
	_, err = conn.Exec(ctx, `
		WITH docs AS (
			SELECT g, jsonb_build_object(
				'event', 'push', 'installation_id', 55501,
				'repository', jsonb_build_object('id', 1000000 + g % $2, 'full_name', 'octo-org/repo-' || (g % $2),
					'name', 'repo-' || (g % $2), 'default_branch', 'main', 'owner_login', 'octo-org', 'owner_type', 'Organization'),
				'push', jsonb_build_object('ref', 'refs/tags/v1.' || g || '.0', 'before', repeat('0', 40),
					'after', '6dcb09b5b57875f334f61aebed695e2e4193db5e', 'created', true, 'deleted', false)) AS doc
			FROM generate_series(1, $1) g
		), inbox AS (
			INSERT INTO webhook_inbox (delivery_id, event, installation_id, repository_id, payload, payload_sha256, traceparent)
			SELECT 'bench-' || g, 'push', 55501, 1000000 + g % $2, doc, sha256(doc::text::bytea),
				'00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
			FROM docs RETURNING id, traceparent
		)
		INSERT INTO control_plane_jobs (kind, inbox_id, traceparent) SELECT 'push', id, traceparent FROM inbox`, n, repos)
	if err != nil {
		return lifecycleResult{}, fmt.Errorf("preload jobs: %w", err)
	}
	start := time.Now()
	if _, err := conn.Exec(ctx, `SELECT pg_notify('boardreadyops_jobs', '')`); err != nil {
		return lifecycleResult{}, err
	}
	deadline := start.Add(timeout)
	for {
		var left int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM control_plane_jobs WHERE status <> 'completed'`).Scan(&left); err != nil {
			return lifecycleResult{}, err
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			return lifecycleResult{}, fmt.Errorf("%d jobs still not completed after %v: is lifecycle running on this database?", left, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	elapsed := time.Since(start).Seconds()
	res := lifecycleResult{Jobs: n, Seconds: elapsed, JobsPerSec: float64(n) / elapsed}
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM release_runs), (SELECT count(*) FROM control_plane_outbox)`).
		Scan(&res.ReleaseRuns, &res.Effects); err != nil {
		return lifecycleResult{}, err
	}
	if res.ReleaseRuns != n || res.Effects != n {
		return res, fmt.Errorf("drained, but %d release runs and %d effects for %d jobs", res.ReleaseRuns, res.Effects, n)
	}
	return res, nil
}
