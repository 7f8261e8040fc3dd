package dispatcher_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
	"github.com/boardreadyops/cloud/services/outbox-dispatcher/internal/dispatcher"
)

// replicas runs n dispatcher replicas (env.replica) with the given pace until stop is called.
func (e *env) replicas(n int, edit func(*dispatcher.Config)) (stop func()) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	for range n {
		d := e.replica(10*time.Second, edit)
		wg.Add(1)
		go func() { defer wg.Done(); _ = d.Run(ctx) }()
	}
	var once sync.Once
	return func() { once.Do(func() { cancel(); wg.Wait() }) }
}

// waitFor polls cond until it holds (or fails the test after a minute and a half).
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not reached; outbox %v", what, e.statuses())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// completeRuns enqueues, as lifecycle would once each workflow run finished, the check-run
// completion of every running release run.
func (e *env) completeRuns() {
	e.t.Helper()
	rows, err := e.pool.Query(e.ctx, `SELECT r.id::text, a.id::text, r.installation_id, p.full_name, r.check_run_id
		FROM release_runs r JOIN execution_attempts a ON a.release_run_id = r.id JOIN repositories p ON p.id = r.repository_id
		WHERE r.status = 'running'`)
	if err != nil {
		e.t.Fatal(err)
	}
	type run struct {
		id, attempt, repo string
		inst, checkRun    int64
	}
	var runs []run
	for rows.Next() {
		var r run
		if err := rows.Scan(&r.id, &r.attempt, &r.inst, &r.repo, &r.checkRun); err != nil {
			e.t.Fatal(err)
		}
		runs = append(runs, r)
	}
	for _, r := range runs {
		if _, _, err := (&outbox.Store{}).Enqueue(e.ctx, e.pool, outbox.NewEffect{EffectType: outbox.EffectCheckRunComplete,
			ReleaseRunID: r.id, ExecutionAttemptID: r.attempt, InstallationID: r.inst, Payload: map[string]any{
				"repository_full_name": r.repo, "check_run_id": r.checkRun, "conclusion": "success",
				"title": "Release succeeded", "summary": "Attempt 1 succeeded."}}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// deliverRuns waits until the runs are dispatched, completes them as lifecycle would, waits until
// their check runs are completed, stops the replicas and fails unless every effect completed (no
// dead letter, no reconciliation).
func (e *env) deliverRuns(runs int, stop func()) {
	e.t.Helper()
	e.waitFor("every run dispatched", func() bool {
		return e.count(`SELECT count(*) FROM release_runs WHERE status = 'running'`) == runs
	})
	e.completeRuns()
	e.waitFor("every check run completed", func() bool {
		return e.statuses()["github.check_run.complete/completed"] == runs
	})
	stop()
	if st := e.statuses(); len(st) != 3 || st["github.check_run.create/completed"] != runs || st["github.workflow.dispatch/completed"] != runs {
		e.t.Fatalf("outbox %v, want every effect completed (no dead letter, no reconciliation)", st)
	}
}

// exactlyOnce fails unless every execution attempt was dispatched to GitHub exactly once.
func (e *env) exactlyOnce(runs int) {
	e.t.Helper()
	rows, err := e.pool.Query(e.ctx, `SELECT id::text FROM execution_attempts`)
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		if d := e.sim.Dispatches(id); d != 1 {
			e.t.Errorf("attempt %s dispatched %d times", id, d)
		}
		n++
	}
	if n != runs || e.sim.DispatchTotal() != runs {
		e.t.Fatalf("%d attempts, %d dispatches, want %d each", n, e.sim.DispatchTotal(), runs)
	}
}

// Three replicas deliver 50 release runs of one installation against a simulator that answers
// every concurrent request and every mutation closer than the interval with a secondary limit,
// and records each: there are none, and everything is delivered exactly once.
func TestThreeReplicasPaceOneInstallation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const inst, runs, interval = 31001, 50, 100 * time.Millisecond
	e.sim.SetLimits(githubsim.Limits{Budget: 10000, MaxConcurrent: 1, MutationInterval: interval, Strict: true})
	for i := range runs {
		e.release(inst, fmt.Sprintf("paced-org/repo-%d", i%5), fmt.Sprintf("v1.%d.0", i))
	}
	stop := e.replicas(3, func(c *dispatcher.Config) { c.PerInstallation, c.MutationInterval = 1, interval })
	defer stop()
	e.deliverRuns(runs, stop)
	if v := e.sim.Violations(); len(v) != 0 {
		t.Fatalf("%d pacing violations, first %+v", len(v), v[0])
	}
	e.exactlyOnce(runs)
	if n := e.sim.CheckRunCount(); n != runs {
		t.Fatalf("%d check runs on GitHub", n)
	}
	// The budget GitHub reported reached the gauge (10,000 per window, ~150 spent).
	if r := e.gauge("boardreadyops_github_budget_lowest_remaining_ratio"); r <= 0.9 || r >= 1 {
		t.Fatalf("lowest remaining budget ratio %v", r)
	}
}

// gauge reads an unlabelled gauge of the first dispatcher.
func (e *env) gauge(name string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	e.t.Fatalf("no gauge %s", name)
	return 0
}

// A secondary limit without Retry-After (GitHub's 403, budget left) blocks the installation for
// all three replicas for the backoff: no replica sends it a request meanwhile, another
// installation keeps flowing, and the first request after the block is a single one.
func TestRateLimitBlockIsSharedByReplicas(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const limited, free, runs = 32001, 32002, 10
	const backoff = 2 * time.Second
	e.sim.SetLimits(githubsim.Limits{Budget: 5000, MaxConcurrent: 1, Strict: true})
	e.sim.AddFault(githubsim.Fault{InstallationID: limited, Operation: githubsim.OpCreateCheckRun, SecondaryRateLimit: true, Times: 1})
	for i := range runs {
		e.release(limited, "limited-org/repo", fmt.Sprintf("v1.%d.0", i))
		e.release(free, "free-org/repo", fmt.Sprintf("v1.%d.0", i))
	}
	stop := e.replicas(3, func(c *dispatcher.Config) {
		c.PerInstallation, c.MutationInterval = 1, 10*time.Millisecond
		c.RateLimitBackoff, c.RateLimitMaxBackoff = backoff, 4*backoff
	})
	defer stop()
	e.waitFor("every run dispatched", func() bool {
		// Running, and the check-run update each dispatch enqueued delivered too.
		return e.count(`SELECT count(*) FROM release_runs WHERE status = 'running'`) == 2*runs &&
			e.count(`SELECT count(*) FROM control_plane_outbox WHERE status <> 'completed'`) == 0
	})
	stop()
	var limitedAt time.Time
	var blockedUntil time.Time
	if err := e.pool.QueryRow(e.ctx, `SELECT blocked_until FROM github_installation_limits WHERE installation_id = $1`, limited).Scan(&blockedUntil); err != nil {
		t.Fatal(err)
	}
	var after []githubsim.Entry
	freeDuring := 0
	for _, j := range e.sim.Journal() {
		switch {
		case j.InstallationID == limited && j.Status == 403:
			limitedAt = j.Time
		case j.InstallationID == limited && !limitedAt.IsZero() && j.Time.Before(blockedUntil):
			t.Fatalf("request for the blocked installation at %v, block until %v: %+v", j.Time, blockedUntil, j)
		case j.InstallationID == limited && !limitedAt.IsZero():
			after = append(after, j)
		case j.InstallationID == free && !limitedAt.IsZero() && j.Time.Before(blockedUntil):
			freeDuring++
		}
	}
	// The block is the backoff to a fifth longer (00070), counted from when the dispatcher
	// recorded it: a little after the simulator journaled the 403, more on a loaded machine
	// (0.22 s was seen with -race beside other suites).
	if b := blockedUntil.Sub(limitedAt); b < backoff || b > backoff*6/5+time.Second {
		t.Fatalf("blocked %v after the limit, want the backoff %v ± jitter", b, backoff)
	}
	if freeDuring == 0 {
		t.Fatal("the other installation sent nothing during the block")
	}
	if len(after) == 0 {
		t.Fatal("nothing sent after the block")
	}
	if v := e.sim.Violations(); len(v) != 0 {
		t.Fatalf("%d requests overlapped another of their installation (the first after the block must be alone), first %+v", len(v), v[0])
	}
	if n := e.count(`SELECT count(*) FROM control_plane_outbox WHERE status <> 'completed' OR attempts <> 1`); n != 0 {
		t.Fatalf("%d effects not completed at their first attempt: the deferral spent one; outbox %v", n, e.statuses())
	}
}

// A rate-limit storm — secondary limits on 20 % of all requests for 30 s, half with Retry-After
// and half without — over three replicas and ten installations, with new release runs arriving
// all through it, ends with every run delivered, no dead letter, no reconciliation and no
// dispatch sent twice.
func TestRateLimitStorm(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const installations, stormFor, every = 10, 30 * time.Second, 100 * time.Millisecond
	e.sim.SetLimits(githubsim.Limits{Budget: 5000})
	e.sim.AddFault(githubsim.Fault{SecondaryRateLimit: true, Probability: 0.1, RetryAfter: time.Second})
	e.sim.AddFault(githubsim.Fault{SecondaryRateLimit: true, Probability: 0.1 / 0.9})
	stop := e.replicas(3, func(c *dispatcher.Config) {
		c.PerInstallation, c.MutationInterval = 1, 20*time.Millisecond
		c.RateLimitBackoff, c.RateLimitMaxBackoff = 200*time.Millisecond, time.Second
	})
	defer stop()
	start := time.Now()
	runs := 0
	for time.Since(start) < stormFor {
		e.release(int64(33001+runs%installations), fmt.Sprintf("storm-org-%d/repo", runs%installations), fmt.Sprintf("v1.%d.0", runs))
		runs++
		time.Sleep(every)
	}
	end := time.Now()
	e.sim.ClearFaults()
	e.deliverRuns(runs, stop)
	var limited, lastThird int
	for _, j := range e.sim.Journal() {
		if j.Status != 403 {
			continue
		}
		limited++
		if j.Time.After(end.Add(-stormFor / 3)) {
			lastThird++
		}
	}
	if limited == 0 || lastThird == 0 {
		t.Fatalf("%d requests limited, %d in the storm's last third: the storm did not last", limited, lastThird)
	}
	e.exactlyOnce(runs)
	t.Logf("%d release runs over %s; %d requests rate limited, %d of them in the last third", runs, end.Sub(start).Round(time.Second), limited, lastThird)
}
