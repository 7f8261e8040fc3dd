package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestStuckEffects: a burst that leaves effects needing an operator names them, with their last
// error, in its own output.
func TestStuckEffects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	stuckFixture(t, pool)
	got, err := stuckEffects(ctx, pool, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.Contains(got[0], "github.check_run.create dead_letter, attempt 10: 502 bad gateway") {
		t.Errorf("stuck effects %q, want the dead letter with its error", got)
	}
	// A load that times out says what it left open.
	open := openEffects(pool)
	for _, want := range []string{"runs check_pending 2", "effects github.check_run.create available 1",
		"oldest open: ", "github.check_run.create available, attempt 0", "lease until none: no error recorded"} {
		if !strings.Contains(open, want) {
			t.Errorf("open effects %q, want %q in it", open, want)
		}
	}
}

// stuckFixture leaves two release runs waiting for their check runs: one's creation dead-lettered
// (502 bad gateway), the other's still available.
func stuckFixture(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
		INSERT INTO installations (id, account_login, account_type) VALUES (1, 'org-1', 'Organization');
		INSERT INTO repositories (id, installation_id, full_name) VALUES (1, 1, 'org-1/repo-1');
		WITH s(tag, status, attempts, last_error) AS (VALUES ('v1', 'dead_letter', 10, '502 bad gateway'), ('v2', 'available', 0, NULL)),
		r AS (
			INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status)
			SELECT 1, 1, 'refs/tags/' || tag, repeat('a', 40), 'release.yml', 'check_pending' FROM s RETURNING id, ref
		)
		INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, release_run_id, installation_id, status, attempts, last_error)
		SELECT 'github.check_run.create', 'github.check_run.create:' || r.id, '{}', r.id, 1, s.status, s.attempts, s.last_error
		FROM r JOIN s ON r.ref = 'refs/tags/' || s.tag`); err != nil {
		t.Fatal(err)
	}
}

// TestWaitFinished: the wait for a burst's end returns once every run is finished and no effect
// is open, and otherwise gives up, naming what is left open, at the timeout or when no run has
// finished for the stall period.
func TestWaitFinished(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		stuck   bool
		cancel  bool
		wantErr string // "" for none
	}{
		{"nothing left", false, false, ""},
		{"a run that stopped moving", true, false, "not finished, no run finished for 300ms: 0 of 2 release runs terminal, 0 blocked, 1 effects open (runs check_pending 2"},
		{"the timeout", true, true, "not finished, the timeout: 0 of 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := pgtest.NewPool(t)
			want := 0
			if tt.stuck {
				stuckFixture(t, pool)
				want = 2
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				cancel()
			}
			stall := 300 * time.Millisecond
			if tt.cancel {
				stall = time.Hour
			}
			err := waitFinished(ctx, pool, want, time.Now(), stall, 20*time.Millisecond)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("waitFinished: %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}
