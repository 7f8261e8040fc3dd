package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/groupcommit"
	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/sqlstate"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// setupCommitter is setup with a group committer whose pool records its batches.
func setupCommitter(t *testing.T) (context.Context, *bundle, *groupcommit.Committer, *pgtest.Batches) {
	t.Helper()
	c := newClock()
	pool, batches := pgtest.NewBatchPool(t)
	b := &bundle{pool: pool, clock: c, store: &outbox.Store{Clock: c.Now}}
	return context.Background(), b, groupcommit.New(pool, slog.New(slog.DiscardHandler), 100, 30*time.Second), batches
}

func TestQueuedCompletions(t *testing.T) {
	t.Parallel()
	ctx, b, c, _ := setupCommitter(t)
	create := enqueueCreate(t, ctx, b, createRun(t, ctx, b))
	claimOne(t, ctx, b, "w1", create)

	// A good completion: committed, dispatch id reported.
	var dispatchID int64
	errs := c.CommitTogether(func(batch *groupcommit.Batch, report func(error)) {
		b.store.QueueCompleteCheckRunCreate(batch, create, "w1", 321, func(id int64, err error) { dispatchID = id; report(err) })
	})
	if errs[0] != nil || dispatchID == 0 {
		t.Fatalf("dispatch %d err %v", dispatchID, errs[0])
	}
	wantStatus(t, ctx, b, create, outbox.StatusCompleted)

	// A stale completion reports its own classified error.
	claimOne(t, ctx, b, "w2", dispatchID)
	errs = c.CommitTogether(func(batch *groupcommit.Batch, report func(error)) {
		b.store.QueueCompleteWorkflowDispatch(batch, dispatchID, "w-stale", 9, "", report)
	})
	if !errors.Is(errs[0], sqlstate.ErrLeaseNotHeld) {
		t.Fatalf("stale completion: %v", errs[0])
	}
	wantStatus(t, ctx, b, dispatchID, outbox.StatusLeased)
}

// enqueueCompletion enqueues a github.check_run.complete effect for a new release run.
func enqueueCompletion(t *testing.T, ctx context.Context, b *bundle) int64 {
	t.Helper()
	r := createRun(t, ctx, b)
	id, inserted, err := b.store.Enqueue(ctx, b.pool, outbox.NewEffect{
		EffectType: outbox.EffectCheckRunComplete, ReleaseRunID: r.ID, ExecutionAttemptID: r.AttemptID,
		InstallationID: r.InstallationID, Payload: map[string]any{"check_run_id": 77, "conclusion": "success"},
	})
	if err != nil || !inserted {
		t.Fatalf("enqueue: %d %v %v", id, inserted, err)
	}
	return id
}

// Check-run completions of one batch share one set-based statement; the ones it leaves out (a
// stale worker, the wrong effect type) run alone and get their exact errors, without undoing the
// others.
func TestQueuedCheckRunCompletionsShareOneStatement(t *testing.T) {
	t.Parallel()
	ctx, b, c, tr := setupCommitter(t)
	var good []int64
	for range 3 {
		id := enqueueCompletion(t, ctx, b)
		claimOne(t, ctx, b, "w1", id)
		good = append(good, id)
	}
	theirs := enqueueCompletion(t, ctx, b)
	claimOne(t, ctx, b, "w2", theirs)
	create := enqueueCreate(t, ctx, b, createRun(t, ctx, b))
	claimOne(t, ctx, b, "w1", create)

	complete := func(id int64, worker string) func(*groupcommit.Batch, func(error)) {
		return func(batch *groupcommit.Batch, report func(error)) {
			b.store.QueueCompleteCheckRunComplete(batch, id, worker, report)
		}
	}
	errs := c.CommitTogether(complete(good[0], "w1"), complete(theirs, "w1"), complete(good[1], "w1"),
		complete(create, "w1"), complete(good[2], "w1"))
	for _, i := range []int{0, 2, 4} {
		if errs[i] != nil {
			t.Errorf("completion %d: %v", i, errs[i])
		}
	}
	if !errors.Is(errs[1], sqlstate.ErrLeaseNotHeld) {
		t.Errorf("another worker's lease: %v, want ErrLeaseNotHeld", errs[1])
	}
	if !errors.Is(errs[3], sqlstate.ErrWrongEffectType) {
		t.Errorf("check-run creation: %v, want ErrWrongEffectType", errs[3])
	}
	for _, id := range good {
		if e := wantStatus(t, ctx, b, id, outbox.StatusCompleted); string(e.Result) != `{"check_run_id": 77}` || e.LeaseOwner != nil {
			t.Errorf("effect %d: result %s, lease owner %v", id, e.Result, deref(e.LeaseOwner))
		}
	}
	wantStatus(t, ctx, b, theirs, outbox.StatusLeased)
	wantStatus(t, ctx, b, create, outbox.StatusLeased)

	want := "[[set_config boardreadyops_outbox_complete_check_run_complete_batch] [set_config boardreadyops_outbox_complete_check_run_complete] [set_config boardreadyops_outbox_complete_check_run_complete]]"
	if got := tr.Functions(); got != want {
		t.Fatalf("batches %s\nwant    %s", got, want)
	}
}

// Workflow-dispatch starts of one batch share one set-based statement; a stale or expired lease
// is refused, alone, with its exact error, and records no start.
func TestQueuedStartsShareOneStatement(t *testing.T) {
	t.Parallel()
	ctx, b, c, tr := setupCommitter(t)
	var dispatches []int64
	for i := range 4 {
		id := dispatchFor(t, ctx, b, createRun(t, ctx, b))
		if i < 3 {
			claimOne(t, ctx, b, "w1", id)
		} else if got, err := b.store.Claim(ctx, b.pool, "w-short", 1, time.Second); err != nil || len(got) != 1 || got[0].ID != id {
			t.Fatalf("claim by w-short: %v %v", got, err)
		}
		dispatches = append(dispatches, id)
	}
	b.clock.Advance(2 * time.Second) // w-short's lease of dispatches[3] has expired

	start := func(id int64, worker string) func(*groupcommit.Batch, func(error)) {
		return func(batch *groupcommit.Batch, report func(error)) {
			b.store.QueueStartDelivery(batch, id, worker, report)
		}
	}
	errs := c.CommitTogether(start(dispatches[0], "w1"), start(dispatches[1], "w-stale"), start(dispatches[2], "w1"),
		start(dispatches[3], "w-short"))
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("starts: %v, %v", errs[0], errs[2])
	}
	if !errors.Is(errs[1], sqlstate.ErrLeaseNotHeld) || !errors.Is(errs[3], sqlstate.ErrLeaseNotHeld) {
		t.Errorf("stale %v and expired %v starts, want ErrLeaseNotHeld", errs[1], errs[3])
	}
	for i, id := range dispatches {
		e := mustGet(t, ctx, b, id)
		if started := e.DeliveryStartedAt != nil; started != (i == 0 || i == 2) {
			t.Errorf("dispatch %d: delivery started %v", i, deref(e.DeliveryStartedAt))
		}
	}
	// One set per worker (a dispatcher has one); the two refused run alone.
	want := "[[set_config boardreadyops_outbox_start_delivery_batch boardreadyops_outbox_start_delivery_batch boardreadyops_outbox_start_delivery_batch]" +
		" [set_config boardreadyops_outbox_start_delivery] [set_config boardreadyops_outbox_start_delivery]]"
	if got := tr.Functions(); got != want {
		t.Fatalf("batches %s\nwant    %s", got, want)
	}
}

// ScanEffect reads Columns by position: it must agree with scanning by name (the struct tags) for
// a row with every column set.
func TestScanEffectMatchesColumns(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	id := enqueueCompletion(t, ctx, b)
	if _, err := b.pool.Exec(ctx, `UPDATE control_plane_outbox SET status = 'leased', lease_owner = 'w', lease_expires_at = now() + interval '1 minute',
		delivery_started_at = now() - interval '1 minute', updated_at = now() + interval '1 hour', available_at = now() - interval '1 hour',
		attempts = 3, max_attempts = 7, last_error = 'e', traceparent = '00-0123456789abcdef0123456789abcdef-0123456789abcdef-01',
		superseded_by = id, result = '{"check_run_id": 1}' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	query := `SELECT ` + outbox.Columns + ` FROM control_plane_outbox WHERE id = $1`
	rows, _ := b.pool.Query(ctx, query, id)
	byName, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[outbox.Effect])
	if err != nil {
		t.Fatal(err)
	}
	rows, _ = b.pool.Query(ctx, query, id)
	byPos, err := pgx.CollectExactlyOneRow(rows, outbox.ScanEffect)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(byName, byPos) {
		t.Fatalf("by position %+v\nby name     %+v", byPos, byName)
	}
	if byPos.SupersededBy == nil || byPos.LastError == nil || byPos.Traceparent == nil || byPos.ExecutionAttemptID == nil {
		t.Fatalf("a nullable column was not read: %+v", byPos)
	}
}

// A workflow dispatch completes in one statement that also links the run's page (migration
// 00042): the check-run update it enqueues points at the page, and a page that is not an
// http(s) address, or is too long to store, is left out without failing the completion.
func TestQueuedDispatchCompletionLinksItsRunInOneStatement(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, page, want string
	}{
		{"the page GitHub returned", "https://github.com/acme/widgets/actions/runs/77", "https://github.com/acme/widgets/actions/runs/77"},
		{"no page", "", ""},
		{"not a web address", "javascript:alert(1)", ""},
		{"too long to store", "https://github.com/" + strings.Repeat("a", 1024), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, b, c, tr := setupCommitter(t)
			r := createRun(t, ctx, b)
			dispatch := dispatchFor(t, ctx, b, r)
			claimOne(t, ctx, b, "w1", dispatch)
			if _, err := b.store.StartDelivery(ctx, b.pool, dispatch, "w1"); err != nil {
				t.Fatal(err)
			}
			errs := c.CommitTogether(func(batch *groupcommit.Batch, report func(error)) {
				b.store.QueueCompleteWorkflowDispatch(batch, dispatch, "w1", 31337, tt.page, report)
			})
			if errs[0] != nil {
				t.Fatalf("completion: %v", errs[0])
			}
			wantStatus(t, ctx, b, dispatch, outbox.StatusCompleted)
			if got, want := tr.Functions(), "[[boardreadyops_outbox_complete_workflow_dispatch_with_run]]"; got != want {
				t.Fatalf("batches %s, want %s", got, want)
			}
			var stored, linked string
			var started bool
			if err := b.pool.QueryRow(ctx, `
				SELECT coalesce(w.workflow_run_url, ''), w.started_at IS NOT NULL,
				       coalesce((SELECT o.payload->>'details_url' FROM control_plane_outbox o
				                 WHERE o.release_run_id = $1 AND o.effect_type = 'github.check_run.complete'
				                 ORDER BY o.id DESC LIMIT 1), '')
				FROM execution_attempt_workflow_runs w WHERE w.execution_attempt_id = $2`, r.ID, r.AttemptID).Scan(&stored, &started, &linked); err != nil {
				t.Fatal(err)
			}
			if stored != tt.want || linked != tt.want || !started {
				t.Fatalf("page stored %q, linked by the running update %q, started %v; want %q", stored, linked, started, tt.want)
			}
		})
	}
}

// Check-run creations of one batch share one set-based statement (migration 00050) that makes
// exactly the writes of the single-row function; the ones it leaves out run alone: a stale worker
// and the wrong effect type get their exact errors, a run whose dispatches are paused completes
// alone and its check run says so, without undoing the others.
func TestQueuedCheckRunCreationsShareOneStatement(t *testing.T) {
	t.Parallel()
	ctx, b, c, tr := setupCommitter(t)
	const traceparent = "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01"
	type created struct {
		r  run
		id int64
	}
	create := func(worker string) created {
		r := createRun(t, ctx, b)
		id, inserted, err := b.store.Enqueue(ctx, b.pool, outbox.NewEffect{
			EffectType: outbox.EffectCheckRunCreate, ReleaseRunID: r.ID, InstallationID: r.InstallationID,
			Payload: map[string]any{"release_run_id": r.ID, "head_sha": "aaaa"}, Traceparent: traceparent,
		})
		if err != nil || !inserted {
			t.Fatalf("enqueue: %d %v %v", id, inserted, err)
		}
		claimOne(t, ctx, b, worker, id)
		return created{r, id}
	}
	good := []created{create("w1"), create("w1"), create("w1")}
	theirs := create("w2")
	paused := create("w1")
	if _, err := b.pool.Exec(ctx, `SELECT boardreadyops_outbox_pause_dispatches($1, 'alice', 'GitHub incident')`, paused.r.InstallationID); err != nil {
		t.Fatal(err)
	}
	update := enqueueCompletion(t, ctx, b)
	claimOne(t, ctx, b, "w1", update)
	alone := create("w1") // completed by the single-row function, for comparison

	dispatches := map[int64]int64{}
	complete := func(id int64, worker string, checkRunID int64) func(*groupcommit.Batch, func(error)) {
		return func(batch *groupcommit.Batch, report func(error)) {
			b.store.QueueCompleteCheckRunCreate(batch, id, worker, checkRunID, func(n int64, err error) { dispatches[id] = n; report(err) })
		}
	}
	errs := c.CommitTogether(complete(good[0].id, "w1", 501), complete(theirs.id, "w1", 502), complete(good[1].id, "w1", 503),
		complete(paused.id, "w1", 504), complete(update, "w1", 505), complete(good[2].id, "w1", 506))
	for _, i := range []int{0, 2, 3, 5} {
		if errs[i] != nil {
			t.Errorf("completion %d: %v", i, errs[i])
		}
	}
	if !errors.Is(errs[1], sqlstate.ErrLeaseNotHeld) {
		t.Errorf("another worker's lease: %v, want ErrLeaseNotHeld", errs[1])
	}
	if !errors.Is(errs[4], sqlstate.ErrWrongEffectType) {
		t.Errorf("check-run update: %v, want ErrWrongEffectType", errs[4])
	}
	want := "[[set_config boardreadyops_outbox_complete_check_run_create_batch] [set_config boardreadyops_outbox_complete_check_run_create]" +
		" [set_config boardreadyops_outbox_complete_check_run_create] [set_config boardreadyops_outbox_complete_check_run_create]]"
	if got := tr.Functions(); got != want {
		t.Fatalf("batches %s\nwant    %s", got, want)
	}
	wantStatus(t, ctx, b, theirs.id, outbox.StatusLeased)
	wantStatus(t, ctx, b, update, outbox.StatusLeased)
	if errs := c.CommitTogether(complete(alone.id, "w1", 507)); errs[0] != nil {
		t.Fatalf("completion alone: %v", errs[0])
	}

	// What the batch wrote for a run, with its ids named, is what the single-row function wrote.
	written := func(cr created, checkRunID int64) string {
		t.Helper()
		var s string
		if err := b.pool.QueryRow(ctx, `
			SELECT jsonb_build_object(
				'run', (SELECT to_jsonb(r) - 'id' - 'created_at' FROM release_runs r WHERE r.id = $1),
				'attempt', (SELECT to_jsonb(a) - 'id' - 'created_at' FROM execution_attempts a WHERE a.release_run_id = $1),
				'effects', (SELECT jsonb_agg(to_jsonb(o) - 'id' - 'superseded_by' ORDER BY o.id) FROM control_plane_outbox o WHERE o.release_run_id = $1))::text`,
			cr.r.ID).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return strings.NewReplacer(cr.r.ID, "RUN", cr.r.AttemptID, "ATTEMPT", fmt.Sprint(cr.r.InstallationID), "INSTALLATION",
			fmt.Sprint(cr.r.RepositoryID), "REPOSITORY", fmt.Sprint(checkRunID), "CHECKRUN").Replace(s)
	}
	reference := written(alone, 507)
	for i, cr := range []created{good[0], good[1], good[2]} {
		checkRunID := []int64{501, 503, 506}[i]
		if dispatches[cr.id] == 0 {
			t.Errorf("run %d: no dispatch id reported", i)
		} else if e := wantStatus(t, ctx, b, dispatches[cr.id], outbox.StatusAvailable); e.EffectType != outbox.EffectWorkflowDispatch {
			t.Errorf("run %d: dispatch %d is a %s", i, e.ID, e.EffectType)
		}
		if got := written(cr, checkRunID); got != reference {
			t.Errorf("run %d, by the batch:\n%s\nby the single-row function:\n%s", i, got, reference)
		}
	}
	var notice string
	if err := b.pool.QueryRow(ctx, `SELECT coalesce(max(payload->>'notice'), '') FROM control_plane_outbox
		WHERE release_run_id = $1 AND effect_type = 'github.check_run.complete'`, paused.r.ID).Scan(&notice); err != nil {
		t.Fatal(err)
	}
	if dispatches[paused.id] == 0 || !strings.Contains(notice, "GitHub incident") {
		t.Errorf("paused run: dispatch %d, check-run notice %q", dispatches[paused.id], notice)
	}
}

// Workflow-dispatch completions of one batch share one set-based call (migration 00051) that
// makes exactly the writes of the single-row function, the check-run update it enqueues
// included; the ones it leaves out run alone and get their exact errors — a stale worker, a
// delivery never started, a workflow run that belongs to another attempt — without undoing the
// others.
func TestQueuedDispatchCompletionsShareOneCall(t *testing.T) {
	t.Parallel()
	ctx, b, c, tr := setupCommitter(t)
	type dispatched struct {
		r  run
		id int64
	}
	dispatch := func(worker string, start bool) dispatched {
		r := createRun(t, ctx, b)
		id := dispatchFor(t, ctx, b, r)
		claimOne(t, ctx, b, worker, id)
		if start {
			if _, err := b.store.StartDelivery(ctx, b.pool, id, worker); err != nil {
				t.Fatal(err)
			}
		}
		return dispatched{r, id}
	}
	complete := func(id int64, worker string, workflowRunID int64) func(*groupcommit.Batch, func(error)) {
		return func(batch *groupcommit.Batch, report func(error)) {
			b.store.QueueCompleteWorkflowDispatch(batch, id, worker, workflowRunID,
				fmt.Sprintf("https://github.com/octo-org/repo/actions/runs/%d", workflowRunID), report)
		}
	}
	// What the batch wrote for a run, with its ids named, is what the single-row function wrote.
	written := func(d dispatched, workflowRunID int64) string {
		t.Helper()
		var s string
		if err := b.pool.QueryRow(ctx, `
			SELECT jsonb_build_object(
				'run', (SELECT to_jsonb(r) - 'id' - 'created_at' FROM release_runs r WHERE r.id = $1),
				'attempt', (SELECT to_jsonb(a) - 'id' - 'created_at' FROM execution_attempts a WHERE a.release_run_id = $1),
				'page', (SELECT to_jsonb(w) FROM execution_attempt_workflow_runs w JOIN execution_attempts a ON a.id = w.execution_attempt_id
				         WHERE a.release_run_id = $1),
				'effects', (SELECT jsonb_agg(to_jsonb(o) - 'id' - 'superseded_by' ORDER BY o.id) FROM control_plane_outbox o WHERE o.release_run_id = $1))::text`,
			d.r.ID).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return strings.NewReplacer(d.r.ID, "RUN", d.r.AttemptID, "ATTEMPT", fmt.Sprint(d.r.InstallationID), "INSTALLATION",
			fmt.Sprint(d.r.RepositoryID), "REPOSITORY", fmt.Sprint(workflowRunID), "WORKFLOWRUN").Replace(s)
	}
	alone := dispatch("w1", true) // completed by the single-row function, for comparison
	if errs := c.CommitTogether(complete(alone.id, "w1", 9000)); errs[0] != nil {
		t.Fatalf("completion alone: %v", errs[0])
	}
	reference := written(alone, 9000) // before the next claims deliver its check-run update
	good := []dispatched{dispatch("w1", true), dispatch("w1", true), dispatch("w1", true)}
	theirs := dispatch("w2", true)
	unstarted := dispatch("w1", false)
	taken := dispatch("w1", true) // names the workflow run of alone's attempt
	tr.Reset()

	errs := c.CommitTogether(complete(good[0].id, "w1", 9001), complete(theirs.id, "w1", 9002), complete(good[1].id, "w1", 9003),
		complete(unstarted.id, "w1", 9004), complete(taken.id, "w1", 9000), complete(good[2].id, "w1", 9006))
	for _, i := range []int{0, 2, 5} {
		if errs[i] != nil {
			t.Errorf("completion %d: %v", i, errs[i])
		}
	}
	for i, want := range map[int]error{1: sqlstate.ErrLeaseNotHeld, 3: sqlstate.ErrIllegalState, 4: sqlstate.ErrCannotAdvance} {
		if !errors.Is(errs[i], want) {
			t.Errorf("completion %d: %v, want %v", i, errs[i], want)
		}
	}
	want := "[[set_config boardreadyops_outbox_complete_workflow_dispatch_batch] [set_config boardreadyops_outbox_complete_workflow_dispatch_with_run]" +
		" [set_config boardreadyops_outbox_complete_workflow_dispatch_with_run] [set_config boardreadyops_outbox_complete_workflow_dispatch_with_run]]"
	if got := tr.Functions(); got != want {
		t.Fatalf("batches %s\nwant    %s", got, want)
	}
	for _, d := range []dispatched{theirs, unstarted, taken} {
		wantStatus(t, ctx, b, d.id, outbox.StatusLeased)
	}

	if !strings.Contains(reference, `"state": "running"`) {
		t.Fatalf("the single-row function enqueued no running check-run update: %s", reference)
	}
	for i, d := range good {
		if got := written(d, []int64{9001, 9003, 9006}[i]); got != reference {
			t.Errorf("run %d, by the batch:\n%s\nby the single-row function:\n%s", i, got, reference)
		}
	}

	// Two completions naming one workflow run fail the batch on the attempts' unique workflow run
	// id; each then runs alone: the first is recorded, the second cannot advance.
	first, second := dispatch("w1", true), dispatch("w1", true)
	tr.Reset()
	errs = c.CommitTogether(complete(first.id, "w1", 9100), complete(second.id, "w1", 9100))
	if errs[0] != nil || !errors.Is(errs[1], sqlstate.ErrCannotAdvance) {
		t.Errorf("one workflow run twice: %v, %v; want nil, ErrCannotAdvance", errs[0], errs[1])
	}
	want = "[[set_config boardreadyops_outbox_complete_workflow_dispatch_batch] [set_config boardreadyops_outbox_complete_workflow_dispatch_with_run]" +
		" [set_config boardreadyops_outbox_complete_workflow_dispatch_with_run]]"
	if got := tr.Functions(); got != want {
		t.Fatalf("batches %s\nwant    %s", got, want)
	}
}
