package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
	"github.com/boardreadyops/cloud/schema"
)

// The restore fence moves the workflow dispatches that may have been sent after the restore point
// (every undelivered one, however old) to reconciliation_required with an audit row each, leaves
// check-run effects alone, and prints the redelivery command for the window.
func TestRestoreFence(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	o.dispatch("dead_letter")
	leased, _, _ := o.dispatch("")
	available, _, _ := o.dispatch("")
	if err := o.st.Release(o.ctx, o.pool, available, "w"); err != nil {
		t.Fatal(err)
	}
	old, _, _ := o.dispatch("")
	if err := o.st.Release(o.ctx, o.pool, old, "w"); err != nil {
		t.Fatal(err)
	}
	// Created hours before the restore point and still waiting at it, due later (a retry's
	// backoff or a rate-limit block): the oldest-available-effect gauge shows no age for it, and
	// the old deployment may have sent it after the restore point all the same (00066).
	if _, err := o.pool.Exec(o.ctx, `UPDATE control_plane_outbox SET created_at = now() - interval '3 hours',
		available_at = now() + interval '5 minutes' WHERE id = $1`, old); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)

	for _, bad := range [][]string{{"restore", "fence"}, {"restore", "fence", "--since", "yesterday"}} {
		if code, _, _ := run(t, o.env, bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", bad, code)
		}
	}
	code, out, errOut := run(t, o.env, "restore", "fence", "--since", since, "--margin", "10m", "-o", "json")
	if code != 0 {
		t.Fatalf("fence: exit %d %s %s", code, out, errOut)
	}
	var res struct {
		Fenced []struct {
			ID         int64  `json:"id"`
			FromStatus string `json:"from_status"`
		} `json:"fenced"`
		DeadLetters int    `json:"dead_letter_dispatches"`
		Redeliver   string `json:"redeliver_command"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// A dead letter is left as it is, and counted: one replayed after the restore point may have
	// been sent, so it needs a look on GitHub before any replay.
	if res.DeadLetters != 1 {
		t.Errorf("%d dead-lettered dispatches reported, want 1", res.DeadLetters)
	}
	got := map[int64]string{}
	for _, f := range res.Fenced {
		got[f.ID] = f.FromStatus
	}
	if len(got) != 3 || got[leased] != "leased" || got[available] != "available" || got[old] != "available" {
		t.Fatalf("fenced %v, want %d (leased), %d and %d (available)", got, leased, available, old)
	}
	// The window as a fixed time, the restore point less the margin: run again later, the
	// command still starts there (a period would slide past the restore point).
	at, _ := time.Parse(time.RFC3339, since)
	if want := "brops webhooks redeliver --include-delivered --since " + at.Add(-10*time.Minute).Format(time.RFC3339); res.Redeliver != want {
		t.Errorf("redeliver command %q, want %q", res.Redeliver, want)
	}
	for id, want := range map[int64]string{leased: outbox.StatusReconciliationRequired, available: outbox.StatusReconciliationRequired, old: outbox.StatusReconciliationRequired} {
		if s := o.status(id); s != want {
			t.Errorf("effect %d is %s, want %s", id, s, want)
		}
	}
	var audits int
	if err := o.pool.QueryRow(o.ctx, `SELECT count(*) FROM control_plane_audit WHERE action = 'outbox.restore_fence' AND operator = 'alice'
		AND to_status = 'reconciliation_required' AND subject_id = ANY($1)`, []int64{leased, available, old}).Scan(&audits); err != nil || audits != 3 {
		t.Fatalf("%d audit rows, %v; want 3", audits, err)
	}
	// The table output says what to do next; a second run fences nothing.
	code, out, _ = run(t, o.env, "restore", "fence", "--since", since)
	if code != 0 || !strings.Contains(out, "0 workflow dispatches") || !strings.Contains(out, "brops webhooks redeliver --include-delivered --since") ||
		!strings.Contains(out, "1 workflow dispatches are dead letters") {
		t.Fatalf("second fence: exit %d\n%s", code, out)
	}
	// A restore point beyond GitHub's three days of deliveries: the command covers what is left.
	code, out, _ = run(t, o.env, "restore", "fence", "--since", time.Now().Add(-100*time.Hour).UTC().Format(time.RFC3339), "-o", "json")
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.Redeliver != "brops webhooks redeliver --include-delivered --since 72h" {
		t.Fatalf("fence 100 hours back: exit %d, %v, %q", code, err, res.Redeliver)
	}
}

// While the fence's hold is open a new first-generation dispatch is created in
// reconciliation_required; brops restore close refuses while a check-run creation, which would
// enqueue one, is pending; after the close a dispatch is created available again.
func TestRestoreFenceHoldsNewDispatches(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	// A check-run creation dead-lettered before the fence (some never clear): the fence reports
	// dead letters, the close does not wait for them.
	if err := o.st.DeadLetter(o.ctx, o.pool, o.claimFor(o.createRun(), outbox.EffectCheckRunCreate), "w", "github create_check_run: rejected (HTTP 422)"); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run(t, o.env, "restore", "fence", "--since", time.Now().UTC().Format(time.RFC3339)); code != 0 {
		t.Fatalf("fence: %d %s %s", code, out, errOut)
	}
	held, _ := o.enqueueDispatch()
	if s := o.status(held); s != outbox.StatusReconciliationRequired {
		t.Fatalf("dispatch created during the hold is %s", s)
	}
	// A check-run creation still pending: closed now, the dispatch it enqueues would go out
	// unheld. The close refuses and the hold stays.
	pending := o.createRun()
	if code, out, errOut := run(t, o.env, "restore", "close", "--wait", "0s"); code != 1 ||
		!strings.Contains(errOut, "not closed: 0 push, check_run or check_suite jobs and 1 check-run creations or permission reads") {
		t.Fatalf("close with a creation pending: %d %s %s", code, out, errOut)
	}
	// A redelivered check_run event (a re-run requested before the restore point) or check_suite
	// event ("Re-run all checks") still pending: it would start an attempt and enqueue its
	// dispatch after the close.
	for _, kind := range []string{"check_run", "check_suite"} {
		var job int64
		if err := o.pool.QueryRow(o.ctx, `WITH i AS (INSERT INTO webhook_inbox (delivery_id, event, payload, payload_sha256)
			VALUES ('rerequested-' || $1, $1, '{}', sha256('x'::bytea)) RETURNING id)
			INSERT INTO control_plane_jobs (kind, inbox_id) SELECT $1, id FROM i RETURNING id`, kind).Scan(&job); err != nil {
			t.Fatal(err)
		}
		if code, out, errOut := run(t, o.env, "restore", "close", "--wait", "0s"); code != 1 ||
			!strings.Contains(errOut, "not closed: 1 push, check_run or check_suite jobs and 1 check-run creations or permission reads") {
			t.Fatalf("close with a %s job pending: %d %s %s", kind, code, out, errOut)
		}
		if _, err := o.pool.Exec(o.ctx, `DELETE FROM control_plane_jobs WHERE id = $1`, job); err != nil {
			t.Fatal(err)
		}
	}
	late, err := o.st.CompleteCheckRunCreate(o.ctx, o.pool, o.claimFor(pending, outbox.EffectCheckRunCreate), "w", 4002)
	if err != nil {
		t.Fatal(err)
	}
	if s := o.status(late); s != outbox.StatusReconciliationRequired {
		t.Fatalf("dispatch enqueued after the refused close is %s, want held", s)
	}
	if code, out, _ := run(t, o.env, "restore", "close"); code != 0 || !strings.Contains(out, "1 restore fence holds closed") {
		t.Fatalf("close: %d %s", code, out)
	}
	free, _ := o.enqueueDispatch()
	if s := o.status(free); s != outbox.StatusAvailable {
		t.Fatalf("dispatch created after the hold is %s, want available", s)
	}
	// With no hold open there is nothing to wait for, pending work or not.
	o.createRun()
	if code, out, errOut := run(t, o.env, "restore", "close", "--wait", "0s"); code != 0 || !strings.Contains(out, "0 restore fence holds closed") {
		t.Fatalf("close with no hold open: %d %s %s", code, out, errOut)
	}
	// --force closes with work pending.
	if code, out, errOut := run(t, o.env, "restore", "fence", "--since", time.Now().UTC().Format(time.RFC3339)); code != 0 {
		t.Fatalf("fence: %d %s %s", code, out, errOut)
	}
	o.createRun()
	if code, out, errOut := run(t, o.env, "restore", "close", "--force"); code != 0 || !strings.Contains(out, "1 restore fence holds closed") {
		t.Fatalf("close --force: %d %s %s", code, out, errOut)
	}
}

// While the fence's hold is open, a dead-lettered workflow dispatch replayed (by an operator, or by
// a redelivered Retry press) may be one the old deployment replayed and sent after the restore
// point: it goes to reconciliation_required with the fence's window as its delivery start, and its
// run stays blocked. After the close a replay makes it available again (00067).
func TestRestoreFenceHoldsReplayedDispatches(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	held, heldRun, _ := o.dispatch("dead_letter")
	free, _, _ := o.dispatch("dead_letter")
	since := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	if code, out, errOut := run(t, o.env, "restore", "fence", "--since", since.Format(time.RFC3339), "--margin", "5m"); code != 0 {
		t.Fatalf("fence: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := run(t, o.env, "outbox", "replay", strconv.FormatInt(held, 10), "--reason", "press Retry again"); code != 0 ||
		!strings.Contains(out, "reconciliation_required") || !strings.Contains(out, "restore fence") {
		t.Fatalf("replay while held: %d %s %s; want it shown as held for reconciliation", code, out, errOut)
	}
	e, err := outbox.Get(o.ctx, o.pool, held)
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != outbox.StatusReconciliationRequired || e.DeliveryStartedAt == nil || !e.DeliveryStartedAt.Equal(since.Add(-5*time.Minute)) {
		t.Fatalf("dispatch replayed while held: %s, delivery started %v; want reconciliation_required from %v", e.Status, e.DeliveryStartedAt, since.Add(-5*time.Minute))
	}
	var runStatus, audited string
	if err := o.pool.QueryRow(o.ctx, `SELECT status FROM release_runs WHERE id = $1`, heldRun).Scan(&runStatus); err != nil || runStatus != "blocked" {
		t.Fatalf("run of the held replay is %s (%v), want blocked", runStatus, err)
	}
	if err := o.pool.QueryRow(o.ctx, `SELECT to_status FROM control_plane_audit WHERE action = 'outbox.replay' AND subject_id = $1`, held).Scan(&audited); err != nil ||
		audited != outbox.StatusReconciliationRequired {
		t.Fatalf("replay audited to %q (%v)", audited, err)
	}
	if code, out, errOut := run(t, o.env, "restore", "close", "--force"); code != 0 {
		t.Fatalf("close: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := run(t, o.env, "outbox", "replay", strconv.FormatInt(free, 10), "--reason", "after the close"); code != 0 || o.status(free) != outbox.StatusAvailable {
		t.Fatalf("replay after the close: %d %s %s, status %s", code, out, errOut, o.status(free))
	}
}

// A backup taken before an upgrade restores the older schema and its older fence function, which
// lacks later fixes. The fence refuses such a database, fencing nothing and opening no hold, until
// brops migrate up has brought it to this binary's version; then it fences.
func TestRestoreFenceRefusesAnOlderSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewEmptyURL(t)
	migrator := map[string]string{"DATABASE_URL": url}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	latest := schema.ExpectedVersion()
	since := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	var admin map[string]string // the runbook's user, created once its role's schema is there
	fences := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM restore_fences`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	tests := []struct {
		version int64
		why     string
	}{
		{65, "before 00066 its fence left dispatches created before the window available"},
		{66, "before 00067 a dispatch replayed during the hold was not held"},
		{latest - 1, "one migration behind"},
	}
	for _, tt := range tests {
		if code, _, errOut := run(t, migrator, "migrate", "up", "--to", strconv.FormatInt(tt.version, 10)); code != 0 {
			t.Fatalf("migrate up --to %d: %d %s", tt.version, code, errOut)
		}
		if admin == nil {
			admin = map[string]string{"DATABASE_URL": pgtest.NewLogin(t, url, "boardreadyops_admin"), "BOARDREADYOPS_OPERATOR": "alice"}
		}
		code, out, errOut := run(t, admin, "restore", "fence", "--since", since)
		if want := fmt.Sprintf("at version %d, need %d", tt.version, latest); code != 1 || !strings.Contains(errOut, want) ||
			!strings.Contains(errOut, "Run brops migrate up first") {
			t.Errorf("fence at version %d (%s): exit %d, stderr %q, stdout %q; want 1 and %q, run brops migrate up first", tt.version, tt.why, code, errOut, out, want)
		}
		if n := fences(); n != 0 {
			t.Fatalf("fence at version %d (%s): %d restore fences opened, want none", tt.version, tt.why, n)
		}
	}
	if code, _, errOut := run(t, migrator, "migrate", "up"); code != 0 {
		t.Fatalf("migrate up: %d %s", code, errOut)
	}
	if code, out, errOut := run(t, admin, "restore", "fence", "--since", since); code != 0 || !strings.Contains(out, "0 workflow dispatches") {
		t.Fatalf("fence at version %d: exit %d %s %s", latest, code, out, errOut)
	}
	if n := fences(); n != 1 {
		t.Fatalf("%d restore fences after the fence at version %d, want 1", n, latest)
	}
	// A newer schema fences, as it is ready for the services (database.CheckReady): migrations
	// are additive, so its fence has every fix this binary knows of.
	if _, err := pool.Exec(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, latest+1); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run(t, admin, "restore", "fence", "--since", since); code != 0 || fences() != 2 {
		t.Fatalf("fence at version %d: exit %d %s %s", latest+1, code, out, errOut)
	}
}

// The fence reports every dead letter that, replayed, would lead to a dispatch: push, check_run and
// check_suite jobs (a "Re-run all checks" re-runs the commit's failed releases), check-run creations
// and permission reads, besides dispatches. The close's wait counts only
// those dead-lettered since the fence, so the fence is the only place they show; the old
// deployment may have replayed one after the restore point and dispatched its release already.
func TestRestoreFenceReportsDeadLettersThatLeadToDispatches(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	if _, err := o.pool.Exec(o.ctx, `WITH i AS (
			INSERT INTO webhook_inbox (delivery_id, event, payload, payload_sha256, received_at)
			SELECT 'dead-' || g, e, '{}', sha256(('dead-' || g)::bytea), now() - interval '1 hour'
			FROM unnest(ARRAY['push', 'check_run', 'check_suite', 'installation']) WITH ORDINALITY AS x(e, g) RETURNING id, event
		)
		INSERT INTO control_plane_jobs (kind, inbox_id, status) SELECT event, id, 'dead_letter' FROM i`); err != nil {
		t.Fatal(err)
	}
	runID := o.createRun()
	creation := o.claimFor(runID, outbox.EffectCheckRunCreate)
	if _, err := o.pool.Exec(o.ctx, `SELECT boardreadyops_outbox_dead_letter($1, 'w', 'rejected (HTTP 422)')`, creation); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, o.env, "restore", "fence", "--since", time.Now().UTC().Format(time.RFC3339), "-o", "json")
	if code != 0 {
		t.Fatalf("fence: exit %d %s %s", code, out, errOut)
	}
	var res struct {
		Jobs      int `json:"dead_letter_jobs"`
		Creations int `json:"dead_letter_creations"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Jobs != 3 || res.Creations != 1 {
		t.Fatalf("reported %d dead-lettered jobs and %d creations, want 3 (push, check_run, check_suite; not installation) and 1", res.Jobs, res.Creations)
	}
	if _, err := o.pool.Exec(o.ctx, `SELECT boardreadyops_outbox_fence_close('test')`); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run(t, o.env, "restore", "fence", "--since", time.Now().UTC().Format(time.RFC3339))
	if code != 0 || !strings.Contains(out, "3 push, check_run or check_suite jobs and 1 check-run creations or permission reads are dead letters") {
		t.Fatalf("fence's text: exit %d\n%s", code, out)
	}
}

// The close's check and the close are one transaction that no push job or check-run creation can
// enter: a push accepted while the close runs (its transaction not yet committed when the close
// counts) is counted and keeps the hold open. Checked and closed apart, the close saw nothing,
// closed, and the push then committed under a closed fence: its dispatch would go out unheld.
func TestRestoreCloseCountsAPushCommittedDuringIt(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	if code, out, errOut := run(t, o.env, "restore", "fence", "--since", time.Now().UTC().Format(time.RFC3339)); code != 0 {
		t.Fatalf("fence: %d %s %s", code, out, errOut)
	}
	tx, err := o.pool.Begin(o.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(o.ctx) }()
	var pushPID int32
	if err := tx.QueryRow(o.ctx, `WITH i AS (INSERT INTO webhook_inbox (delivery_id, event, payload, payload_sha256)
		VALUES ('push-during-close', 'push', '{}', sha256('x'::bytea)) RETURNING id),
		j AS (INSERT INTO control_plane_jobs (kind, inbox_id) SELECT 'push', id FROM i)
		SELECT pg_backend_pid()`).Scan(&pushPID); err != nil {
		t.Fatal(err)
	}
	// --wait 3s: a lock wait that times out (400 ms) before the commit below is tried again. The
	// close waits for the push's transaction (its lock on the table), then counts it.
	done := o.closeBlockedBy(pushPID, "3s")
	if err := tx.Commit(o.ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != 1 || !strings.Contains(r.errOut, "not closed: 1 push, check_run or check_suite jobs") {
		t.Fatalf("close: exit %d %s %s; want it refused for the push", r.code, r.out, r.errOut)
	}
	var open bool
	if err := o.pool.QueryRow(o.ctx, `SELECT EXISTS (SELECT 1 FROM restore_fences WHERE closed_at IS NULL)`).Scan(&open); err != nil || !open {
		t.Fatalf("hold open %v (%v), want open", open, err)
	}
}

// In a lock cycle with a writer that wrote the jobs and then the outbox, the close gives up, not
// the writer (the close began to wait first): the writer's transaction commits, and the close says
// that its locks were not granted.
func TestRestoreCloseGivesWayToAWriter(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	if code, out, errOut := run(t, o.env, "restore", "fence", "--since", time.Now().UTC().Format(time.RFC3339)); code != 0 {
		t.Fatalf("fence: %d %s %s", code, out, errOut)
	}
	tx, err := o.pool.Begin(o.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(o.ctx) }()
	var writerPID int32
	if err := tx.QueryRow(o.ctx, `WITH u AS (UPDATE control_plane_jobs SET updated_at = updated_at WHERE false RETURNING 1)
		SELECT pg_backend_pid()`).Scan(&writerPID); err != nil {
		t.Fatal(err)
	}
	// The close holds the outbox and waits for the jobs, which the writer holds.
	done := o.closeBlockedBy(writerPID, "0s")
	// The writer now writes the outbox: a cycle, which the close's lock timeout breaks.
	if _, err := tx.Exec(o.ctx, `UPDATE control_plane_outbox SET updated_at = updated_at WHERE false`); err != nil {
		t.Fatalf("the writer, in a cycle with the close: %v", err)
	}
	if err := tx.Commit(o.ctx); err != nil {
		t.Fatalf("the writer's commit: %v", err)
	}
	if r := <-done; r.code != 1 || !strings.Contains(r.errOut, "not closed: the close's locks on the jobs and the outbox were not granted") {
		t.Fatalf("close: exit %d %s %s; want it to give way", r.code, r.out, r.errOut)
	}
}

// closeResult is what a brops restore close run in the background ended with.
type closeResult struct {
	code        int
	out, errOut string
}

// closeBlockedBy starts brops restore close --wait wait in the background and returns once it is
// waiting for a lock that the backend pid holds; the close's result arrives on the channel. It
// fails the test if the close ends first.
func (o *ops) closeBlockedBy(pid int32, wait string) <-chan closeResult {
	o.t.Helper()
	done := make(chan closeResult, 1)
	go func() {
		code, out, errOut := run(o.t, o.env, "restore", "close", "--wait", wait)
		done <- closeResult{code, out, errOut}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting bool
		if err := o.pool.QueryRow(o.ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid)))`, pid).Scan(&waiting); err != nil {
			o.t.Fatal(err)
		}
		if waiting {
			return done
		}
		select {
		case r := <-done:
			o.t.Fatalf("the close finished before it waited for backend %d: exit %d %s %s", pid, r.code, r.out, r.errOut)
		default:
		}
		if time.Now().After(deadline) {
			o.t.Fatalf("the close never waited for backend %d", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
