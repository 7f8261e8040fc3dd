package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/migrate"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// The attacks of issue 17 §3 b and d, each run as the service's real login (session_user is the
// login, as in a deployment; the harness's superuser sessions are the tests' clock).

type seeded struct {
	installationID, repositoryID int64
	runID, attemptID             string
	outboxID                     int64
}

// seedCheckRunCreate records, as the superuser, an installation, a repository, a release run in
// check_pending with its pending attempt 1, and the run's available github.check_run.create.
func seedCheckRunCreate(t *testing.T, ctx context.Context, super *pgxpool.Pool, id int64) seeded {
	t.Helper()
	s := seeded{installationID: id, repositoryID: id + 1}
	if _, err := super.Exec(ctx, `INSERT INTO installations (id, account_login, account_type) VALUES ($1, 'octo-org', 'Organization')`, s.installationID); err != nil {
		t.Fatal(err)
	}
	if _, err := super.Exec(ctx, `INSERT INTO repositories (id, installation_id, full_name) VALUES ($1, $2, $3)`,
		s.repositoryID, s.installationID, fmt.Sprintf("octo-org/repo-%d", s.repositoryID)); err != nil {
		t.Fatal(err)
	}
	if err := super.QueryRow(ctx, `INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status)
		VALUES ($1, $2, 'refs/tags/v1.0.0', repeat('a', 40), 'release.yml', 'check_pending') RETURNING id::text`,
		s.repositoryID, s.installationID).Scan(&s.runID); err != nil {
		t.Fatal(err)
	}
	if err := super.QueryRow(ctx, `INSERT INTO execution_attempts (release_run_id, number) VALUES ($1, 1) RETURNING id::text`,
		s.runID).Scan(&s.attemptID); err != nil {
		t.Fatal(err)
	}
	if err := super.QueryRow(ctx, `INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, release_run_id, installation_id)
		VALUES ('github.check_run.create', 'github.check_run.create:' || $1, '{}', $1::uuid, $2) RETURNING id`,
		s.runID, s.installationID).Scan(&s.outboxID); err != nil {
		t.Fatal(err)
	}
	return s
}

func outboxState(t *testing.T, ctx context.Context, super *pgxpool.Pool, id int64) (status, owner string) {
	t.Helper()
	if err := super.QueryRow(ctx, `SELECT status, coalesce(lease_owner, '') FROM control_plane_outbox WHERE id = $1`, id).Scan(&status, &owner); err != nil {
		t.Fatal(err)
	}
	return status, owner
}

// TestServicesCannotSetTheClock: a service that passes its own time gets now(). The dispatcher
// cannot recover a live lease by passing a time a day ahead, cannot claim past a backoff by passing
// a year ahead, and cannot start a delivery on an expired lease by passing a time in the past;
// lifecycle cannot do the same with jobs; ingest cannot date a delivery. The superuser (the tests'
// clock) and a login in boardreadyops_clock still can.
func TestServicesCannotSetTheClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	super := pgtest.NewPool(t)
	dbURL := super.Config().ConnString()
	dispatcher := pgtest.NewLoginPool(t, dbURL, "boardreadyops_dispatcher")
	s := seedCheckRunCreate(t, ctx, super, 1000)

	// A live lease (one minute) held by worker a.
	var n int
	if err := dispatcher.QueryRow(ctx, `SELECT count(*) FROM boardreadyops_outbox_claim('a', 10, '1 minute')`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("claim: %d records, %v", n, err)
	}
	if _, err := dispatcher.Exec(ctx, `SELECT * FROM boardreadyops_outbox_recover_leases(now() + interval '1 day')`); err != nil {
		t.Fatal(err)
	}
	if status, owner := outboxState(t, ctx, super, s.outboxID); status != "leased" || owner != "a" {
		t.Fatalf("dispatcher passing a day ahead recovered a live lease: %s by %q", status, owner)
	}

	// Backoff: retried an hour from now; a claim a year ahead must not take it.
	if _, err := dispatcher.Exec(ctx, `SELECT boardreadyops_outbox_retry($1, 'a', 'rate limited', now() + interval '1 hour')`, s.outboxID); err != nil {
		t.Fatal(err)
	}
	if err := dispatcher.QueryRow(ctx, `SELECT count(*) FROM boardreadyops_outbox_claim('b', 10, '1 minute', now() + interval '1 year')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("dispatcher passing a year ahead claimed %d records past their backoff (err %v)", n, err)
	}

	// An expired lease (set up directly): the dispatcher passes a time from before it expired.
	if _, err := super.Exec(ctx, `UPDATE control_plane_outbox SET status = 'leased', lease_owner = 'c',
		lease_expires_at = now() - interval '1 minute' WHERE id = $1`, s.outboxID); err != nil {
		t.Fatal(err)
	}
	_, err := dispatcher.Exec(ctx, `SELECT boardreadyops_outbox_start_delivery($1, 'c', now() - interval '10 minutes')`, s.outboxID)
	if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "BR001" {
		t.Fatalf("dispatcher passing a past time started a delivery on an expired lease: err %v", err)
	}

	// The tests' clock still works: the superuser's future time recovers the (expired) lease, and
	// a dispatcher login that is also in boardreadyops_clock may move time too.
	clocked := pgtest.NewLoginPool(t, dbURL, "boardreadyops_dispatcher", "boardreadyops_clock")
	if _, err := clocked.Exec(ctx, `SELECT * FROM boardreadyops_outbox_recover_leases(now() + interval '1 day')`); err != nil {
		t.Fatal(err)
	}
	if status, _ := outboxState(t, ctx, super, s.outboxID); status != "available" {
		t.Fatalf("clock login's recovery: status %s, want available", status)
	}
	if err := clocked.QueryRow(ctx, `SELECT count(*) FROM boardreadyops_outbox_claim('d', 10, '1 minute', now() + interval '1 day')`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("clock login's claim a day ahead: %d, %v", n, err)
	}

	// Lifecycle and jobs: a job deferred an hour, a lifecycle login claiming a year ahead.
	lifecycle := pgtest.NewLoginPool(t, dbURL, "boardreadyops_lifecycle")
	var jobID int64
	if err := super.QueryRow(ctx, `SELECT job_id FROM boardreadyops_webhook_accept('d-1', 'ping', NULL, NULL, NULL, '{}', sha256('clock-1'::bytea), NULL, now() + interval '1 hour')`).
		Scan(&jobID); err != nil {
		t.Fatal(err)
	}
	if err := lifecycle.QueryRow(ctx, `SELECT count(*) FROM boardreadyops_job_claim('w', 10, '1 minute', now() + interval '1 year')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("lifecycle passing a year ahead claimed %d jobs before they were due (err %v)", n, err)
	}
	if _, err := super.Exec(ctx, `UPDATE control_plane_jobs SET available_at = now() - interval '1 second' WHERE id = $1`, jobID); err != nil {
		t.Fatal(err)
	}
	if err := lifecycle.QueryRow(ctx, `SELECT count(*) FROM boardreadyops_job_claim('w', 10, '1 minute')`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("lifecycle claim: %d, %v", n, err)
	}
	if _, err := lifecycle.Exec(ctx, `SELECT * FROM boardreadyops_job_recover_leases(now() + interval '1 day')`); err != nil {
		t.Fatal(err)
	}
	var jobStatus string
	if err := super.QueryRow(ctx, `SELECT status FROM control_plane_jobs WHERE id = $1`, jobID).Scan(&jobStatus); err != nil || jobStatus != "leased" {
		t.Fatalf("lifecycle passing a day ahead recovered a live job lease: %s (%v)", jobStatus, err)
	}

	// Ingest cannot date a delivery.
	ingest := pgtest.NewLoginPool(t, dbURL, "boardreadyops_ingest")
	if _, err := ingest.Exec(ctx, `SELECT * FROM boardreadyops_webhook_accept('d-2', 'ping', NULL, NULL, NULL, '{}', sha256('clock-2'::bytea), NULL, now() + interval '1 year')`); err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.Exec(ctx, `SELECT * FROM boardreadyops_webhook_accept_batch('{d-3}', '{ping}', '{NULL}', '{NULL}', '{NULL}', '{"{}"}', ARRAY[sha256('clock-3'::bytea)], '{NULL}', now() - interval '1 year')`); err != nil {
		t.Fatal(err)
	}
	var dated bool
	if err := super.QueryRow(ctx, `SELECT bool_or(abs(extract(epoch FROM received_at - now())) > 3600)
		FROM webhook_inbox WHERE delivery_id IN ('d-2', 'd-3')`).Scan(&dated); err != nil {
		t.Fatal(err)
	}
	if dated {
		t.Fatal("ingest dated a delivery more than an hour away from now()")
	}
}

// plants are functions a service login would plant in schema public: each matches a call inside
// our functions more closely than pg_catalog's own (pg_catalog's are variadic "any"), and leaves a
// mark of the user it ran as.
var plants = []string{
	`CREATE FUNCTION public.jsonb_build_object(text, bigint) RETURNS jsonb LANGUAGE plpgsql AS $$
	 BEGIN PERFORM pg_catalog.set_config('attack.ran_as', current_user, false); RETURN '{}'; END $$`,
	`CREATE FUNCTION public.format(text, text, text) RETURNS text LANGUAGE plpgsql AS $$
	 BEGIN PERFORM pg_catalog.set_config('attack.ran_as', current_user, false); RETURN ''; END $$`,
}

// TestPlantedObjectsCannotHijackDefiners: a database upgraded from PostgreSQL 14, where PUBLIC
// may create in schema public. While it still may, the dispatcher's login plants functions there
// (plants). Then:
//   - the migrations refuse to run next to them: they would run inside the migrations' own
//     statements (00014 builds its SQL with format()), as the migration user;
//   - once they are dropped and the schema migrated, no service login can create in public;
//   - and should one be allowed to again (here: granted CREATE explicitly), what it plants is
//     never called by a definer function: the check-run completion (jsonb_build_object) and a
//     refused lease check (format) run as the owner and leave no mark.
func TestPlantedObjectsCannotHijackDefiners(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewEmptyURL(t)
	super, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer super.Close()
	if _, err := super.Exec(ctx, `GRANT CREATE ON SCHEMA public TO PUBLIC`); err != nil { // PostgreSQL ≤ 14's default
		t.Fatal(err)
	}
	r, err := migrate.Open(dbURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.UpTo(ctx, 13); err != nil { // the last release before issue 17
		t.Fatal(err)
	}
	dispatcherURL := pgtest.NewLogin(t, dbURL, "boardreadyops_dispatcher")
	attacker, err := pgx.Connect(ctx, dispatcherURL)
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close(ctx)
	plant := func() {
		t.Helper()
		for _, p := range plants {
			if _, err := attacker.Exec(ctx, p); err != nil {
				t.Fatalf("plant: %v", err)
			}
		}
	}
	plant()
	_, err = r.Up(ctx)
	if !errors.Is(err, migrate.ErrForeignObjects) || !strings.Contains(err.Error(), "function format(text,text,text)") ||
		!strings.Contains(err.Error(), "function jsonb_build_object(text,bigint)") {
		t.Fatalf("migrating next to planted functions: %v, want ErrForeignObjects naming them", err)
	}
	if _, err := super.Exec(ctx, `DROP FUNCTION public.format(text, text, text); DROP FUNCTION public.jsonb_build_object(text, bigint)`); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := attacker.Exec(ctx, plants[0]); !isDenied(err) {
		t.Fatalf("dispatcher login created a function in public after the upgrade: err %v", err)
	}

	var login string
	if err := attacker.QueryRow(ctx, `SELECT current_user`).Scan(&login); err != nil {
		t.Fatal(err)
	}
	if _, err := super.Exec(ctx, `GRANT CREATE ON SCHEMA public TO `+pgx.Identifier{login}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	plant()
	s := seedCheckRunCreate(t, ctx, super, 2000)
	var n int
	if err := attacker.QueryRow(ctx, `SELECT count(*) FROM boardreadyops_outbox_claim('w', 10, '1 minute')`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("claim: %d, %v", n, err)
	}
	if _, err := attacker.Exec(ctx, `SELECT boardreadyops_outbox_complete_check_run_create($1, 'w', 4242)`, s.outboxID); err != nil {
		t.Fatalf("complete: %v", err)
	}
	// An error path: the lease check formats its detail with format().
	if _, err := attacker.Exec(ctx, `SELECT boardreadyops_outbox_retry($1, 'not-the-owner', 'x', NULL)`, s.outboxID); err == nil {
		t.Fatal("retry by a worker that holds no lease succeeded")
	}
	var mark *string
	if err := attacker.QueryRow(ctx, `SELECT current_setting('attack.ran_as', true)`).Scan(&mark); err != nil {
		t.Fatal(err)
	}
	if mark != nil && *mark != "" {
		t.Fatalf("a planted function ran inside a definer function as %s", *mark)
	}
	var result string
	if err := super.QueryRow(ctx, `SELECT result::text FROM control_plane_outbox WHERE id = $1`, s.outboxID).Scan(&result); err != nil || result != `{"check_run_id": 4242}` {
		t.Fatalf("completion result %s (%v), want the check run id", result, err)
	}
}

// TestLifecycleCannotEnqueueArbitraryEffects: lifecycle's login tries to queue a workflow dispatch
// (or its precursor, a release run with its check run) for a repository, workflow file and
// installation of its choosing, by every route it used to have, and succeeds by none. Its one way
// to create a run is a push job it holds, and that run is the delivery's.
func TestLifecycleCannotEnqueueArbitraryEffects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	super := pgtest.NewPool(t)
	dbURL := super.Config().ConnString()
	lifecycle := pgtest.NewLoginPool(t, dbURL, "boardreadyops_lifecycle")
	// The lifecycle's own installation 3000 with repository 3001 (configured: release.yml), and a
	// victim: installation 4000, repository 4001.
	own := seedCheckRunCreate(t, ctx, super, 3000)
	seedCheckRunCreate(t, ctx, super, 4000)
	if _, err := super.Exec(ctx, `DELETE FROM control_plane_outbox; DELETE FROM execution_attempts; DELETE FROM release_runs;
		INSERT INTO repository_release_settings (repository_id, workflow_file) VALUES (3001, 'release.yml')`); err != nil {
		t.Fatal(err)
	}
	payload := `{"release_run_id": "00000000-0000-0000-0000-000000000001", "repository_full_name": "octo-org/repo-4001",
		"workflow_file": "deploy-production.yml", "ref": "refs/heads/main", "installation_id": 4000}`
	for _, stmt := range []string{
		`SELECT boardreadyops_outbox_enqueue('github.workflow.dispatch', gen_random_uuid(), gen_random_uuid(), 4000, '` + payload + `')`,
		`SELECT boardreadyops_enqueue_control_plane_outbox('github.workflow.dispatch', gen_random_uuid(), gen_random_uuid(), 4000, '` + payload + `')`,
		`SELECT boardreadyops_release_run_create(4001, 4000, 'refs/tags/v9', repeat('b', 40), 'deploy-production.yml', 'BoardReadyOps release')`,
		`SELECT boardreadyops_create_release_run(4001, 4000, 'refs/tags/v9', repeat('b', 40), 'deploy-production.yml', 'BoardReadyOps release')`,
		`INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status) VALUES (4001, 4000, 'refs/tags/v9', repeat('b', 40), 'deploy-production.yml', 'failed')`,
		`INSERT INTO repository_release_settings (repository_id, workflow_file) VALUES (4001, 'deploy-production.yml')`,
		`UPDATE repository_release_settings SET workflow_file = 'deploy-production.yml'`,
		`UPDATE release_runs SET workflow_file = 'deploy-production.yml', repository_id = 4001, installation_id = 4000`,
		`UPDATE execution_attempts SET status = 'pending'`,
		// A Retry's permission read, or its answer, of lifecycle's choosing (00030).
		`SELECT boardreadyops_outbox_enqueue_collaborator_permission_read(gen_random_uuid(), 'octocat', 1, 'd', NULL)`,
		`SELECT boardreadyops_outbox_complete_collaborator_permission_read(1, 'lc', 'admin', 'admin')`,
	} {
		if _, err := lifecycle.Exec(ctx, stmt); !isDenied(err) {
			t.Errorf("lifecycle login: %s: err %v, want permission denied", stmt, err)
		}
	}

	// A push job for its own repository, claimed by worker lc.
	var pushJob, pingJob int64
	if err := super.QueryRow(ctx, `SELECT job_id FROM boardreadyops_webhook_accept('d-push', 'push', NULL, 3000, 3001,
		'{"event": "push", "push": {"ref": "refs/tags/v1.2.3", "after": "`+strings.Repeat("c", 40)+`", "created": true}}', sha256('p'::bytea), NULL)`).Scan(&pushJob); err != nil {
		t.Fatal(err)
	}
	if err := super.QueryRow(ctx, `SELECT job_id FROM boardreadyops_webhook_accept('d-ping', 'ping', NULL, 4000, 4001, '{}', sha256('q'::bytea), NULL)`).Scan(&pingJob); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := lifecycle.QueryRow(ctx, `SELECT count(*) FROM boardreadyops_job_claim('lc', 10, '1 minute')`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("claim: %d, %v", n, err)
	}
	fromPush := `SELECT boardreadyops_release_run_create_from_push($1, $2, 'deploy-production.yml', 'BoardReadyOps release')::text`
	for _, c := range []struct {
		job    int64
		worker string
		code   string
	}{
		{pushJob, "someone-else", "BR001"}, // a job it does not hold
		{pingJob, "lc", "BR005"},           // not a push (the victim's repository)
		{999999, "lc", "BR006"},            // no such job
	} {
		_, err := lifecycle.Exec(ctx, fromPush, c.job, c.worker)
		if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != c.code {
			t.Errorf("create from job %d as %s: err %v, want %s", c.job, c.worker, err, c.code)
		}
	}
	var runID string
	if err := lifecycle.QueryRow(ctx, fromPush, pushJob, "lc").Scan(&runID); err != nil {
		t.Fatal(err)
	}
	var repo, inst int64
	var ref, sha, workflow string
	if err := super.QueryRow(ctx, `SELECT repository_id, installation_id, ref, head_sha, workflow_file FROM release_runs WHERE id = $1`, runID).
		Scan(&repo, &inst, &ref, &sha, &workflow); err != nil {
		t.Fatal(err)
	}
	if repo != own.repositoryID || inst != own.installationID || ref != "refs/tags/v1.2.3" || sha != strings.Repeat("c", 40) || workflow != "release.yml" {
		t.Errorf("run from the push: repository %d installation %d ref %s sha %s workflow %s; want the delivery's and the repository's setting",
			repo, inst, ref, sha, workflow)
	}
	var effects string
	if err := super.QueryRow(ctx, `SELECT coalesce(string_agg(effect_type || '@' || installation_id || ':' || (payload ->> 'repository_full_name'), ','), '') FROM control_plane_outbox`).
		Scan(&effects); err != nil {
		t.Fatal(err)
	}
	if want := "github.check_run.create@3000:octo-org/repo-3001"; effects != want {
		t.Errorf("outbox after the attacks: %q, want only %q", effects, want)
	}
}

// TestLifecycleFinishesOnlyTheDeliverysAttempt: a workflow_run delivery completes the attempt
// whose recorded workflow run it is in the delivery's repository; a delivery from another
// repository that carries the same workflow run id completes nothing.
func TestLifecycleFinishesOnlyTheDeliverysAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	super := pgtest.NewPool(t)
	dbURL := super.Config().ConnString()
	lifecycle := pgtest.NewLoginPool(t, dbURL, "boardreadyops_lifecycle")
	s := seedCheckRunCreate(t, ctx, super, 5000)
	other := seedCheckRunCreate(t, ctx, super, 6000)
	if _, err := super.Exec(ctx, `UPDATE release_runs SET status = 'running', check_run_id = 77 WHERE id = $1`, s.runID); err != nil {
		t.Fatal(err)
	}
	if _, err := super.Exec(ctx, `UPDATE execution_attempts SET status = 'running', workflow_run_id = 8888, dispatched_at = now() WHERE id = $1`, s.attemptID); err != nil {
		t.Fatal(err)
	}
	deliver := func(id string, repository int64) int64 {
		var job int64
		if err := super.QueryRow(ctx, `SELECT job_id FROM boardreadyops_webhook_accept($1, 'workflow_run', 'completed', $2, $3,
			'{"event": "workflow_run", "workflow_run": {"id": 8888, "conclusion": "success", "html_url": "https://github.com/octo-org/x/actions/runs/8888"}}',
			sha256(convert_to($1::text, 'UTF8')), NULL)`, id, repository-1, repository).Scan(&job); err != nil {
			t.Fatal(err)
		}
		return job
	}
	foreign := deliver("d-foreign", other.repositoryID)
	genuine := deliver("d-genuine", s.repositoryID)
	var n int
	if err := lifecycle.QueryRow(ctx, `SELECT count(*) FROM boardreadyops_job_claim('lc', 10, '1 minute')`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("claim: %d, %v", n, err)
	}
	finish := `SELECT outcome FROM boardreadyops_execution_attempt_finish($1, 'lc', 'BoardReadyOps release')`
	var outcome string
	if err := lifecycle.QueryRow(ctx, finish, foreign).Scan(&outcome); err != nil || outcome != "unmatched" {
		t.Fatalf("workflow run of another repository: outcome %q (%v), want unmatched", outcome, err)
	}
	if err := lifecycle.QueryRow(ctx, finish, genuine).Scan(&outcome); err != nil || outcome != "completed" {
		t.Fatalf("genuine completion: outcome %q (%v), want completed", outcome, err)
	}
	var status, payload string
	if err := super.QueryRow(ctx, `SELECT r.status, o.payload::text FROM release_runs r JOIN control_plane_outbox o
		ON o.release_run_id = r.id AND o.effect_type = 'github.check_run.complete' WHERE r.id = $1`, s.runID).Scan(&status, &payload); err != nil {
		t.Fatal(err)
	}
	if status != "succeeded" || !strings.Contains(payload, `"check_run_id": 77`) || !strings.Contains(payload, `"repository_full_name": "octo-org/repo-5001"`) ||
		!strings.Contains(payload, `"conclusion": "success"`) {
		t.Errorf("run %s, check run completion %s", status, payload)
	}
}

// A leaked lifecycle credential cannot shorten the replay defence (migration 00074): holding the
// retention lease, it may delete completed jobs and body digests only past 72 hours, as
// lifecycle's settings refuse shorter periods. Before, a second was enough, and every captured
// body became replayable under a fresh delivery id.
func TestLifecycleCannotShortenTheReplayWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewURL(t)
	lifecycle := pgtest.NewLoginPool(t, dbURL, "boardreadyops_lifecycle")
	var acquired bool
	if err := lifecycle.QueryRow(ctx, `SELECT acquired FROM boardreadyops_retention_lease_acquire('attacker', '1 minute')`).Scan(&acquired); err != nil || !acquired {
		t.Fatalf("lease: %v %v", acquired, err)
	}
	for _, tc := range []struct {
		table, period string
		refused       bool
	}{
		{"webhook_body_digests", "1 second", true},
		{"control_plane_jobs", "1 second", true},
		{"webhook_body_digests", "71 hours", true},
		{"webhook_body_digests", "72 hours", false},
		{"control_plane_jobs", "72 hours", false},
		{"control_plane_outbox", "1 second", false}, // not a replay defence: as before
	} {
		_, err := lifecycle.Exec(ctx, `SELECT boardreadyops_retention_delete($1, 'attacker', $2::interval)`, tc.table, tc.period)
		var pgErr *pgconn.PgError
		refused := errors.As(err, &pgErr) && pgErr.Code == "22023"
		if refused != tc.refused || (err != nil && !refused) {
			t.Errorf("%s older than %s as lifecycle: %v, want refused %v", tc.table, tc.period, err, tc.refused)
		}
	}
}
