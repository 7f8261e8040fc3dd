package outbox_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// clock is a settable test clock; the SQL functions take its time instead of now().
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

type bundle struct {
	pool  *pgxpool.Pool
	clock *clock
	store *outbox.Store
}

func setup(t *testing.T) (context.Context, *bundle) {
	t.Helper()
	c := newClock()
	return context.Background(), &bundle{pool: pgtest.NewPool(t), clock: c, store: &outbox.Store{Clock: c.Now}}
}

type run struct {
	ID             string
	AttemptID      string
	InstallationID int64
	RepositoryID   int64
}

func randomID() int64 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint32(b[:])>>1) + 1
}

// createRun inserts an installation, a repository, a release run in check_pending and its pending
// attempt 1, as lifecycle does for a release tag push.
func createRun(t *testing.T, ctx context.Context, b *bundle) run {
	t.Helper()
	r := run{InstallationID: randomID(), RepositoryID: randomID()}
	_, err := b.pool.Exec(ctx, `INSERT INTO installations (id, account_login, account_type) VALUES ($1, 'octo-org', 'Organization')`, r.InstallationID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.pool.Exec(ctx, `INSERT INTO repositories (id, installation_id, full_name) VALUES ($1, $2, $3)`,
		r.RepositoryID, r.InstallationID, fmt.Sprintf("octo-org/repo-%d", r.RepositoryID))
	if err != nil {
		t.Fatal(err)
	}
	err = b.pool.QueryRow(ctx, `INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status)
		VALUES ($1, $2, 'refs/tags/v1.0.0', repeat('a', 40), 'boardreadyops-release.yml', 'check_pending') RETURNING id::text`,
		r.RepositoryID, r.InstallationID).Scan(&r.ID)
	if err != nil {
		t.Fatal(err)
	}
	err = b.pool.QueryRow(ctx, `INSERT INTO execution_attempts (release_run_id, number) VALUES ($1, 1) RETURNING id::text`, r.ID).Scan(&r.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func enqueueCreate(t *testing.T, ctx context.Context, b *bundle, r run) int64 {
	t.Helper()
	id, inserted, err := b.store.Enqueue(ctx, b.pool, outbox.NewEffect{
		EffectType: outbox.EffectCheckRunCreate, ReleaseRunID: r.ID, InstallationID: r.InstallationID,
		Payload: map[string]any{"release_run_id": r.ID, "head_sha": "aaaa"},
	})
	if err != nil || !inserted {
		t.Fatalf("enqueue check run create: id %d inserted %v err %v", id, inserted, err)
	}
	return id
}

// claimOne claims and expects exactly the effect id.
func claimOne(t *testing.T, ctx context.Context, b *bundle, worker string, id int64) outbox.Effect {
	t.Helper()
	claimed, err := b.store.Claim(ctx, b.pool, worker, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Check-run updates the transitions enqueue (migration 00021) are delivered on the way: these
	// tests are about the other effect.
	var got []outbox.Effect
	for _, e := range claimed {
		if e.EffectType == outbox.EffectCheckRunComplete && e.ID != id {
			if err := b.store.CompleteCheckRunComplete(ctx, b.pool, e.ID, worker); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got = append(got, e)
	}
	if len(got) != 1 || got[0].ID != id {
		t.Fatalf("claim by %s: got %d effects %+v, want only %d", worker, len(got), got, id)
	}
	return got[0]
}

// dispatchFor runs the check-run creation to completion and returns the enqueued dispatch id.
func dispatchFor(t *testing.T, ctx context.Context, b *bundle, r run) int64 {
	t.Helper()
	create := enqueueCreate(t, ctx, b, r)
	claimOne(t, ctx, b, "w-setup", create)
	dispatchID, err := b.store.CompleteCheckRunCreate(ctx, b.pool, create, "w-setup", 4242)
	if err != nil || dispatchID == 0 {
		t.Fatalf("complete check run create: dispatch %d err %v", dispatchID, err)
	}
	return dispatchID
}

func mustGet(t *testing.T, ctx context.Context, b *bundle, id int64) outbox.Effect {
	t.Helper()
	e, err := outbox.Get(ctx, b.pool, id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func wantStatus(t *testing.T, ctx context.Context, b *bundle, id int64, status string) outbox.Effect {
	t.Helper()
	e := mustGet(t, ctx, b, id)
	if e.Status != status {
		t.Fatalf("effect %d: status %s, want %s (last error %v)", id, e.Status, status, deref(e.LastError))
	}
	return e
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// runWithCheckRun creates a release run whose check run exists (id 555) and returns a function
// that enqueues its next check-run update in a state (boardreadyops_release_run_enqueue_check_run,
// each superseding any not sent yet) and returns the update's id.
func runWithCheckRun(t *testing.T, ctx context.Context, b *bundle) func(state string) int64 {
	t.Helper()
	r := createRun(t, ctx, b)
	if _, err := b.pool.Exec(ctx, `UPDATE release_runs SET check_run_id = 555 WHERE id = $1`, r.ID); err != nil {
		t.Fatal(err)
	}
	return func(state string) int64 {
		t.Helper()
		return enqueueCheckRunUpdate(t, ctx, b, r, state)
	}
}

// enqueueCheckRunUpdate enqueues run r's next check-run update in a state and returns its id.
func enqueueCheckRunUpdate(t *testing.T, ctx context.Context, b *bundle, r run, state string) int64 {
	t.Helper()
	var id int64
	if err := b.pool.QueryRow(ctx, `SELECT boardreadyops_release_run_enqueue_check_run($1, $2, NULL, NULL, $3)`,
		r.ID, state, b.clock.Now()).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
