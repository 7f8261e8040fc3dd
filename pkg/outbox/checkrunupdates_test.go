package outbox_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/boardreadyops/cloud/pkg/outbox"
)

// TestCheckRunUpdatesOfManyRunsInOneCall: boardreadyops_release_run_enqueue_check_runs (migration
// 00055) builds each run's update as the single function does, in one call: one row per run in
// the order given, none for a run without a check run, each run's older unsent update superseded
// by that run's own newer one, and an update a dispatcher holds left to it.
func TestCheckRunUpdatesOfManyRunsInOneCall(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	withCheckRun := func(checkRun int64) run {
		r := createRun(t, ctx, b)
		if checkRun != 0 {
			if _, err := b.pool.Exec(ctx, `UPDATE release_runs SET check_run_id = $2 WHERE id = $1`, r.ID, checkRun); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}
	single := func(r run, state string) int64 {
		t.Helper()
		return enqueueCheckRunUpdate(t, ctx, b, r, state)
	}
	first, none, second, held := withCheckRun(701), withCheckRun(0), withCheckRun(702), withCheckRun(703)
	olderFirst, olderSecond, olderHeld := single(first, "running"), single(second, "running"), single(held, "running")
	// A dispatcher holds held's update.
	if _, err := b.pool.Exec(ctx, `UPDATE control_plane_outbox SET status = 'leased', lease_owner = 'w-old',
		lease_expires_at = now() + interval '1 minute', delivery_started_at = now() WHERE id = $1`, olderHeld); err != nil {
		t.Fatal(err)
	}

	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	rows, err := b.pool.Query(ctx, `SELECT release_run_id::text, outbox_id FROM boardreadyops_release_run_enqueue_check_runs($1, $2, $3, $4, $5)`,
		[]string{first.ID, none.ID, second.ID, held.ID}, []*string{ptr("succeeded"), ptr("running"), ptr("failed"), nil},
		[]*string{nil, nil, ptr("a notice"), nil}, []*string{ptr(traceparent), nil, nil, nil}, b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	updates := map[string]*int64{}
	for rows.Next() {
		var runID string
		var id *int64
		if err := rows.Scan(&runID, &id); err != nil {
			t.Fatal(err)
		}
		order = append(order, runID)
		updates[runID] = id
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{first.ID, none.ID, second.ID, held.ID}; strings.Join(order, ",") != strings.Join(want, ",") {
		t.Fatalf("rows for runs %v, want %v (the order given)", order, want)
	}
	if updates[none.ID] != nil {
		t.Errorf("run without a check run: update %d, want none", *updates[none.ID])
	}
	for _, r := range []run{first, second, held} {
		if updates[r.ID] == nil {
			t.Fatalf("run %s: no update", r.ID)
		}
	}

	// Each older update is superseded by its own run's newer one; the held one is left alone.
	for older, newer := range map[int64]int64{olderFirst: *updates[first.ID], olderSecond: *updates[second.ID]} {
		e := wantStatus(t, ctx, b, older, outbox.StatusCompleted)
		if e.SupersededBy == nil || *e.SupersededBy != newer {
			t.Errorf("update %d superseded by %v, want %d", older, deref(e.SupersededBy), newer)
		}
	}
	wantStatus(t, ctx, b, olderHeld, outbox.StatusLeased)

	for _, c := range []struct {
		r                  run
		checkRun           int64
		state, conclusion  string
		notice, generation string
		traceparent        bool
	}{
		{first, 701, "succeeded", "success", "", ":g1", true},
		{second, 702, "failed", "failure", "a notice", ":g1", false},
		{held, 703, "dispatching", "", "", ":g1", false}, // no state given: the run's own (check_pending)
	} {
		e := mustGet(t, ctx, b, *updates[c.r.ID])
		var p map[string]any
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		got := []any{p["state"], p["check_run_id"], p["release_run_id"], p["execution_attempt_id"], p["attempts_total"]}
		want := []any{c.state, float64(c.checkRun), c.r.ID, c.r.AttemptID, float64(1)}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("run %s update: %v, want %v (payload %s)", c.r.ID, got, want, e.Payload)
				break
			}
		}
		if conclusion, _ := p["conclusion"].(string); conclusion != c.conclusion {
			t.Errorf("run %s update: conclusion %q, want %q", c.r.ID, conclusion, c.conclusion)
		}
		if notice, _ := p["notice"].(string); notice != c.notice {
			t.Errorf("run %s update: notice %q, want %q", c.r.ID, notice, c.notice)
		}
		if !strings.HasSuffix(e.IdempotencyKey, c.r.ID+":"+c.r.AttemptID+c.generation) {
			t.Errorf("run %s update: key %s, want the run's next generation", c.r.ID, e.IdempotencyKey)
		}
		if (e.Traceparent != nil && *e.Traceparent == traceparent) != c.traceparent {
			t.Errorf("run %s update: traceparent %v", c.r.ID, deref(e.Traceparent))
		}
	}

	// A blocked run told without a state: its dead-lettered dispatch's error is the reason, and
	// the update offers Retry.
	blocked := createRun(t, ctx, b)
	dispatch := dispatchFor(t, ctx, b, blocked)
	claimOne(t, ctx, b, "w-dispatch", dispatch)
	if err := b.store.DeadLetter(ctx, b.pool, dispatch, "w-dispatch", "422 workflow file not found"); err != nil {
		t.Fatal(err)
	}
	var status string
	var told int64
	if err := b.pool.QueryRow(ctx, `SELECT (SELECT status FROM release_runs WHERE id = $1),
		(SELECT outbox_id FROM boardreadyops_release_run_enqueue_check_runs(ARRAY[$1::uuid], '{NULL}', '{NULL}', '{NULL}', $2))`,
		blocked.ID, b.clock.Now()).Scan(&status, &told); err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(mustGet(t, ctx, b, told).Payload, &p); err != nil {
		t.Fatal(err)
	}
	if status != "blocked" || p["state"] != "dispatch_failed" || p["reason"] != "422 workflow file not found" || p["retry"] != true ||
		p["conclusion"] != "failure" {
		t.Errorf("blocked run (%s) told as %v", status, p)
	}

	// What the call refuses, as the single function does.
	for _, call := range []struct{ states, want string }{
		{`{running,finished}`, "unknown check run state finished"},
	} {
		_, err := b.pool.Exec(ctx, `SELECT * FROM boardreadyops_release_run_enqueue_check_runs($1, $2, '{NULL,NULL}', '{NULL,NULL}')`,
			[]string{first.ID, second.ID}, call.states)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "22023" || !strings.Contains(pgErr.Message, call.want) {
			t.Errorf("states %s: %v, want SQLSTATE 22023 %q", call.states, err, call.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
