// Command river is the reference queue for hack/bench/dispatcher.sh: River
// (github.com/riverqueue/river), the PostgreSQL job queue a Go team would most likely pick, used
// as a library. It pre-inserts no-op jobs into a fresh database on the given server, starts a
// client, times from Start to the last completion committed in the database, and checks that
// every job is completed exactly once.
//
//	go run ./hack/bench/river --database-url postgres://… --jobs 30000 [--best]
//
// Without --best River runs at its defaults (100 workers, FetchCooldown 100 ms); --best uses
// the settings that gave River its highest rate on these machines (1,000 workers, FetchCooldown
// 1 ms). docs/performance.md compares the product's queue machinery with River at its best.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/boardreadyops/cloud/pkg/testkit/proccpu"
)

// noopArgs is the job: River's fetch, work and completion machinery with no work in it.
type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	worked *atomic.Int64
}

func (w *noopWorker) Work(context.Context, *river.Job[noopArgs]) error {
	w.worked.Add(1)
	return nil
}

type options struct {
	serverURL string
	jobs      int
	best      bool
	poolConns int32
	timeout   time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.serverURL, "database-url", "", "PostgreSQL server URL; a fresh database is created on it and dropped afterwards")
	flag.IntVar(&o.jobs, "jobs", 30000, "no-op jobs to pre-insert and work")
	flag.BoolVar(&o.best, "best", false, "River at its best settings here (MaxWorkers 1000, FetchCooldown 1 ms) instead of its defaults")
	poolConns := flag.Int("pool", 16, "connections in the client's pool")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	flag.Parse()
	o.poolConns = int32(min(*poolConns, 1000)) //nolint:gosec // bounded above
	if o.serverURL == "" || o.jobs <= 0 {
		fmt.Fprintln(os.Stderr, "river: --database-url and a positive --jobs are required")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "river:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	dbURL, drop, err := freshDatabase(ctx, o.serverURL)
	if err != nil {
		return err
	}
	defer drop()

	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return err
	}
	cfg.MaxConns = o.poolConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}

	var worked atomic.Int64
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{worked: &worked})
	maxWorkers, cooldown := 100, river.FetchCooldownDefault
	if o.best {
		maxWorkers, cooldown = 1000, river.FetchCooldownMin
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers:       workers,
		FetchCooldown: cooldown,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	if err := insert(ctx, client, o.jobs); err != nil {
		return err
	}

	var backend int
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return err
	}
	postmaster := proccpu.Postmaster(backend)
	self0, _ := proccpu.Process("self", false)
	server0, _ := proccpu.Server(postmaster)
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return err
	}
	// Completions are committed by River's completer after Work returns, so the clock stops
	// when the database holds every job as completed, not when the last Work call returns.
	for worked.Load() < int64(o.jobs) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%d of %d jobs worked: %w", worked.Load(), o.jobs, err)
		}
		time.Sleep(time.Millisecond)
	}
	var completed, other int
	for {
		if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'completed'), count(*) FILTER (WHERE state <> 'completed') FROM river_job`).Scan(&completed, &other); err != nil {
			return err
		}
		if completed+other == o.jobs && other == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%d of %d jobs completed in the database: %w", completed, o.jobs, err)
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	self1, _ := proccpu.Process("self", false)
	server1, _ := proccpu.Server(postmaster)
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer stopCancel()
	if err := client.Stop(stopCtx); err != nil {
		return err
	}
	if n := worked.Load(); n != int64(o.jobs) {
		return fmt.Errorf("%d jobs worked for %d inserted: a job ran twice", n, o.jobs)
	}
	settings := "defaults"
	if o.best {
		settings = "best"
	}
	// CPU per job as BenchmarkQueueMachinery reports it per effect (the last poll of the
	// database included).
	fmt.Printf("River(%s): %d jobs in %.3fs: %.0f jobs/s (MaxWorkers %d, FetchCooldown %s, pool %d); CPU per job: River %.1f µs, PostgreSQL %.1f µs\n",
		settings, o.jobs, elapsed.Seconds(), float64(o.jobs)/elapsed.Seconds(), maxWorkers, cooldown, o.poolConns,
		1e6*(self1-self0)/float64(o.jobs), 1e6*(server1-server0)/float64(o.jobs))
	return nil
}

// insert pre-inserts the jobs with River's COPY-based bulk insert, in batches.
func insert(ctx context.Context, client *river.Client[pgx.Tx], n int) error {
	const batch = 10000
	params := make([]river.InsertManyParams, 0, batch)
	for done := 0; done < n; done += len(params) {
		params = params[:0]
		for i := 0; i < batch && done+i < n; i++ {
			params = append(params, river.InsertManyParams{Args: noopArgs{}})
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
	}
	return nil
}

// freshDatabase creates an empty database on the server and returns its URL and a function
// that drops it again.
func freshDatabase(ctx context.Context, serverURL string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", nil, err
	}
	name := fmt.Sprintf("river_bench_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		_ = conn.Close(ctx)
		return "", nil, err
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		_ = conn.Close(ctx)
		return "", nil, err
	}
	u.Path = "/" + name
	drop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, dropErr := conn.Exec(dctx, "DROP DATABASE "+name+" WITH (FORCE)")
		if dropErr != nil && !errors.Is(dropErr, context.Canceled) {
			fmt.Fprintln(os.Stderr, "river: drop database:", dropErr)
		}
		_ = conn.Close(dctx)
	}
	return u.String(), drop, nil
}
