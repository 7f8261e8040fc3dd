package pgtest

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Batches records the statements of every pgx batch a pool sends, for tests that assert how
// requests were grouped (one set-based statement, then the ones run alone).
type Batches struct {
	mu      sync.Mutex
	batches [][]string
}

// NewBatchPool is NewPool with every batch it sends recorded.
func NewBatchPool(tb testing.TB) (*pgxpool.Pool, *Batches) {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(NewURL(tb))
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	rec := &Batches{}
	cfg.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("pgtest: connect: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool, rec
}

// Functions lists, batch by batch, the first boardreadyops_ function each statement calls, as
// "[[f g] [h]]" ("set_config" for a setting, "?" for a statement calling neither).
func (b *Batches) Functions() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	parts := make([]string, len(b.batches))
	for i, batch := range b.batches {
		names := make([]string, len(batch))
		for j, sql := range batch {
			names[j] = "?"
			if strings.Contains(sql, "pg_catalog.set_config(") {
				names[j] = "set_config" // a batch's lock_timeout
			}
			if k := strings.Index(sql, "boardreadyops_"); k >= 0 {
				if end := strings.IndexByte(sql[k:], '('); end > 0 {
					names[j] = sql[k : k+end]
				}
			}
		}
		parts[i] = "[" + strings.Join(names, " ") + "]"
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// Reset forgets the batches recorded so far.
func (b *Batches) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.batches = nil
}

// TraceQueryStart implements pgx.QueryTracer (queries outside batches are not recorded).
func (b *Batches) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (b *Batches) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer: a new batch.
func (b *Batches) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	b.mu.Lock()
	b.batches = append(b.batches, nil)
	b.mu.Unlock()
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer: one statement of the current batch.
func (b *Batches) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	b.mu.Lock()
	b.batches[len(b.batches)-1] = append(b.batches[len(b.batches)-1], d.SQL)
	b.mu.Unlock()
}

// TraceBatchEnd implements pgx.BatchTracer.
func (b *Batches) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
