package worker_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
	"github.com/boardreadyops/cloud/pkg/testkit/metricstest"
	"github.com/boardreadyops/cloud/services/lifecycle/internal/handler"
	"github.com/boardreadyops/cloud/services/lifecycle/internal/worker"
)

func TestInstallationAndRepositoryState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hello := eventdoc.RepositoryRef{ID: repoID, FullName: "octo-org/hello-world"}
	tools := eventdoc.RepositoryRef{ID: 1296270, FullName: "octo-org/release-tools"}
	type state struct {
		suspended, deleted bool
		repos              string // id:full_name:archived:removed:default_branch, sorted by id
	}
	read := func() state {
		var s state
		if err := b.pool.QueryRow(b.ctx, `SELECT suspended_at IS NOT NULL, deleted_at IS NOT NULL FROM installations WHERE id = $1`, installationID).
			Scan(&s.suspended, &s.deleted); err != nil {
			t.Fatal(err)
		}
		if err := b.pool.QueryRow(b.ctx, `SELECT coalesce(string_agg(id || ':' || full_name || ':' || archived || ':' || (removed_at IS NOT NULL) || ':' || coalesce(default_branch, '-'), ' ' ORDER BY id), '')
			FROM repositories`).Scan(&s.repos); err != nil {
			t.Fatal(err)
		}
		return s
	}
	steps := []struct {
		name string
		doc  eventdoc.Document
		want state
	}{
		{"created", installationEvent("created", hello), state{repos: "1296269:octo-org/hello-world:false:false:-"}},
		{"repositories added", eventdoc.Document{Event: "installation_repositories", Action: "added", InstallationID: installationID,
			Installation:      &eventdoc.Installation{ID: installationID, AccountLogin: "octo-org", AccountType: "Organization"},
			RepositoriesAdded: []eventdoc.RepositoryRef{tools}},
			state{repos: "1296269:octo-org/hello-world:false:false:- 1296270:octo-org/release-tools:false:false:-"}},
		{"repositories removed", eventdoc.Document{Event: "installation_repositories", Action: "removed", InstallationID: installationID,
			Installation:        &eventdoc.Installation{ID: installationID, AccountLogin: "octo-org", AccountType: "Organization"},
			RepositoriesRemoved: []eventdoc.RepositoryRef{tools}},
			state{repos: "1296269:octo-org/hello-world:false:false:- 1296270:octo-org/release-tools:false:true:-"}},
		{"renamed", repoEvent("renamed", func(d *eventdoc.Document) { d.Repository.FullName = "octo-org/hello-universe" }),
			state{repos: "1296269:octo-org/hello-universe:false:false:- 1296270:octo-org/release-tools:false:true:-"}},
		{"edited default branch", repoEvent("edited", func(d *eventdoc.Document) {
			d.Repository.FullName, d.Repository.DefaultBranch = "octo-org/hello-universe", "trunk"
		}), state{repos: "1296269:octo-org/hello-universe:false:false:trunk 1296270:octo-org/release-tools:false:true:-"}},
		{"archived", repoEvent("archived", nil), state{repos: "1296269:octo-org/hello-universe:true:false:trunk 1296270:octo-org/release-tools:false:true:-"}},
		{"unarchived", repoEvent("unarchived", nil), state{repos: "1296269:octo-org/hello-universe:false:false:trunk 1296270:octo-org/release-tools:false:true:-"}},
		{"transferred", repoEvent("transferred", func(d *eventdoc.Document) { d.Repository.FullName = "new-owner/hello-world" }),
			state{repos: "1296269:new-owner/hello-world:false:false:trunk 1296270:octo-org/release-tools:false:true:-"}},
		{"suspend", installationEvent("suspend"), state{suspended: true, repos: "1296269:new-owner/hello-world:false:false:trunk 1296270:octo-org/release-tools:false:true:-"}},
		{"unsuspend", installationEvent("unsuspend"), state{repos: "1296269:new-owner/hello-world:false:false:trunk 1296270:octo-org/release-tools:false:true:-"}},
		{"new permissions accepted", installationEvent("new_permissions_accepted"), state{repos: "1296269:new-owner/hello-world:false:false:trunk 1296270:octo-org/release-tools:false:true:-"}},
		{"repository deleted", repoEvent("deleted", nil), state{repos: "1296269:new-owner/hello-world:false:true:trunk 1296270:octo-org/release-tools:false:true:-"}},
		{"installation deleted", installationEvent("deleted"), state{deleted: true, repos: "1296269:new-owner/hello-world:false:true:trunk 1296270:octo-org/release-tools:false:true:-"}},
		{"ping is a no-op", eventdoc.Document{Event: "ping", Ping: &eventdoc.Ping{HookID: 1}}, state{deleted: true, repos: "1296269:new-owner/hello-world:false:true:trunk 1296270:octo-org/release-tools:false:true:-"}},
		{"installation re-created", installationEvent("created", hello), state{repos: "1296269:octo-org/hello-world:false:false:trunk 1296270:octo-org/release-tools:false:true:-"}},
	}
	for _, s := range steps {
		job := b.deliver(s.doc)
		b.drain()
		if st := b.jobStatus(job); st != "completed" {
			t.Fatalf("%s: job %s", s.name, st)
		}
		if got := read(); got != s.want {
			t.Fatalf("%s:\n got %+v\nwant %+v", s.name, got, s.want)
		}
	}
}

// Two installation events received in one order and committed in the other (two lifecycle
// loops, or replicas, each claimed one): the state is the later-received event's, and the older
// one is ignored.
func TestInstallationEventsApplyInReceivedOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		first, second       string // in the order received; committed second, first
		suspended, deleted  bool   // the state after both
		firstOutcomeApplied bool
	}{
		{first: "created", second: "deleted", deleted: true},
		{first: "deleted", second: "created"},
		{first: "suspend", second: "unsuspend"},
		{first: "unsuspend", second: "suspend", suspended: true},
		{first: "created", second: "suspend", suspended: true},
		{first: "new_permissions_accepted", second: "deleted", deleted: true, firstOutcomeApplied: true},
	}
	for _, tt := range tests {
		t.Run(tt.first+" then "+tt.second, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			reg := prometheus.NewRegistry()
			b.metricsRegistry(reg)
			b.deliver(installationEvent("created"))
			b.drain()
			first := b.deliver(installationEvent(tt.first))
			// The first-received job waits while the second is received and committed.
			if _, err := b.pool.Exec(b.ctx, `UPDATE control_plane_jobs SET available_at = now() + interval '1 hour' WHERE id = $1`, first); err != nil {
				t.Fatal(err)
			}
			second := b.deliver(installationEvent(tt.second))
			b.drain()
			if _, err := b.pool.Exec(b.ctx, `UPDATE control_plane_jobs SET available_at = now() WHERE id = $1`, first); err != nil {
				t.Fatal(err)
			}
			b.drain()
			for _, j := range []int64{first, second} {
				if st := b.jobStatus(j); st != "completed" {
					t.Fatalf("job %d %s", j, st)
				}
			}
			var suspended, deleted bool
			if err := b.pool.QueryRow(b.ctx, `SELECT suspended_at IS NOT NULL, deleted_at IS NOT NULL FROM installations WHERE id = $1`,
				installationID).Scan(&suspended, &deleted); err != nil {
				t.Fatal(err)
			}
			if suspended != tt.suspended || deleted != tt.deleted {
				t.Fatalf("suspended %v deleted %v, want %v %v: the older event overwrote the newer", suspended, deleted, tt.suspended, tt.deleted)
			}
			ignored := metricstest.Scrape(t, reg)[metricstest.Key("boardreadyops_lifecycle_jobs_processed_total",
				map[string]string{"kind": "installation", "outcome": "ignored"})]
			if want := map[bool]float64{true: 0, false: 1}[tt.firstOutcomeApplied]; ignored != want {
				t.Fatalf("%v installation jobs ignored, want %v", ignored, want)
			}
		})
	}
}

func TestSuspendedInstallationDeadLettersUndeliveredEffects(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deliver(installationEvent("created"))
	b.deliver(pushTag("v1.0.0", sha))
	b.drain()
	b.deliver(installationEvent("suspend"))
	b.drain()
	var status, lastError string
	if err := b.pool.QueryRow(b.ctx, `SELECT status, last_error FROM control_plane_outbox`).Scan(&status, &lastError); err != nil {
		t.Fatal(err)
	}
	if status != "dead_letter" || !strings.Contains(lastError, "installation suspended") {
		t.Fatalf("effect %s: %q", status, lastError)
	}
	// Nothing new is enqueued while suspended.
	b.deliver(pushTag("v1.0.1", sha))
	b.drain()
	if n := b.count(`SELECT count(*) FROM control_plane_outbox`); n != 1 {
		t.Fatalf("%d effects", n)
	}
}

// One poison job among 1,000 good ones: every good one completes, the poison one is retried and
// finally dead-lettered, and neither a handler error nor a panic disturbs its batch.
func TestPoisonJobIsolation(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"error", "panic"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var poison int64
			// The poison job's repository name breaks a CHECK constraint in "error" mode; in "panic"
			// mode the hook panics for it.
			for i := 0; i < 1000; i++ {
				b.deliver(pushTag(fmt.Sprintf("v1.0.%d", i), sha))
				if i == 500 {
					d := pushTag("v9.9.9", sha)
					d.Repository = &eventdoc.Repository{ID: 42, FullName: "not a valid name"}
					poison = b.deliver(d)
				}
			}
			if mode == "panic" {
				b.withWorker(func(j handler.Job) {
					if j.ID == poison {
						panic("poison")
					}
				})
			}
			b.exec(`UPDATE control_plane_jobs SET max_attempts = 3 WHERE id = $1`, poison)
			for i := 0; i < 3; i++ {
				b.drain()
				b.exec(`UPDATE control_plane_jobs SET available_at = now() WHERE id = $1 AND status = 'available'`, poison)
			}
			if n := b.count(`SELECT count(*) FROM control_plane_jobs WHERE status = 'completed'`); n != 1000 {
				t.Fatalf("%d good jobs completed, want 1000", n)
			}
			if n := b.count(`SELECT count(*) FROM release_runs`); n != 1000 {
				t.Fatalf("%d release runs, want 1000", n)
			}
			var status, lastError string
			var attempts int
			if err := b.pool.QueryRow(b.ctx, `SELECT status, attempts, last_error FROM control_plane_jobs WHERE id = $1`, poison).
				Scan(&status, &attempts, &lastError); err != nil {
				t.Fatal(err)
			}
			if status != "dead_letter" || attempts != 3 || !strings.Contains(lastError, "attempts exhausted") {
				t.Fatalf("poison job %s after %d attempts: %s", status, attempts, lastError)
			}
		})
	}
}

// Two lifecycle workers on one database process every job exactly once.
func TestTwoWorkersProcessEachJobOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 2000
	for i := 0; i < n; i++ {
		b.deliver(pushTag(fmt.Sprintf("v2.%d.0", i), sha))
	}
	first := b.worker
	second := b.withWorker(nil).worker // another process: its own worker id
	ctx, cancel := context.WithCancel(b.ctx)
	var wg sync.WaitGroup
	for _, w := range []*worker.Worker{first, second} {
		wg.Add(1)
		go func(w *worker.Worker) { defer wg.Done(); _ = w.Run(ctx) }(w)
	}
	deadline := time.Now().Add(60 * time.Second)
	for b.count(`SELECT count(*) FROM control_plane_jobs WHERE status = 'completed'`) < n {
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("jobs not processed in time")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if runs, effects, reclaimed := b.count(`SELECT count(*) FROM release_runs`), b.count(`SELECT count(*) FROM control_plane_outbox`),
		b.count(`SELECT count(*) FROM control_plane_jobs WHERE attempts <> 1`); runs != n || effects != n || reclaimed != 0 {
		t.Fatalf("%d runs, %d effects, %d jobs claimed more than once; want %d, %d, 0", runs, effects, reclaimed, n, n)
	}
}

// On shutdown the worker finishes what it claimed: nothing is left leased.
func TestShutdownLeavesNothingLeased(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *worker.Config) { c.BatchSize = 10 })
	for i := 0; i < 300; i++ {
		b.deliver(pushTag(fmt.Sprintf("v3.%d.0", i), sha))
	}
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() { _ = b.worker.Run(ctx); close(done) }()
	for b.count(`SELECT count(*) FROM control_plane_jobs WHERE status = 'completed'`) < 20 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop")
	}
	if n := b.count(`SELECT count(*) FROM control_plane_jobs WHERE status = 'leased'`); n != 0 {
		t.Fatalf("%d jobs left leased after shutdown", n)
	}
	// What was not started is still available for the next worker.
	completed := b.count(`SELECT count(*) FROM control_plane_jobs WHERE status = 'completed'`)
	if available := b.count(`SELECT count(*) FROM control_plane_jobs WHERE status = 'available'`); completed+available != 300 {
		t.Fatalf("%d completed + %d available, want 300", completed, available)
	}
}

// A notification wakes an idle worker long before its poll interval.
func TestNotificationWakesIdleWorker(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *worker.Config) { c.PollInterval = time.Minute })
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	go func() { _ = b.worker.Run(ctx) }()
	time.Sleep(200 * time.Millisecond) // let it LISTEN and go idle
	job := b.deliver(pushTag("v4.0.0", sha))
	b.exec(`SELECT pg_notify('boardreadyops_jobs', '')`) // what ingest's notifier sends after commit
	deadline := time.Now().Add(20 * time.Second)         // far below the one-minute poll
	for b.jobStatus(job) != "completed" {
		if time.Now().After(deadline) {
			t.Fatal("idle worker was not woken by the notification")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A notification wakes one idle loop, not all of them: each woken loop claims, and an empty
// claim is a statement and a transaction for nothing. Four idle loops, one job, one
// notification: the job's claim and the empty claim after it, where waking every loop made five.
func TestNotificationWakesOneLoop(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	idle := func(c *worker.Config) { c.PollInterval, c.Concurrency = time.Minute, 4 }
	b := setup(t, idle)
	b.metricsReg = reg
	b.withWorker(nil, idle)
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	go func() { _ = b.worker.Run(ctx) }()
	claims := func() uint64 { return claimCount(t, reg) }
	// Idle: every loop has made its first, empty claim and sleeps for a minute.
	deadline := time.Now().Add(20 * time.Second)
	for claims() < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("%d claims, want the four loops' first", claims())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // let the loops LISTEN and sleep
	before := claims()
	job := b.deliver(pushTag("v4.1.0", sha))
	b.exec(`SELECT pg_notify('boardreadyops_jobs', '')`)
	for b.jobStatus(job) != "completed" {
		if time.Now().After(deadline) {
			t.Fatal("idle worker was not woken by the notification")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the claim after the job, and any a woken loop would make
	if got := claims() - before; got != 2 {
		t.Fatalf("%d claims for one notification of one job, want 2 (the job's and the empty one after it)", got)
	}
}

// A loop that took a notification's wake-up and cannot claim (the database refuses the claim)
// passes the wake-up on before it backs off for its poll interval, so that the other idle loops
// try at once rather than a minute later: four loops, four failed claims, not one.
func TestFailedClaimPassesTheWakeUpOn(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	idle := func(c *worker.Config) { c.PollInterval, c.Concurrency = time.Minute, 4 }
	b := setup(t, idle)
	b.metricsReg = reg
	b.withWorker(nil, idle)
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	go func() { _ = b.worker.Run(ctx) }()
	claims := func() uint64 { return claimCount(t, reg) }
	deadline := time.Now().Add(20 * time.Second)
	for claims() < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("%d claims, want the four loops' first", claims())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // let the loops LISTEN and sleep
	before := claims()
	b.exec(`ALTER FUNCTION boardreadyops_job_claim(text, integer, interval, timestamptz) RENAME TO boardreadyops_job_claim_gone`)
	b.deliver(pushTag("v4.2.0", sha))
	b.exec(`SELECT pg_notify('boardreadyops_jobs', '')`)
	for claims()-before < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("%d failed claims after one notification, want one per loop", claims()-before)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if got := claims() - before; got != 4 {
		t.Fatalf("%d failed claims after one notification, want 4 (each loop once, then its back-off)", got)
	}
}

// New installations and repositories are recorded before a batch (in id order, committed at
// once), idempotently; a name the schema refuses is skipped, not fatal.
func TestPrepareRecordsNewRepositoriesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	docs := []eventdoc.Document{pushTag("v1.0.0", sha), pushTag("v1.0.1", sha)}
	other := pushTag("v2.0.0", sha)
	other.InstallationID = 77
	other.Repository = &eventdoc.Repository{ID: 5, FullName: "acme/tools", OwnerLogin: "acme", OwnerType: "User"}
	bad := pushTag("v3.0.0", sha)
	bad.Repository = &eventdoc.Repository{ID: 6, FullName: "not a valid name"}
	docs = append(docs, other, bad)
	for i := 0; i < 2; i++ {
		if err := handler.Prepare(b.ctx, b.pool, docs); err != nil {
			t.Fatalf("prepare %d: %v", i, err)
		}
	}
	if n := b.count(`SELECT count(*) FROM repositories`); n != 2 {
		t.Fatalf("%d repositories, want 2", n)
	}
	var accountType string
	if err := b.pool.QueryRow(b.ctx, `SELECT account_type FROM installations WHERE id = 77`).Scan(&accountType); err != nil || accountType != "User" {
		t.Fatalf("installation 77: %q %v", accountType, err)
	}
}

// claimCount is the number of claims (the empty and failed ones too) the worker whose metrics are
// on reg has made.
func claimCount(t *testing.T, reg *prometheus.Registry) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "boardreadyops_lifecycle_claim_duration_seconds" {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}
