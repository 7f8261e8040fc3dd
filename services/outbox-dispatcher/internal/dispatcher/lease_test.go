package dispatcher_test

import (
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/githubapp"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
	"github.com/boardreadyops/cloud/services/outbox-dispatcher/internal/dispatcher"
)

// A check run's creation that outlives its worker's patience is made once. In the first two
// cases the claim waits 2 s of a 6 s lease for a lock, so its leases start 2 s before the
// delivery (which still has more than half the lease: a delivery with less is given back unsent):
//   - GitHub never answers: the worker gives the request up when the lease ends, counted from
//     before the claim (before: from the delivery's start, 2 s after the lease had expired and
//     lease recovery had handed the effect to another worker);
//   - GitHub makes the check run 6 s after it was asked, though the worker gave up at the lease's
//     end: lease recovery returns the
//     creation to the queue 15 s later (migration 00089), and its search finds that check run
//     (before: at once, and the search ran before GitHub had made it: a second check run);
//   - no lock, and the client's own timeout (1 s) gives up on a creation GitHub makes 5 s later:
//     the retry waits 15 s too (CreationSettles; before: its backoff, 2 s);
//   - the claim waits 4 s of the 6 s lease: too little is left for a 3 s answer, so the effect is
//     given back unsent, without spending an attempt, and the next claim delivers it whole.
func TestCheckRunCreationOutlivingItsLeaseIsMadeOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		fault         githubsim.Fault
		lockClaim     time.Duration
		clientTimeout time.Duration
	}{
		{"never answered: given up when the lease ends", githubsim.Fault{Hang: true}, 2 * time.Second, 10 * time.Second},
		{"made after the lease ended: found, not made again", githubsim.Fault{Latency: 6 * time.Second, Committed: true}, 2 * time.Second, 10 * time.Second},
		{"made after the client timed out: found, not made again", githubsim.Fault{Latency: 5 * time.Second, Committed: true}, 0, time.Second},
		{"too little of the lease left: given back unsent", githubsim.Fault{Latency: 3 * time.Second}, 4 * time.Second, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			gh, err := githubapp.New(githubapp.Config{AppID: appID, PrivateKey: e.key, BaseURL: e.apiURL, Timeout: tt.clientTimeout})
			if err != nil {
				t.Fatal(err)
			}
			run := e.release(62001, "octo-org/slow-claim", "v1.0.0")
			tt.fault.Operation, tt.fault.Times = githubsim.OpCreateCheckRun, 1
			e.sim.AddFault(tt.fault)
			if tt.lockClaim > 0 {
				lock, err := e.pool.Begin(e.ctx)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := lock.Exec(e.ctx, `LOCK TABLE control_plane_outbox IN SHARE MODE`); err != nil {
					_ = lock.Rollback(e.ctx)
					t.Fatal(err)
				}
				committed := make(chan struct{})
				go func() {
					defer close(committed)
					// Counted from when the claim starts waiting, which is when its leases start.
					for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
						var waiting int
						_ = e.pool.QueryRow(e.ctx, `SELECT count(*) FROM pg_stat_activity
							WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%outbox_claim%'`).Scan(&waiting)
						if waiting > 0 {
							break
						}
					}
					time.Sleep(tt.lockClaim)
					_ = lock.Commit(e.ctx)
				}()
				defer func() { <-committed }()
			}
			d := e.build(6*time.Second, func(*dispatcher.Config) {}, e.pool, gh)
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
			if n := e.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.check_run.create' AND attempts <> 1`); n != 0 && !tt.fault.Committed && !tt.fault.Hang {
				t.Fatal("the creation took more than one attempt: given back with too little of its lease, it was not")
			}
			// The simulator journals a request when it ends: a hung one when the client gives up.
			if tt.fault.Hang && first.After(leaseEnd.Add(time.Second)) {
				t.Fatalf("the hung creation was given up at %v, %v after its lease expired at %v", first, first.Sub(leaseEnd), leaseEnd)
			}
		})
	}
}
