package dispatcher_test

import (
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/githubapp"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
	"github.com/boardreadyops/cloud/services/outbox-dispatcher/internal/dispatcher"
)

// A check run's creation whose lease expires while it is out is made once. The claim waits 2 s of
// a 4 s lease for a lock, so its leases start 2 s before the delivery does:
//   - GitHub never answers: the worker gives the request up when the lease ends, counted from
//     before the claim (before: from the delivery's start, 2 s after the lease had expired and
//     lease recovery had handed the effect to another worker);
//   - GitHub answers after 3 s, and makes the check run even though the worker gave up: lease
//     recovery returns the creation to the queue 15 s later (migration 00089), and its search finds
//     that check run (before: at once, and the search ran before GitHub had made it, so the
//     release got a second check run).
func TestCheckRunCreationOutlivingItsLeaseIsMadeOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		fault githubsim.Fault
	}{
		{"never answered: given up when the lease ends", githubsim.Fault{Hang: true}},
		{"made after the worker gave up: found, not made again", githubsim.Fault{Latency: 3 * time.Second, Committed: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			gh, err := githubapp.New(githubapp.Config{AppID: appID, PrivateKey: e.key, BaseURL: e.apiURL, Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			run := e.release(62001, "octo-org/slow-claim", "v1.0.0")
			tt.fault.Operation, tt.fault.Times = githubsim.OpCreateCheckRun, 1
			e.sim.AddFault(tt.fault)
			lock, err := e.pool.Begin(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = lock.Rollback(e.ctx) }()
			if _, err := lock.Exec(e.ctx, `LOCK TABLE control_plane_outbox IN SHARE MODE`); err != nil {
				t.Fatal(err)
			}
			d := e.build(4*time.Second, func(*dispatcher.Config) {}, e.pool, gh)
			go func() {
				time.Sleep(2 * time.Second)
				_ = lock.Commit(e.ctx)
			}()
			var leaseEnd time.Time
			e.runUntil(d, func() bool {
				if leaseEnd.IsZero() {
					_ = e.pool.QueryRow(e.ctx, `SELECT lease_expires_at FROM control_plane_outbox WHERE status = 'leased'`).Scan(&leaseEnd)
				}
				return e.statuses()["github.workflow.dispatch/completed"] == 1
			})
			time.Sleep(tt.fault.Latency) // a creation still being made lands within its latency
			if crs := e.checkRuns(run); len(crs) != 1 {
				t.Fatalf("%d check runs for the release, want 1", len(crs))
			}
			first := time.Time{}
			for _, j := range e.sim.Journal() {
				if j.Operation == githubsim.OpCreateCheckRun && (first.IsZero() || j.Time.Before(first)) {
					first = j.Time
				}
			}
			// The simulator journals a request when it ends: a hung one when the client gives up.
			if tt.fault.Hang && first.After(leaseEnd.Add(500*time.Millisecond)) {
				t.Fatalf("the hung creation was given up at %v, %v after its lease expired at %v", first, first.Sub(leaseEnd), leaseEnd)
			}
		})
	}
}
