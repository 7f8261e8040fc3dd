package chaos_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// report is one scenario's outcome, as docs/reliability.md tabulates it.
type report struct {
	Scenario        string
	Deliveries      int // webhooks answered 2xx
	Retries         int // sender retries of the same delivery id
	Effects         int
	Crashes         int
	Reconciliations int // dispatches resolved with brops reconcile
	DeadLetters     int // dead letters replayed with brops outbox replay
	Duplicates      int // must be 0
	Lost            int // must be 0
}

func (r report) String() string {
	return fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %d | %d | %d |", r.Scenario, r.Deliveries, r.Retries, r.Effects, r.Crashes,
		r.Reconciliations, r.DeadLetters, r.Duplicates, r.Lost)
}

func (e *env) count(q string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// settleQuery counts the work still moving: jobs and effects waiting or in flight, and release
// runs that are not terminal yet hold no live, dead-lettered or to-be-reconciled effect.
const settleQuery = `SELECT (SELECT count(*) FROM control_plane_jobs WHERE status IN ('available', 'leased'))
	+ (SELECT count(*) FROM control_plane_outbox WHERE status IN ('available', 'leased'))
	+ (SELECT count(*) FROM release_runs r WHERE status NOT IN ('succeeded', 'failed', 'cancelled')
	   AND NOT EXISTS (SELECT 1 FROM control_plane_outbox o WHERE o.release_run_id = r.id
	                   AND o.status IN ('available', 'leased', 'dead_letter', 'reconciliation_required')))`

// quietQuery counts effects waiting or in flight: once it is zero, what remains needs an operator
// (reconciliation, dead letters) — workflow_run jobs may still wait for a dispatch to be resolved.
const quietQuery = `SELECT count(*) FROM control_plane_outbox WHERE status IN ('available', 'leased')`

// settle waits until settleQuery is zero.
func (e *env) settle(timeout time.Duration) { e.t.Helper(); e.waitZero(settleQuery, timeout) }

func (e *env) waitZero(q string, timeout time.Duration, args ...any) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		open := e.count(q, args...)
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.logOpen(args...)
			e.t.Fatalf("not settled after %v: %d open jobs, effects or runs without a live effect", timeout, open)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// logOpen logs, row by row, what a wait found still open: the jobs and effects waiting or in
// flight, the release runs not terminal, and (when the wait was given delivery ids) the deliveries
// missing from the inbox. It uses a pool of its own on the scenario's current database URL, so it
// answers after a failover or restore too.
func (e *env) logOpen(args ...any) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.dbURL)
	if err != nil {
		e.t.Logf("open rows: cannot connect: %v", err)
		return
	}
	defer conn.Close(ctx)
	qs := []string{
		`SELECT 'job ' || j.id || ' ' || j.kind || ' ' || j.status || ' attempts=' || j.attempts || ' inbox=' || j.inbox_id
			|| ' delivery=' || i.delivery_id || ' available_at=' || j.available_at || ' error=' || coalesce(j.last_error, '')
		 FROM control_plane_jobs j JOIN webhook_inbox i ON i.id = j.inbox_id WHERE j.status NOT IN ('completed') ORDER BY j.id`,
		`SELECT 'effect ' || id || ' ' || effect_type || ' ' || status || ' attempts=' || attempts || ' run=' || coalesce(release_run_id::text, '')
			|| ' available_at=' || available_at || ' error=' || coalesce(last_error, '')
		 FROM control_plane_outbox WHERE status <> 'completed' ORDER BY id`,
		`SELECT 'run ' || r.id || ' ' || r.status || ' effects=' || coalesce((SELECT string_agg(o.id || ':' || o.effect_type || ':' || o.status, ',' ORDER BY o.id)
			FROM control_plane_outbox o WHERE o.release_run_id = r.id), '')
		 FROM release_runs r WHERE r.status NOT IN ('succeeded', 'failed', 'cancelled') ORDER BY r.id`,
		`SELECT 'limit ' || to_jsonb(l)::text FROM github_installation_limits l`,
		`SELECT 'fence ' || to_jsonb(f)::text FROM restore_fences f ORDER BY id`,
	}
	for _, q := range qs {
		rows, err := conn.Query(ctx, q)
		if err != nil {
			e.t.Logf("open rows: %v", err)
			continue
		}
		for rows.Next() {
			var line string
			_ = rows.Scan(&line)
			e.t.Logf("open: %s", line)
		}
		rows.Close()
	}
	for _, a := range args {
		ids, ok := a.([]string)
		if !ok {
			continue
		}
		rows, err := conn.Query(ctx, `SELECT d.id FROM unnest($1::text[]) d(id)
			WHERE NOT EXISTS (SELECT 1 FROM webhook_inbox i WHERE i.delivery_id = d.id) ORDER BY 1`, ids)
		if err != nil {
			e.t.Logf("open rows: %v", err)
			continue
		}
		for rows.Next() {
			var id string
			_ = rows.Scan(&id)
			e.mu.Lock()
			sum := sha256.Sum256(e.ackedBody[id])
			e.mu.Unlock()
			var first string
			_ = conn.QueryRow(ctx, `SELECT delivery_id FROM webhook_body_digests WHERE payload_sha256 = $1`, sum[:]).Scan(&first)
			e.t.Logf("open: delivery %s not in the inbox (its body's digest recorded for delivery %q)", id, first)
		}
		rows.Close()
	}
}

// brops runs the admin CLI against the scenario's database and simulator.
func (e *env) brops(args ...string) []byte {
	e.t.Helper()
	cmd := exec.Command(filepath.Join(binaries(e.t), "brops"), args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+e.dbURL, "BOARDREADYOPS_OPERATOR=chaos-suite")
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		e.t.Fatalf("brops %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

// reconcile resolves every dispatch in reconciliation_required the way an operator does:
// brops reconcile auto resolves each one with exactly one exact match on GitHub (the simulator's
// truth) — the product's decision, not a copy of it — and leaves the others, which are then
// resolved from what it saw: the run of the same tag after a restore, or none. It returns how
// many were resolved.
func (e *env) reconcile() int {
	e.t.Helper()
	out := e.brops("reconcile", "auto", "-o", "json", "--operator", "chaos-suite",
		"--github-api-url", e.gh.URL+"/", "--github-app-id", strconv.Itoa(appID), "--github-private-key-file", e.keyFile)
	var decisions []struct {
		Effect   int64  `json:"effect"`
		Action   string `json:"action"`
		Decision struct {
			Exact    []int64 `json:"exact"`
			NameOnly []int64 `json:"name_only"`
			Tag      []int64 `json:"tag"`
		} `json:"decision"`
	}
	if err := json.Unmarshal(out, &decisions); err != nil {
		e.t.Fatalf("reconcile auto: %v\n%s", err, out)
	}
	for _, d := range decisions {
		id := strconv.FormatInt(d.Effect, 10)
		switch {
		case d.Action == "resolved":
		case len(d.Decision.Exact) > 1:
			e.t.Errorf("effect %d: %d runs name this attempt: the dispatch ran twice", d.Effect, len(d.Decision.Exact))
		case len(d.Decision.NameOnly) > 0:
			e.t.Errorf("effect %d: runs %v carry its ids on another branch or commit", d.Effect, d.Decision.NameOnly)
		case len(d.Decision.Tag) == 1:
			// After a restore: the lost incarnation of this release already ran; adopt its run.
			e.brops("reconcile", "resolve", id, "--workflow-run-id", strconv.FormatInt(d.Decision.Tag[0], 10),
				"--evidence", "chaos suite: the simulator's run for this tag, dispatched before the restore")
		default:
			e.brops("reconcile", "resolve", id, "--not-dispatched", "--evidence", "chaos suite: no run on the simulator")
		}
	}
	return len(decisions)
}

// check drives the scenario to its end state — faults cleared, settled, reconciled, dead letters
// replayed, settled again — and proves the invariants. runs is how many release runs the load
// created.
func (e *env) check(name string, runs int) report {
	e.t.Helper()
	e.mu.Lock()
	runs += e.extraRuns
	e.mu.Unlock()
	e.sim.ClearFaults()
	e.waitZero(quietQuery, 120*time.Second)
	r := report{Scenario: name}
	for range 5 {
		rec := e.reconcile()
		dead := e.count(`SELECT count(*) FROM control_plane_outbox WHERE status = 'dead_letter'`) +
			e.count(`SELECT count(*) FROM control_plane_jobs WHERE status = 'dead_letter'`)
		if e.count(`SELECT count(*) FROM control_plane_outbox WHERE status = 'dead_letter'`) > 0 {
			e.brops("outbox", "replay", "--all-dead-letters", "--reason", "chaos suite: faults cleared", "--yes")
		}
		if e.count(`SELECT count(*) FROM control_plane_jobs WHERE status = 'dead_letter'`) > 0 {
			e.brops("jobs", "replay", "--all-dead-letters", "--reason", "chaos suite: faults cleared", "--yes")
		}
		r.Reconciliations += rec
		r.DeadLetters += dead
		if rec == 0 && dead == 0 {
			break
		}
		e.waitZero(quietQuery, 120*time.Second)
	}
	e.settle(120 * time.Second)

	e.mu.Lock()
	acked := make([]string, 0, len(e.acked))
	for id := range e.acked {
		acked = append(acked, id)
	}
	r.Deliveries, r.Retries, r.Crashes = len(acked), e.retries, e.crashes
	e.mu.Unlock()
	r.Effects = e.count(`SELECT count(*) FROM control_plane_outbox`)

	// 1. Every delivery answered 2xx is in the inbox, and its job completed.
	if missing := e.count(`SELECT count(*) FROM unnest($1::text[]) d(id) WHERE NOT EXISTS (SELECT 1 FROM webhook_inbox i WHERE i.delivery_id = d.id)`, acked); missing > 0 {
		e.t.Errorf("%d deliveries answered 2xx are not in the inbox", missing)
		r.Lost += missing
	}
	if n := e.count(`SELECT count(*) FROM control_plane_jobs WHERE status <> 'completed'`); n > 0 {
		e.t.Errorf("%d jobs not completed", n)
		r.Lost += n
	}
	// 2. Every release run terminal; every effect completed.
	if n := e.count(`SELECT count(*) FROM release_runs`); n != runs {
		e.t.Errorf("%d release runs, want %d", n, runs)
		r.Lost += max(runs-n, 0)
	}
	if n := e.count(`SELECT count(*) FROM release_runs WHERE status NOT IN ('succeeded', 'failed', 'cancelled')`); n > 0 {
		e.t.Errorf("%d release runs not terminal", n)
		r.Lost += n
	}
	if n := e.count(`SELECT count(*) FROM control_plane_outbox WHERE status <> 'completed'`); n > 0 {
		e.t.Errorf("%d effects not completed", n)
	}
	// A completed row was last written by its completion, whatever failed on the way: brops lists
	// completed rows by completed_at, through their index, as the newest updated.
	if n := e.count(`SELECT (SELECT count(*) FROM control_plane_jobs WHERE status = 'completed' AND completed_at <> updated_at)
		+ (SELECT count(*) FROM control_plane_outbox WHERE status = 'completed' AND completed_at <> updated_at)`); n > 0 {
		e.t.Errorf("%d completed jobs and effects whose updated_at is not their completed_at", n)
	}
	// 3. Exactly one check run per release run and one dispatch per attempt, on GitHub's side.
	// An attempt that adopted the run of a lost incarnation of its release (after a restore) was
	// not dispatched itself: its run is the earlier one, named for other ids.
	adopted := map[int64]bool{}
	for _, w := range e.sim.WorkflowRuns() {
		adopted[w.ID] = true
	}
	rows, err := e.pool.Query(context.Background(), `SELECT r.id::text, a.id::text, coalesce(a.workflow_run_id, 0), boardreadyops_release_run_external_id(r.repository_id, r.ref)
		FROM release_runs r JOIN execution_attempts a ON a.release_run_id = r.id`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var run, attempt, externalID string
		var workflowRun int64
		_ = rows.Scan(&run, &attempt, &workflowRun, &externalID)
		if n := len(e.sim.CheckRuns(externalID)); n != 1 {
			e.t.Errorf("release run %s has %d check runs on GitHub, want 1", run, n)
			r.Duplicates += max(n-1, 0)
		}
		if n := e.sim.Dispatches(attempt); n != 1 && (n != 0 || !adopted[workflowRun]) {
			e.t.Errorf("attempt %s was dispatched %d times, want 1", attempt, n)
			r.Duplicates += max(n-1, 0)
		}
	}
	// 4. No credential in any stored row: webhook secret, App key, installation tokens, JWTs.
	for _, needle := range []string{string(e.secret), "PRIVATE KEY", "ghs_", "eyJhbGciOi"} {
		if n := e.count(`SELECT (SELECT count(*) FROM webhook_inbox WHERE payload::text LIKE '%' || $1 || '%')
			+ (SELECT count(*) FROM control_plane_outbox WHERE payload::text || coalesce(result::text, '') || coalesce(last_error, '') LIKE '%' || $1 || '%')
			+ (SELECT count(*) FROM control_plane_jobs WHERE coalesce(last_error, '') LIKE '%' || $1 || '%')`, needle); n > 0 {
			e.t.Errorf("%d stored rows contain %q", n, needle[:min(len(needle), 6)])
		}
	}
	e.t.Logf("report: %s", r)
	return r
}
