package dispatcher_test

import (
	"strings"
	"testing"
	"time"
)

// TestDispatchPause: while workflow dispatches are paused (globally, or for one installation)
// the claim passes over them — check runs are still created, a later release's included — and
// nothing reaches GitHub's dispatch endpoint; once resumed, each is dispatched exactly once.
func TestDispatchPause(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		installation any // NULL: every installation
	}{
		{"global", nil},
		{"installation", int64(55501)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			paused := e.release(55501, "octo-org/hello-world", "v1.0.0")
			var other string
			if tt.installation != nil {
				other = e.release(55502, "other-org/tool", "v2.0.0") // another installation: not paused
			}
			if _, err := e.pool.Exec(e.ctx, `SELECT boardreadyops_outbox_pause_dispatches($1, 'alice', 'GitHub incident')`, tt.installation); err != nil {
				t.Fatal(err)
			}
			d := e.dispatcher(10 * time.Second)
			e.runUntil(d, func() bool { return e.statuses()["github.check_run.create/completed"] >= 1 })
			// A release created after the paused dispatch became due: its check run being created
			// proves the claims passed over the dispatch, not that they had not reached it yet.
			later := e.release(55501, "octo-org/hello-world", "v1.0.1")
			// Lifecycle records the pause's reason in the creation payload (create_from_push).
			if _, err := e.pool.Exec(e.ctx, `UPDATE control_plane_outbox SET payload = payload || '{"dispatch_paused": "GitHub incident"}'
				WHERE release_run_id = $1`, later); err != nil {
				t.Fatal(err)
			}
			e.runUntil(d, func() bool {
				return e.count(`SELECT count(*) FROM release_runs WHERE id = $1 AND check_run_id IS NOT NULL`, later) == 1 &&
					(other == "" || e.count(`SELECT count(*) FROM release_runs WHERE id = $1 AND status = 'running'`, other) == 1)
			})
			if n := e.count(`SELECT count(*) FROM control_plane_outbox o JOIN release_runs r ON r.id = o.release_run_id
				WHERE r.installation_id = 55501 AND o.effect_type = 'github.workflow.dispatch' AND o.status = 'available' AND o.attempts = 0`); n != 2 {
				t.Fatalf("%d paused dispatches waiting with no attempt spent, want 2 (%v)", n, e.statuses())
			}
			want := 0
			if other != "" {
				want = 1
			}
			if n := e.sim.DispatchTotal(); n != want {
				t.Fatalf("%d dispatches reached GitHub while paused, want %d", n, want)
			}
			// The release whose creation payload named the pause is not told again; the one created
			// before the pause is told once its check run exists.
			if n := e.count(`SELECT count(*) FROM control_plane_outbox WHERE release_run_id = $1 AND effect_type = 'github.check_run.complete'`, later); n != 0 {
				t.Fatalf("%d check-run updates for a check run created saying the release is paused", n)
			}
			if n := e.count(`SELECT count(*) FROM control_plane_outbox WHERE release_run_id = $1 AND effect_type = 'github.check_run.complete'
				AND payload->>'notice' LIKE 'The release is paused: %'`, paused); n != 1 {
				t.Fatalf("%d pause notices for the release created before the pause, want 1", n)
			}
			if crs := e.checkRuns(later); len(crs) != 1 || crs[0].Output.Summary == nil ||
				!strings.Contains(*crs[0].Output.Summary, "The release is paused: an operator paused workflow dispatches (GitHub incident)") {
				t.Fatalf("the paused release's check run: %+v", crs)
			}
			var reason string
			if err := e.pool.QueryRow(e.ctx, `SELECT boardreadyops_outbox_dispatch_pause_reason(55501)`).Scan(&reason); err != nil || reason != "GitHub incident" {
				t.Fatalf("pause reason %q (%v)", reason, err)
			}

			if _, err := e.pool.Exec(e.ctx, `SELECT boardreadyops_outbox_resume_dispatches($1, 'alice', 'incident over')`, tt.installation); err != nil {
				t.Fatal(err)
			}
			e.runUntil(d, func() bool {
				return e.count(`SELECT count(*) FROM release_runs WHERE id IN ($1, $2) AND status = 'running'`, paused, later) == 2
			})
			for _, run := range []string{paused, later} {
				var attempt string
				if err := e.pool.QueryRow(e.ctx, `SELECT id::text FROM execution_attempts WHERE release_run_id = $1`, run).Scan(&attempt); err != nil {
					t.Fatal(err)
				}
				if n := e.sim.Dispatches(attempt); n != 1 {
					t.Fatalf("run %s dispatched %d times after the resume, want once", run, n)
				}
			}
		})
	}
}

// TestDispatchPauseTellsExistingCheckRuns: a release created before a pause whose check run is
// created during it is told once the check run exists (00030: its creation payload predates the
// pause); a release waiting for its dispatch with its check run created is told when a pause
// begins or changes its reason (00028), and again when dispatches resume; a resume of one
// installation under a global pause tells nothing; the dispatch is then sent once.
func TestDispatchPauseTellsExistingCheckRuns(t *testing.T) {
	t.Parallel()
	e := setup(t)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := e.pool.Exec(e.ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	run := e.release(55501, "octo-org/hello-world", "v1.0.0")
	// The pause begins before the dispatch: the run gets its check run and waits, dispatching.
	exec(`SELECT boardreadyops_outbox_pause_dispatches(NULL, 'alice', 'GitHub incident')`)
	d := e.dispatcher(10 * time.Second)
	summary := func() string {
		t.Helper()
		crs := e.checkRuns(run)
		if len(crs) != 1 || crs[0].Output.Summary == nil {
			t.Fatalf("check runs of the release: %+v", crs)
		}
		return *crs[0].Output.Summary
	}
	// Created after the pause began, from a creation payload that predates it: told at once.
	e.runUntil(d, func() bool {
		return e.statuses()["github.check_run.create/completed"] == 1 && e.statuses()["github.check_run.complete/completed"] == 1
	})
	if s := summary(); !strings.Contains(s, "The release is paused: an operator paused workflow dispatches (GitHub incident)") {
		t.Fatalf("the check run created during the pause says:\n%s", s)
	}

	exec(`SELECT boardreadyops_outbox_pause_dispatches(NULL, 'alice', 'GitHub Actions incident 42')`)
	e.runUntil(d, func() bool { return e.statuses()["github.check_run.complete/completed"] == 2 })
	if s := summary(); !strings.Contains(s, "The release is paused: an operator paused workflow dispatches (GitHub Actions incident 42)") {
		t.Fatalf("after the pause the check run says:\n%s", s)
	}
	// Installation 55501 paused and resumed while the global pause holds it: the resume tells
	// nothing.
	exec(`SELECT boardreadyops_outbox_pause_dispatches(55501, 'alice', 'noisy')`)
	e.runUntil(d, func() bool { return e.statuses()["github.check_run.complete/completed"] == 3 })
	exec(`SELECT boardreadyops_outbox_resume_dispatches(55501, 'alice', 'quiet again')`)
	if n := e.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.check_run.complete' AND status = 'available'`); n != 0 {
		t.Fatalf("%d check-run updates for a run the global pause still holds, want 0", n)
	}

	exec(`SELECT boardreadyops_outbox_resume_dispatches(NULL, 'alice', 'incident over')`)
	e.runUntil(d, func() bool {
		return e.count(`SELECT count(*) FROM release_runs WHERE id = $1 AND status = 'running'`, run) == 1
	})
	var attempt string
	if err := e.pool.QueryRow(e.ctx, `SELECT id::text FROM execution_attempts WHERE release_run_id = $1`, run).Scan(&attempt); err != nil {
		t.Fatal(err)
	}
	if n := e.sim.Dispatches(attempt); n != 1 {
		t.Fatalf("dispatched %d times, want once", n)
	}
	// The resumption was told (or already superseded by the running update), never the pause.
	var told int
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM control_plane_outbox WHERE release_run_id = $1
		AND effect_type = 'github.check_run.complete' AND payload->>'notice' LIKE 'Workflow dispatches resumed%'`, run).Scan(&told); err != nil || told != 1 {
		t.Fatalf("%d resumption updates (%v), want 1", told, err)
	}
	if s := summary(); strings.Contains(s, "The release is paused") {
		t.Fatalf("after the resume the check run says:\n%s", s)
	}
}
