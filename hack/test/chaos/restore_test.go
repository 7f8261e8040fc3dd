package chaos_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/testkit/pgcluster"
)

// TestPointInTimeRestore restores the database to a moment in the middle of the load, as an
// operator recovering from a bad migration or lost disk would: a base backup (pg_basebackup)
// taken before the load plus the archived WAL, replayed to recovery_target_time. GitHub (the
// simulator) remembers everything the old deployment did after that moment; the restored
// database does not. The runbook (docs/operations.md, "Runbook: backup and restore") then runs:
// brops restore fence before any dispatcher starts, the services, the brops webhooks redeliver
// command the fence printed, and reconciliation, while developers keep pushing new releases to the
// restored deployment; the redelivery's dry run then lists none. Afterwards every release run in
// the restored database has exactly one check run and each of its attempts exactly one dispatch,
// and on GitHub there is one check run per release identity and none that no release run owns: a
// release run recreated from a redelivered push adopts the check run of its lost incarnation.
func TestPointInTimeRestore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	archive, err := pgcluster.NewArchiveDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(archive) })
	p := startMigrated(t, pgcluster.Options{Durable: true, Settings: pgcluster.ArchiveSettings(archive)})
	backup, err := os.MkdirTemp("", "boardreadyops-base-backup-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(backup) })
	if err := p.BaseBackup(ctx, filepath.Join(backup, "data"), false); err != nil {
		t.Fatal(err)
	}

	e := newEnvOn(t, p.URL("postgres"), envOptions{})
	runs, over := size()
	var target time.Time
	during(e, runs, over, 1, func(int) { target = time.Now() })
	// The old deployment finishes what it started: GitHub now has every check run and dispatch.
	e.waitZero(quietQuery, 120*time.Second)
	e.stopServices()
	if err := p.SwitchWAL(ctx); err != nil {
		t.Fatal(err)
	}
	sentBefore := e.sim.DispatchTotal()
	checkRunsBefore := e.sim.CheckRunCount()

	r, err := pgcluster.StartRestored(ctx, filepath.Join(backup, "data"), archive, target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	e.dbURL = r.URL("postgres")
	e.mu.Lock()
	var lost []string
	for id, at := range e.ackedAt {
		if at.After(target) {
			lost = append(lost, id)
		}
	}
	e.mu.Unlock()

	// 1. The fence, before any dispatcher runs.
	out := e.brops("restore", "fence", "--since", target.UTC().Format(time.RFC3339Nano), "--margin", "1m", "-o", "json")
	var fence struct {
		Fenced    []struct{ ID int64 } `json:"fenced"`
		Redeliver string               `json:"redeliver_command"`
	}
	if err := json.Unmarshal(out, &fence); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// 2. The services, then the redelivery the fence printed. Developers keep pushing: between
	// the fence and the hold's close, new releases and branch pushes reach the restored ingest,
	// and GitHub's log gains their deliveries. The runbook's dry run must not count the branch
	// pushes, which ingest filters and keeps no row of, as missing.
	e.startServicesOn(r.URL("postgres"))
	missing := e.count(`SELECT count(*) FROM unnest($1::text[]) d(id) WHERE NOT EXISTS (SELECT 1 FROM webhook_inbox i WHERE i.delivery_id = d.id)`, lost)
	args := strings.Fields(strings.TrimPrefix(fence.Redeliver, "brops "))
	if len(args) < 4 || args[0] != "webhooks" {
		t.Fatalf("fence printed %q", fence.Redeliver)
	}
	live := runs / 4
	e.mu.Lock()
	e.extraRuns += live
	e.mu.Unlock()
	liveDone := make(chan struct{})
	go func() {
		defer close(liveDone)
		var wg sync.WaitGroup
		wg.Go(func() { e.loadFrom(runs, live, over/2) })
		wg.Go(func() {
			for i := range live {
				e.deliverFiltered("push", branchPush(i%loadRepos, i))
				time.Sleep(over / 2 / time.Duration(live))
			}
		})
		wg.Wait()
	}()
	// Registered after the services' cleanups, so it runs before them: a test stopped early
	// lets the pushes finish against running services.
	t.Cleanup(func() { <-liveDone })
	e.redeliverAll(args)
	// A few branch pushes after the command's last run, which therefore asked GitHub to
	// redeliver none of them: only their first delivery tells brops they arrived.
	var filtered []string
	for i := range 3 {
		filtered = append(filtered, e.deliverFiltered("push", branchPush(i%loadRepos, live+i)))
	}
	<-liveDone
	e.waitNoneToRedeliver(args, filtered, 60*time.Second)
	e.closeHoldAfter(lost)
	pending := e.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.workflow.dispatch' AND status = 'reconciliation_required'`)

	// 3. Reconciliation and the invariants, over what the restored database holds.
	e.dumpOnFailure()
	rep := e.check("point-in-time restore", runs)
	t.Logf("restore: target %s mid-load; %d deliveries acknowledged after it, %d of them missing from the restored inbox and redelivered; "+
		"%d new releases pushed after the fence; %d dispatches fenced (%d in reconciliation after the fence); dispatches on GitHub %d before the restore, %d after; report %s",
		target.UTC().Format(time.RFC3339Nano), len(lost), missing, live, len(fence.Fenced), pending, sentBefore, e.sim.DispatchTotal(), rep)
	// Per release (repository and tag) on GitHub's side, across both incarnations: a release
	// whose push arrived after the restore point was dispatched by the old deployment, and its
	// redelivered push creates a new release run (new ids) that dispatches again.
	perTag := map[string]int{}
	for _, w := range e.sim.WorkflowRuns() {
		repo, _, _ := strings.Cut(strings.TrimPrefix(w.HTMLURL, "https://github.com/"), "/actions/")
		perTag[repo+"@"+w.HeadBranch]++
	}
	twice := 0
	for _, n := range perTag {
		twice += n - 1
	}
	// Check runs on GitHub's side, across both incarnations: the recreated release runs adopted
	// the check runs their lost incarnations created (the identity is the release's, not the
	// run's id), so there is one per identity, and none is left in progress without a run.
	cr := e.checkRunsAcrossRestore(target, checkRunsBefore, live)
	t.Logf("restore: %d releases, %d extra workflow runs for a release already dispatched before the restore; "+
		"%d check runs on GitHub (%d before the restore) for %d release runs, %d of them recreated after the restore; "+
		"%d identities with more than one check run; %d check runs no release run owns, %d of them in progress; %d in progress in all",
		len(perTag), twice, cr.total, cr.before, cr.runs, cr.recreated, cr.duplicated, cr.orphans, cr.orphansInProgress, cr.unfinished)
	if twice != 0 {
		t.Errorf("%d releases dispatched twice across the restore", twice)
		rep.Duplicates += twice
	}
	if cr.duplicated != 0 || cr.orphans != 0 || cr.orphansInProgress != 0 || cr.unfinished != 0 || cr.total != cr.runs || cr.total != cr.before+cr.added {
		t.Errorf("check runs across the restore: %+v, want one per release run and no orphan", cr)
		rep.Duplicates += cr.duplicated
	}
	if rep.Duplicates != 0 || rep.Lost != 0 {
		t.Errorf("report %s", rep)
	}
	e.requireRunning()
}

// checkRunFigures are the check runs on GitHub against the restored database.
type checkRunFigures struct {
	// total: check runs on GitHub at the end; before: when the old deployment stopped (it had
	// created one per release); added: releases first pushed after the restore; runs: release
	// runs in the restored database.
	total, before, added, runs int
	// recreated: release runs created after the restore point, from redelivered pushes, each
	// the new incarnation of a lost run whose check run is already on GitHub.
	recreated int
	// duplicated: identities (repository, head SHA, name, external_id) with more than one check run.
	duplicated int
	// orphans: check runs that no release run of the database records; orphansInProgress: of
	// those, the ones still queued or in progress, spinning on a developer's commit for good.
	orphans, orphansInProgress int
	// unfinished: check runs of any owner still queued or in progress at the end (every run is
	// terminal by then, and its last update went to the check run it records).
	unfinished int
}

// checkRunsAcrossRestore counts the check runs on GitHub against the database restored to target;
// before is the number the old deployment left, added the releases first pushed after the restore.
func (e *env) checkRunsAcrossRestore(target time.Time, before, added int) checkRunFigures {
	e.t.Helper()
	f := checkRunFigures{before: before, added: added, runs: e.count(`SELECT count(*) FROM release_runs`),
		recreated: e.count(`SELECT count(*) FROM release_runs WHERE created_at > $1`, target) - added}
	owned := map[int64]bool{}
	rows, err := e.pool.Query(context.Background(), `SELECT check_run_id FROM release_runs WHERE check_run_id IS NOT NULL`)
	if err != nil {
		e.t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		_ = rows.Scan(&id)
		owned[id] = true
	}
	rows.Close()
	perIdentity := map[string]int{}
	for _, c := range e.sim.AllCheckRuns() {
		f.total++
		perIdentity[c.Repository()+"@"+c.HeadSHA+"/"+c.Name+"/"+c.ExternalID]++
		if c.Status == "queued" || c.Status == "in_progress" {
			f.unfinished++
		}
		if !owned[c.ID] {
			f.orphans++
			if c.Status == "queued" || c.Status == "in_progress" {
				f.orphansInProgress++
			}
		}
	}
	for _, n := range perIdentity {
		f.duplicated += n - 1
	}
	return f
}

// dumpOnFailure logs, when the test fails, the jobs, effects and runs of the database by state.
func (e *env) dumpOnFailure() {
	e.t.Cleanup(func() {
		if e.t.Failed() {
			for _, q := range []string{`SELECT 'job ' || kind || ' ' || status || ' ' || coalesce(last_error, ''), count(*) FROM control_plane_jobs GROUP BY 1`,
				`SELECT 'effect ' || effect_type || ' ' || status, count(*) FROM control_plane_outbox GROUP BY 1`,
				`SELECT 'run ' || status, count(*) FROM release_runs GROUP BY 1`} {
				rows, err := e.pool.Query(context.Background(), q)
				if err != nil {
					continue
				}
				for rows.Next() {
					var k string
					var n int
					_ = rows.Scan(&k, &n)
					e.t.Logf("%s: %d", k, n)
				}
				rows.Close()
			}
		}
	})
}

// redeliverAll runs the redelivery command a fence printed (args, without "brops") as the runbook
// says (docs/operations.md, "Runbook: backup and restore", step 5): while a run leaves deliveries
// for the next one (more were missing than --max-requests), it waits until those it requested
// have arrived — a dry run lists only the ones left — and runs it again.
func (e *env) redeliverAll(args []string) {
	e.t.Helper()
	args = append(args, "--github-api-url", e.gh.URL+"/", "--github-app-id", strconv.Itoa(appID), "--github-private-key-file", e.keyFile)
	missing := func(out string) int {
		m := missingLine.FindStringSubmatch(out)
		if m == nil {
			e.t.Fatalf("brops webhooks redeliver printed no count of missing deliveries:\n%s", out)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	for run := 1; ; run++ {
		out := string(e.brops(args...))
		head, _, _ := strings.Cut(out, "\n")
		e.t.Logf("redeliver, run %d: %s", run, head)
		m := leftLine.FindStringSubmatch(out)
		if m == nil {
			return
		}
		if run == 5 {
			e.t.Fatalf("redelivery still leaves deliveries after %d runs:\n%s", run, head)
		}
		// Until the dry run's count is down to what was left, or stops falling for 10 s (a
		// redelivery answered non-2xx stays missing: the next run asks for it again).
		left, _ := strconv.Atoi(m[1])
		last, since := -1, time.Now()
		for {
			n := missing(string(e.brops(append(args, "--dry-run")...)))
			if n <= left {
				break
			}
			if n != last {
				last, since = n, time.Now()
			}
			if time.Since(since) > 10*time.Second {
				e.t.Logf("redeliver, run %d: %d still missing, %d left by it; running again", run, n, left)
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// waitNoneToRedeliver waits up to timeout until the redelivery command's dry run (args, without
// "brops") counts no missing delivery, the runbook's condition for closing the hold
// (docs/operations.md, "Runbook: backup and restore", step 5), and fails the test if it never does
// or if it lists any of filtered (deliveries ingest filtered after the fence). As the runbook
// has it, when the count stops falling for 10 s (a redelivery answered non-2xx stays missing), it
// runs the command again.
func (e *env) waitNoneToRedeliver(args, filtered []string, timeout time.Duration) {
	e.t.Helper()
	args = append(append([]string(nil), args...), "--github-api-url", e.gh.URL+"/",
		"--github-app-id", strconv.Itoa(appID), "--github-private-key-file", e.keyFile)
	dry := append(append([]string(nil), args...), "--dry-run")
	deadline := time.Now().Add(timeout)
	last, since := -1, time.Now()
	for {
		out := string(e.brops(dry...))
		m := missingLine.FindStringSubmatch(out)
		if m == nil {
			e.t.Fatalf("brops webhooks redeliver printed no count of missing deliveries:\n%s", out)
		}
		for _, id := range filtered {
			if strings.Contains(out, id) {
				e.t.Errorf("the runbook's dry run lists %s, which ingest filtered after the fence:\n%s", id, tail(out, 2000))
				return
			}
		}
		n, _ := strconv.Atoi(m[1])
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Errorf("the runbook's dry run still lists deliveries to redeliver:\n%s", tail(out, 2000))
			return
		}
		if n != last {
			last, since = n, time.Now()
		}
		if time.Since(since) > 10*time.Second {
			head, _, _ := strings.Cut(string(e.brops(args...)), "\n")
			e.t.Logf("redeliver again, %d still missing: %s", n, head)
			last, since = -1, time.Now()
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// The text output of --include-delivered ("… GUIDs, N missing from the inbox"; without the flag it
// says "failed and missing").
var (
	missingLine = regexp.MustCompile(`GUIDs, (\d+) missing from the inbox`)
	leftLine    = regexp.MustCompile(`; (\d+) left for the next run`)
)

// closeHoldAfter waits until the redelivered deliveries (ids) are in the inbox — GitHub sends
// redeliveries asynchronously — and processed, and the check-run creations done, so that every
// dispatch they lead to was held; then it ends the hold (brops restore close).
func (e *env) closeHoldAfter(ids []string) {
	e.t.Helper()
	e.waitZero(`SELECT count(*) FROM unnest($1::text[]) d(id) WHERE NOT EXISTS (SELECT 1 FROM webhook_inbox i WHERE i.delivery_id = d.id)`, 60*time.Second, ids)
	// The pending work brops restore close counts itself (it also counts dead letters since the
	// fence, which this test makes none of), so that the close does not have to wait for it.
	e.waitZero(`SELECT (SELECT count(*) FROM control_plane_jobs WHERE status IN ('available', 'leased') AND kind IN ('push', 'check_run', 'check_suite'))
		+ (SELECT count(*) FROM control_plane_outbox WHERE status IN ('available', 'leased')
		   AND effect_type IN ('github.check_run.create', 'github.collaborator_permission.read'))`, 60*time.Second)
	e.brops("restore", "close")
}
