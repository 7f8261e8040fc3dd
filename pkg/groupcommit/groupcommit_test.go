package groupcommit

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/pgtest"
	"github.com/boardreadyops/cloud/pkg/sqlstate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A batch mixing good and stale completions: it fails as a whole, and every completion is then
// run alone, so the good ones commit and the stale one gets its own error.
func TestBatchFallbackGivesExactOutcomes(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
		INSERT INTO installations (id, account_login, account_type) VALUES (1, 'o', 'Organization');
		INSERT INTO repositories (id, installation_id, full_name) VALUES (1, 1, 'o/r');
		SELECT boardreadyops_create_release_run(1, 1, 'refs/tags/v' || g, repeat('a', 40), 'r.yml', 'BoardReadyOps release') FROM generate_series(1, 3) g`); err != nil {
		t.Fatal(err)
	}
	store := &outbox.Store{}
	effects, err := store.Claim(ctx, pool, "w1", 10, time.Minute)
	if err != nil || len(effects) != 3 {
		t.Fatalf("claim: %v %v", effects, err)
	}
	c := New(pool, slog.New(slog.DiscardHandler), 10, 30*time.Second)
	// Queue all three before an executor runs, so they form one batch.
	workers := []string{"w1", "w-stale", "w1"}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, e := range effects {
		wg.Add(1)
		go func(i int, e outbox.Effect) {
			defer wg.Done()
			errs[i] = c.Do(ctx, func(b *pgx.Batch, report func(error)) {
				store.QueueCompleteCheckRunCreate(b, e.ID, workers[i], int64(100+i), func(_ int64, err error) { report(err) })
			})
		}(i, e)
	}
	for len(c.reqs) < 3 {
		time.Sleep(time.Millisecond)
	}
	quit := make(chan struct{})
	close(quit)
	c.Run(quit)
	wg.Wait()
	for i, err := range errs {
		if workers[i] == "w-stale" {
			if !errors.Is(err, sqlstate.ErrLeaseNotHeld) {
				t.Errorf("stale completion: %v, want ErrLeaseNotHeld", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("good completion %d: %v", i, err)
		}
	}
	var completed int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.check_run.create' AND status = 'completed'`).Scan(&completed)
	if completed != 2 {
		t.Fatalf("%d completed, want the 2 good ones", completed)
	}
}
