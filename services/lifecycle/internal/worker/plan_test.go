package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
	"github.com/boardreadyops/cloud/services/lifecycle/internal/worker"
)

// TestInboxReadIsPlannedForTheTableItReads: the worker reads a batch's inbox rows by primary key
// however small the inbox was when the connection first ran the statement. As a prepared
// statement its plan was cached from the sixth call: a sequential scan, planned while the inbox
// held a page, kept as it grew (auto_explain of a 10,000-run load from an empty database: 444
// buffers per call for 1.6 rows).
func TestInboxReadIsPlannedForTheTableItReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, plans := pgtest.NewPlansPool(t, pgtest.NewPool(t).Config().ConnString(), 1)
	b := &bundle{t: t, ctx: ctx, pool: pool, reg: prometheus.NewRegistry()}
	b.withWorker(nil, func(c *worker.Config) { c.Listen, c.Concurrency = false, 1 })

	// Ten batches of eight jobs while the inbox is a few pages: from its sixth run a cached
	// statement would settle on its generic plan.
	for i := range 10 {
		for k := range 8 {
			b.deliver(workflowRun("completed", int64(500+10*i+k), "success"))
		}
		b.drain()
	}
	// The inbox grows by a few thousand rows (ingest writes them; no job needed here).
	if _, err := pool.Exec(ctx, `INSERT INTO webhook_inbox (delivery_id, event, action, installation_id, repository_id, payload, payload_sha256)
		SELECT 'bulk-' || g, 'push', NULL, 1, 1, jsonb_build_object('pad', repeat('x', 400)), sha256(convert_to('bulk-' || g, 'UTF8'))
		FROM generate_series(1, 5000) g`); err != nil {
		t.Fatal(err)
	}
	// The ten batches' runs match no attempt: each job was deferred by a second or more, and on a
	// slow machine they come due again during the last drain. Settled here, so that it drains
	// only the job it is about.
	if _, err := pool.Exec(ctx, `UPDATE control_plane_jobs SET status = 'completed', completed_at = now(), lease_owner = NULL, lease_expires_at = NULL
		WHERE status <> 'completed'`); err != nil {
		t.Fatal(err)
	}
	plans.Reset()
	b.deliver(workflowRun("completed", 999, "success"))
	if n := b.drain(); n != 1 {
		t.Fatalf("drained %d jobs, want 1", n)
	}
	read, all := plans.Find("FROM webhook_inbox WHERE id = ANY")
	if read == "" {
		t.Fatalf("no plan of the inbox read among %d plans", len(all))
	}
	if strings.Contains(read, "Seq Scan on webhook_inbox") {
		t.Errorf("the inbox read scans the whole inbox:\n%s", read)
	}
}
