// Command loadgen drives load through BoardReadyOps and measures it. Subcommands:
//
//	loadgen ingest      signed deliveries at a fixed concurrency against a running ingest
//	loadgen lifecycle   preloaded push-tag jobs drained by a running lifecycle service
//	loadgen pgbench     the reference alone: pgbench -N -c 8 -j 2 on a database
//	loadgen e2e         release-tag pushes through the running services and the simulator, end to end
//	loadgen soak        a long end-to-end run sampled per tenth: throughput, claim latency, table sizes, vacuum, PostgreSQL CPU
//	loadgen hostile     hostile clients (announced lengths, tricklers, idle keep-alives) beside genuine deliveries
//
// Every measurement can be paired with `pgbench -N` on the same PostgreSQL server in the same run,
// the reference docs/performance.md reports ratios against. Load is only ever sent to the URL given
// (loopback in every documented use), and every run is bounded in time.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/testkit/proccpu"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: loadgen ingest|lifecycle|pgbench|e2e|soak|hostile [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "ingest":
		err = runIngest(os.Args[2:])
	case "lifecycle":
		err = runLifecycle(os.Args[2:])
	case "pgbench":
		err = runPgbench(os.Args[2:])
	case "e2e":
		err = runE2E(os.Args[2:])
	case "soak":
		err = runSoak(os.Args[2:])
	case "hostile":
		err = runHostile(os.Args[2:])
	default:
		fmt.Fprintf(os.Stderr, "loadgen: unknown subcommand %q\n", os.Args[1])
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

// drainClose reads a response body to the end (bounded) and closes it, so the connection is
// reused: a body closed unread makes the transport drop it.
func drainClose(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 1<<22))
	body.Close()
}

// signingSecret reads a webhook secrets file; its first line signs.
func signingSecret(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read secret file: %w", err)
	}
	return []byte(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0])), nil
}

// connPostmaster finds the PostgreSQL server's postmaster: the parent of conn's backend.
func connPostmaster(ctx context.Context, conn *pgx.Conn) (int, error) {
	var backend int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return -1, fmt.Errorf("backend pid: %w", err)
	}
	return proccpu.Postmaster(backend), nil
}
