package webhook_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/retention"
	"github.com/boardreadyops/cloud/services/ingest/internal/webhook"
)

// The replay window survives retention: a captured body resent under a fresh delivery id after
// the retention service has swept (its inbox row and job gone, the digest period not yet over)
// is still a replay and writes nothing, for a stored event and an ignored one. Only a sweep past
// the period forgets the body. A digest deleted too early (with its inbox row, or at the jobs
// period) lets the first replays through.
func TestReplayRefusedInsideItsWindowAfterASweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	rerequest := fixture(t, "check_run.rerequested")
	issues := []byte(`{"action":"opened","issue":{"number":7}}`)
	if status, _, resp := e.send(t, req{event: "check_run", delivery: "original-1", body: rerequest}); status != http.StatusAccepted {
		t.Fatalf("original: %d %v", status, resp)
	}
	if status, _, resp := e.send(t, req{event: "issues", delivery: "issues-1", body: issues}); status != http.StatusAccepted || resp["status"] != "ignored" {
		t.Fatalf("ignored event: %d %v", status, resp)
	}
	// Lifecycle handled the delivery.
	if _, err := e.pool.Exec(ctx, `UPDATE control_plane_jobs SET status = 'completed', completed_at = now()`); err != nil {
		t.Fatal(err)
	}

	const window = 30 * 24 * time.Hour
	periods := retention.Periods{Jobs: 7 * 24 * time.Hour, Digests: window}
	sweepAt := func(at time.Duration) map[string]int64 {
		t.Helper()
		clock := time.Now().Add(at)
		svc, err := retention.New(e.pool, retention.Config{Owner: "test", Periods: periods,
			Store: &retention.Store{Clock: func() time.Time { return clock }}})
		if err != nil {
			t.Fatal(err)
		}
		deleted, err := svc.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return deleted
	}

	// An hour before the window ends: the inbox row (past the jobs period) goes, the digests stay.
	if got := sweepAt(window - time.Hour); got[retention.TableJobs] != 1 || got[retention.TableDigests] != 0 {
		t.Fatalf("sweep inside the window deleted %v, want the job only", got)
	}
	if inbox, jobs := e.rows(t); inbox != 0 || jobs != 0 {
		t.Fatalf("after the sweep: %d inbox rows, %d jobs, want none", inbox, jobs)
	}
	for _, r := range []req{{event: "check_run", delivery: "fresh-id-2", body: rerequest}, {event: "issues", delivery: "issues-2", body: issues}} {
		if status, _, resp := e.send(t, r); status != http.StatusOK || resp["status"] != webhook.ResultDuplicate {
			t.Fatalf("replay of %s inside the window after a sweep: %d %v, want 200 duplicate", r.event, status, resp)
		}
	}
	if inbox, jobs := e.rows(t); inbox != 0 || jobs != 0 {
		t.Fatalf("the replays wrote %d inbox rows and %d jobs", inbox, jobs)
	}
	if n := testutilCount(t, e, webhook.ResultReplayed); n != 2 {
		t.Fatalf("replayed %d, want 2", n)
	}
	// The captured delivery resent unchanged, with its own delivery id (migration 00073): its inbox
	// row is gone, its digest is not. Before, it was stored and run again.
	if status, _, resp := e.send(t, req{event: "check_run", delivery: "original-1", body: rerequest}); status != http.StatusOK || resp["status"] != webhook.ResultDuplicate {
		t.Fatalf("the delivery resent with its own id after the sweep: %d %v, want 200 duplicate", status, resp)
	}
	if inbox, jobs := e.rows(t); inbox != 0 || jobs != 0 {
		t.Fatalf("the delivery resent with its own id wrote %d inbox rows and %d jobs", inbox, jobs)
	}

	// An hour after it: both digests go, and the body is new again (the window is the period).
	if got := sweepAt(window + time.Hour); got[retention.TableDigests] != 2 {
		t.Fatalf("sweep past the window deleted %v, want both digests", got)
	}
	if status, _, resp := e.send(t, req{event: "check_run", delivery: "fresh-id-3", body: rerequest}); status != http.StatusAccepted {
		t.Fatalf("the body after its window: %d %v, want 202 (stored as new)", status, resp)
	}
}
