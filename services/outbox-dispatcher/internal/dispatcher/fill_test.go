package dispatcher_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/githubapp"
	"github.com/boardreadyops/cloud/services/outbox-dispatcher/internal/dispatcher"
)

// gatedGitHub holds every check-run creation until the test lets one through.
type gatedGitHub struct {
	dispatcher.NoopGitHub
	gate chan struct{}
}

func (g gatedGitHub) FindOrCreateCheckRun(ctx context.Context, _ githubapp.CheckRun) (int64, bool, error) {
	select {
	case <-g.gate:
		return 1, true, nil
	case <-ctx.Done():
		return 0, false, ctx.Err()
	}
}

// A backlogged dispatcher waits for a whole batch of free slots before it claims again: while
// deliveries finish one by one it does not claim one effect per freed slot.
func TestBackloggedDispatcherClaimsWholeBatches(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const batch, runs = 4, 12
	for i := range runs {
		e.release(9, "octo-org/fill", fmt.Sprintf("v0.%d.0", i))
	}
	gh := gatedGitHub{gate: make(chan struct{})}
	d := newDispatcher(t, e.pool, dispatcher.Config{
		WorkerID: "filler", Concurrency: batch, PerInstallation: batch, BatchSize: batch, ClaimFill: time.Minute,
		Lease: time.Minute, PollInterval: 20 * time.Millisecond, MaxBackoff: time.Second, RecoverInterval: time.Second,
		StatsInterval: time.Second, CheckRunName: "BoardReadyOps release", GitHub: gh,
	})
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	// Let the creations through one at a time, with time in between for a claim of one.
	for range runs {
		select {
		case gh.gate <- struct{}{}:
		case <-time.After(30 * time.Second):
			t.Fatal("no delivery waiting at the gate")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for deadline := time.Now().Add(30 * time.Second); e.count(`SELECT count(*) FROM control_plane_outbox
		WHERE effect_type = 'github.check_run.create' AND status = 'completed'`) < runs; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the creations were not completed")
		}
	}
	// A claim records one delivery start for all the replay-safe effects it leases.
	if claims := e.count(`SELECT count(DISTINCT delivery_started_at) FROM control_plane_outbox WHERE effect_type = 'github.check_run.create'`); claims != runs/batch {
		t.Fatalf("the creations were claimed in %d claims, want %d whole batches", claims, runs/batch)
	}
}
