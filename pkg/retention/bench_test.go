package retention_test

import (
	"context"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/retention"
)

// BenchmarkDeleteJobsBatch deletes 1,000-row batches of expired completed jobs (with their inbox
// rows) from 200,000 jobs, the size at which the jobs half of the older sweep took 325 ms per
// batch (a sequential scan and an external sort). go test -run - -bench DeleteJobsBatch -benchtime 50x
func BenchmarkDeleteJobsBatch(b *testing.B) {
	ctx := context.Background()
	r, s := newRows(b)
	r.exec(`WITH i AS (
			INSERT INTO webhook_inbox (delivery_id, event, payload, payload_sha256, received_at)
			SELECT 'bulk-' || g, 'push', '{"ref":"refs/heads/main"}', sha256('x'::bytea), $1::timestamptz - g * interval '1 second'
			FROM generate_series(1, 200000) g RETURNING id, received_at
		)
		INSERT INTO control_plane_jobs (kind, inbox_id, status, completed_at)
		SELECT 'push', id, CASE WHEN id % 10 = 0 THEN 'available' ELSE 'completed' END,
		       CASE WHEN id % 10 <> 0 THEN received_at - interval '8 days' END FROM i`, now)
	r.exec(`VACUUM ANALYZE`)
	if _, err := s.Acquire(ctx, r.pool, "bench", time.Hour); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if n, err := s.Delete(ctx, r.pool, retention.TableJobs, "bench", 7*day, 1000); err != nil || n != 1000 {
			b.Fatalf("deleted %d, %v", n, err)
		}
	}
}
