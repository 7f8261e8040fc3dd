package handler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/boardreadyops/cloud/pkg/checkrun"
	"github.com/boardreadyops/cloud/pkg/eventdoc"
)

// installationActive reports whether new effects may be enqueued for the installation.
func installationActive(ctx context.Context, tx pgx.Tx, id int64) (bool, error) {
	var active bool
	err := tx.QueryRow(ctx, `SELECT deleted_at IS NULL AND suspended_at IS NULL FROM installations WHERE id = $1`, id).Scan(&active)
	if err != nil {
		return false, fmt.Errorf("read installation %d: %w", id, err)
	}
	return active, nil
}

// push: a created tag that matches the repository's pattern, on an active installation and an
// enabled, unarchived repository, starts a release run: the run (check_pending), attempt 1 and
// its github.check_run.create effect. The same tag at the same commit again creates nothing.
func (h *Handlers) push(ctx context.Context, tx pgx.Tx, job Job) (Result, error) {
	if job.Created != nil {
		return *job.Created, nil // CreateRuns decided it with its batch
	}
	create, res, err := h.pushDecision(ctx, tx, job, true)
	if err != nil || !create {
		return res, err
	}
	// The run is built from the job's stored delivery (repository, installation, ref, commit) and
	// the repository's workflow setting; the configured default applies only without one.
	var runID *string
	err = tx.QueryRow(ctx, `SELECT boardreadyops_release_run_create_from_push($1, $2, $3, $4, $5)::text`,
		job.ID, job.Worker, h.cfg.WorkflowFile, h.cfg.CheckRunName, nullIfEmpty(job.Traceparent)).Scan(&runID)
	if err != nil {
		return Result{}, fmt.Errorf("create release run: %w", err)
	}
	return h.pushCreated(job, runID), nil
}

// errAlone: a push CreateRuns leaves to its handler, at its turn in the batch.
var errAlone = errors.New("handled alone")

// pushDecision makes a push job's checks before its run is created: create is false, with the
// job's result, when the push starts no release. A repository (or installation) not recorded yet
// is recorded first when record is set; otherwise the error is errAlone, for a push decided ahead
// of its turn must write nothing the jobs before it could see.
func (h *Handlers) pushDecision(ctx context.Context, tx pgx.Tx, job Job, record bool) (create bool, res Result, err error) {
	d := &job.Document
	p := d.Push
	if p == nil || d.Repository == nil {
		return false, Result{}, errors.New("push delivery without its push or repository")
	}
	tag, isTag := strings.CutPrefix(p.Ref, "refs/tags/")
	if !isTag || tag == "" || !p.Created || p.Deleted {
		return false, ignored(), nil
	}
	repo := d.Repository
	t, err := h.pushTarget(ctx, tx, d.InstallationID, repo.ID, receivedAt(job))
	if errors.Is(err, pgx.ErrNoRows) && !record {
		return false, Result{}, errAlone
	}
	if errors.Is(err, pgx.ErrNoRows) {
		// First sight of this repository (or installation): record it, then read again.
		if err := ensureRepository(ctx, tx, d.InstallationID, repo); err != nil {
			return false, Result{}, err
		}
		t, err = h.pushTarget(ctx, tx, d.InstallationID, repo.ID, receivedAt(job))
	}
	if err != nil {
		return false, Result{}, err
	}
	if !t.belongs {
		// The repository is recorded under another installation: a tag push of this delivery's
		// installation cannot start its release (a transfer moves it first, by its own event).
		h.logger.Warn("tag push for a repository of another installation; ignored",
			"repository_id", repo.ID, "installation_id", d.InstallationID)
		return false, ignored(), nil
	}
	if !t.active || t.archived || t.removed || !t.settings.Enabled {
		return false, ignored(), nil
	}
	if ok, err := t.settings.releases(tag); err != nil || !ok {
		if err != nil {
			h.logger.Warn("repository tag pattern is invalid; no release", "repository_id", repo.ID, "error", err)
		}
		return false, ignored(), nil
	}
	return true, Result{}, nil
}

// pushCreated is a push job's result once its run was created (runID) or found to exist (nil).
func (h *Handlers) pushCreated(job Job, runID *string) Result {
	if runID == nil {
		return ignored() // this tag at this commit already has its run
	}
	h.logger.Debug("release run created", "release_run_id", *runID, "repository_id", job.Document.Repository.ID,
		"tag", strings.TrimPrefix(job.Document.Push.Ref, "refs/tags/"), "head_sha", cmp.Or(job.Document.Push.HeadSHA, job.Document.Push.After))
	return applied(1)
}

// CreateRuns decides, in tx, the push jobs of a batch, which the caller picked for their place in
// it, all leased to one worker: each job's checks as alone, then the runs of the pushes that
// start a release with one set-based call (boardreadyops_release_run_create_from_push_batch,
// migration 00056). It returns each job's result by job id. An error leaves tx to be rolled back
// (to the caller's savepoint): the jobs are then handled alone. A job missing from the result is
// handled alone at its turn: one whose repository is not recorded yet, which CreateRuns does not
// record ahead of the jobs before it. Job.Traceparent is copied onto the check-run creations it
// enqueues.
func (h *Handlers) CreateRuns(ctx context.Context, tx pgx.Tx, jobs []Job) (map[int64]Result, error) {
	out := make(map[int64]Result, len(jobs))
	creating := make([]Job, 0, len(jobs))
	for _, job := range jobs {
		create, res, err := h.pushDecision(ctx, tx, job, false)
		if errors.Is(err, errAlone) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !create {
			out[job.ID] = res
			continue
		}
		creating = append(creating, job)
	}
	if len(creating) == 0 {
		return out, nil
	}
	ids := make([]int64, len(creating))
	traceparents := make([]*string, len(creating))
	byID := make(map[int64]Job, len(creating))
	for i, job := range creating {
		ids[i], traceparents[i] = job.ID, nullIfEmpty(job.Traceparent)
		byID[job.ID] = job
	}
	rows, err := tx.Query(ctx, `SELECT job_id, release_run_id::text FROM boardreadyops_release_run_create_from_push_batch($1, $2, $3, $4, $5)`,
		ids, creating[0].Worker, h.cfg.WorkflowFile, h.cfg.CheckRunName, traceparents)
	if err != nil {
		return nil, fmt.Errorf("create release runs of %d pushes: %w", len(ids), err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var runID *string
		if err := rows.Scan(&id, &runID); err != nil {
			return nil, fmt.Errorf("create release runs of %d pushes: %w", len(ids), err)
		}
		out[id] = h.pushCreated(byID[id], runID)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("create release runs of %d pushes: %w", len(ids), err)
	}
	return out, nil
}

// checkRun: "Re-run" (rerequested) and the "Retry" requested action on a BoardReadyOps check run.
// Re-run of a finished release run starts the next execution attempt with its own workflow
// dispatch; Re-run of an unfinished one is answered on the check run. Retry of a run blocked by
// dead letters enqueues a read of the sender's permission on the repository (the dispatcher
// asks GitHub; its completion replays the dead letters, audited under the GitHub user's name,
// only for write access); Retry is answered on the check run when there is nothing it can
// safely do. Both are decided from stored state by
// boardreadyops_release_run_request_from_check_run. Anything else is recorded only.
func (h *Handlers) checkRun(ctx context.Context, tx pgx.Tx, job Job) (Result, error) {
	d := &job.Document
	cr := d.CheckRun
	if (d.Action != "rerequested" && d.Action != "requested_action") || cr.Name != h.cfg.CheckRunName ||
		(h.cfg.AppID != 0 && cr.AppID != h.cfg.AppID) {
		return ignored(), nil
	}
	if cr.SenderType == "Bot" {
		// Another App calling "Rerequest a check run": GitHub refuses one that did not create the
		// check run, and this does not rely on it. A release is re-run or retried by people only.
		h.logger.Info("check run request from a bot; recorded", "action", d.Action, "check_run_id", cr.ID, "sender", cr.SenderLogin)
		return ignored(), nil
	}
	// The external_id is the request's claim: only the two forms BoardReadyOps writes
	// (pkg/checkrun) go on to the lookup, which checks them again in SQL.
	if _, err := checkrun.ParseExternalID(cr.ExternalID); err != nil {
		h.logger.Info("check run request with an external_id BoardReadyOps does not write; recorded",
			"action", d.Action, "check_run_id", cr.ID, "external_id_length", len(cr.ExternalID))
		return ignored(), nil
	}
	var outcome string
	var runID *string
	var outboxID *int64
	err := tx.QueryRow(ctx, `SELECT outcome, release_run_id::text, outbox_id
		FROM boardreadyops_release_run_request_from_check_run($1, $2, $3, $4)`,
		job.ID, job.Worker, h.cfg.CheckRunName, nullIfEmpty(job.Traceparent)).Scan(&outcome, &runID, &outboxID)
	if err != nil {
		return Result{}, fmt.Errorf("%s on check run %d: %w", d.Action, cr.ID, err)
	}
	switch outcome {
	case "unknown":
		h.logger.Info("check run request for an unknown release run or check run; recorded",
			"action", d.Action, "external_id", cr.ExternalID, "check_run_id", cr.ID)
		return ignored(), nil
	case "ignored":
		return ignored(), nil
	case "answered":
		h.logger.Info("check run request answered on the check run", "action", d.Action, "release_run_id", *runID)
		return applied(1), nil
	case "checking":
		// The dispatcher reads the sender's permission; the read's completion replays the run's
		// dead letters only for write access. No new read (outboxID nil): this user's press is
		// being checked already.
		h.logger.Info("retry from the check run: the sender's permission is being read",
			"release_run_id", *runID, "github_user", cr.SenderLogin, "new_read", outboxID != nil)
		return applied(1), nil
	}
	// "rerun": a finished run.
	if active, err := installationActive(ctx, tx, d.InstallationID); err != nil || !active {
		return ignored(), err
	}
	started, err := h.rerun(ctx, tx, job, *runID)
	if err != nil || !started {
		return ignored(), err
	}
	return applied(1), nil
}

// rerun starts the next execution attempt of a finished run, with its own workflow dispatch. It
// reports false when the run raced with another transition and is not finished any more.
func (h *Handlers) rerun(ctx context.Context, tx pgx.Tx, job Job, runID string) (bool, error) {
	var attemptID string
	var number int
	var dispatchID *int64
	err := tx.QueryRow(ctx, `SELECT attempt_id::text, attempt_number, outbox_id FROM boardreadyops_execution_attempt_start_next($1::uuid, $2)`,
		runID, nullIfEmpty(job.Traceparent)).Scan(&attemptID, &number, &dispatchID)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "BR005" {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("start next attempt of run %s: %w", runID, err)
	}
	h.logger.Info("release run re-run", "release_run_id", runID, "execution_attempt_id", attemptID, "attempt", number,
		"event", job.Document.Event)
	return true, nil
}

// checkSuite: "Re-run all checks" or "Re-run failed checks" on a commit (rerequested), which
// GitHub sends to the App that owns the commit's check suite. Each release run whose check run is
// on that commit in the delivery's repository is decided from stored state by
// boardreadyops_release_run_request_from_check_suite (migration 00077): a failed or cancelled one
// is re-run as a check run's Re-run would; every other one is answered on its check run (a
// succeeded release is not released again by a suite-wide button). Anything else is recorded only.
func (h *Handlers) checkSuite(ctx context.Context, tx pgx.Tx, job Job) (Result, error) {
	d := &job.Document
	cs := d.CheckSuite
	// The suite has no name to recognise it by: without the App's id configured, another App's
	// suite on the same commit would re-run these releases. A bot's request ("Rerequest a check
	// suite" needs only Checks read) is recorded only, as a check run's.
	if d.Action != "rerequested" || cs == nil || h.cfg.AppID == 0 || cs.AppID != h.cfg.AppID || cs.SenderType == "Bot" {
		return ignored(), nil
	}
	type decision struct {
		Outcome string
		RunID   string
	}
	rows, _ := tx.Query(ctx, `SELECT outcome, release_run_id::text FROM boardreadyops_release_run_request_from_check_suite($1, $2, $3)`,
		job.ID, job.Worker, nullIfEmpty(job.Traceparent))
	decisions, err := pgx.CollectRows(rows, pgx.RowToStructByPos[decision])
	if err != nil {
		return Result{}, fmt.Errorf("rerequested check suite %d: %w", cs.ID, err)
	}
	started, answered := 0, 0
	var active *bool // read once, at the first run to re-run
	for _, dec := range decisions {
		if dec.Outcome != "rerun" {
			answered++
			continue
		}
		if active == nil {
			a, err := installationActive(ctx, tx, d.InstallationID)
			if err != nil {
				return Result{}, err
			}
			active = &a
		}
		if !*active {
			continue
		}
		ok, err := h.rerun(ctx, tx, job, dec.RunID)
		if err != nil {
			return Result{}, err
		}
		if ok {
			started++
		}
	}
	h.logger.Info("check suite re-run requested", "check_suite_id", cs.ID, "head_sha", cs.HeadSHA,
		"repository_id", d.Repository.ID, "runs_started", started, "runs_answered", answered, "github_user", cs.SenderLogin)
	if started+answered == 0 {
		return ignored(), nil // no release run of ours on that commit
	}
	return applied(started + answered), nil
}

// workflowRun: progress of a dispatched release workflow, matched by the persisted workflow run
// id and the attempt's repository (a run id alone could complete another repository's attempt). Completion finishes the attempt (and the run, when the attempt is current) and enqueues the
// check run's completion. A run that arrives before its dispatch was recorded waits (deferred,
// bounded by the match window); one that never matches is recorded as unmatched.
func (h *Handlers) workflowRun(ctx context.Context, tx pgx.Tx, job Job) (Result, error) {
	d := &job.Document
	wr := d.WorkflowRun
	if wr.Event != "workflow_dispatch" {
		return ignored(), nil // not started by a dispatch: not ours
	}
	// Matched by the recorded workflow run id in the delivery's repository; the attempt, the run and
	// the check run's completion are written from stored state only.
	var outcome string
	var runID, attemptID *string
	var outboxID *int64
	if f := job.Finished; f != nil {
		outcome, runID, attemptID, outboxID = f.Outcome, &f.RunID, &f.AttemptID, f.OutboxID
	} else if err := tx.QueryRow(ctx, `SELECT outcome, release_run_id::text, execution_attempt_id::text, outbox_id
		FROM boardreadyops_execution_attempt_finish($1, $2, $3, $4)`,
		job.ID, job.Worker, h.cfg.CheckRunName, nullIfEmpty(job.Traceparent)).Scan(&outcome, &runID, &attemptID, &outboxID); err != nil {
		return Result{}, fmt.Errorf("finish attempt of workflow run %d: %w", wr.ID, err)
	}
	switch outcome {
	case "unmatched":
		// Not recorded yet, or its attempt is locked by the dispatch completion recording it now.
		return h.unmatchedWorkflowRun(ctx, tx, job)
	case "ignored":
		return ignored(), nil // requested / in_progress, or already finished (a redelivery)
	case "finished":
		return applied(0), nil // an earlier attempt, or no check run: nothing to show
	case "other_commit":
		// The workflow ran another commit than the run's: its tag was moved between the
		// dispatcher's tag read and the dispatch (migration 00079). The run is failed.
		h.logger.Warn("release workflow ran another commit than its release run's; the run is failed",
			"release_run_id", *runID, "execution_attempt_id", *attemptID, "workflow_run_id", wr.ID,
			"workflow_head_sha", wr.HeadSHA, "conclusion", wr.Conclusion)
		return Result{Outcome: OutcomeApplied, Effects: 1, OtherCommit: true}, nil
	case "followed":
		// A re-run from the Actions UI of the workflow run BoardReadyOps dispatched: the attempt
		// runs again and the check run says so.
		h.logger.Info("workflow run re-run followed", "release_run_id", *runID, "execution_attempt_id", *attemptID,
			"workflow_run_id", wr.ID, "run_attempt", wr.RunAttempt)
		return applied(1), nil
	}
	h.logger.Info("release attempt finished", "release_run_id", *runID, "execution_attempt_id", *attemptID, "conclusion", wr.Conclusion)
	return applied(1), nil
}

func (h *Handlers) unmatchedWorkflowRun(ctx context.Context, tx pgx.Tx, job Job) (Result, error) {
	d := &job.Document
	wr := d.WorkflowRun
	s, err := h.settings(ctx, tx, d.Repository.ID)
	if err != nil {
		return Result{}, err
	}
	if path.Base(wr.Path) != s.WorkflowFile {
		return ignored(), nil // another workflow of the repository
	}
	deadline := job.ReceivedAt.Add(h.cfg.MatchWindow)
	now := h.now()
	if !now.Before(deadline) {
		h.logger.Warn("workflow run never matched a dispatched attempt; recorded as unmatched",
			"workflow_run_id", wr.ID, "repository_id", d.Repository.ID, "waited", h.cfg.MatchWindow)
		return Result{Outcome: OutcomeUnmatched}, nil
	}
	// Deferral gives the attempt back, so the backoff grows with the time already waited:
	// 1s, then half the time waited so far, at most 30s.
	wait := min(max(now.Sub(job.ReceivedAt)/2, time.Second), 30*time.Second)
	until := now.Add(wait)
	if until.After(deadline) {
		until = deadline
	}
	return Result{}, &DeferError{Until: until, Reason: fmt.Sprintf("workflow run %d not matched to a dispatched attempt yet", wr.ID)}
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Finish is what finishing a workflow_run job's attempt returned
// (boardreadyops_execution_attempt_finish and its set-based form).
type Finish struct {
	Outcome   string
	RunID     string
	AttemptID string
	OutboxID  *int64
}

// FinishesTogether reports whether a job of document d is one FinishAttempts may finish: a
// completed workflow run that a dispatch started.
func FinishesTogether(d *eventdoc.Document) bool {
	return d.Event == eventdoc.EventWorkflowRun && d.Action == "completed" && d.WorkflowRun != nil && d.WorkflowRun.Event == "workflow_dispatch"
}

// FinishAttempts finishes, in tx and with one set-based call
// (boardreadyops_execution_attempt_finish_batch, migration 00052), the attempts of jobs, which
// the caller picked with FinishesTogether (and for their place in its batch), all leased to one
// worker; it returns what each job it carried out got, by job id. The call carries out only the
// common case; a job it leaves out is finished alone by its handler. Job.Traceparent is copied
// onto the check-run updates it enqueues.
func (h *Handlers) FinishAttempts(ctx context.Context, tx pgx.Tx, jobs []Job) (map[int64]Finish, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(jobs))
	traceparents := make([]*string, len(jobs))
	for i, job := range jobs {
		ids[i], traceparents[i] = job.ID, nullIfEmpty(job.Traceparent)
	}
	worker := jobs[0].Worker
	rows, err := tx.Query(ctx, `SELECT job_id, outcome, release_run_id::text, execution_attempt_id::text, outbox_id
		FROM boardreadyops_execution_attempt_finish_batch($1, $2, $3, $4)`, ids, worker, h.cfg.CheckRunName, traceparents)
	if err != nil {
		return nil, fmt.Errorf("finish attempts of %d workflow runs: %w", len(ids), err)
	}
	defer rows.Close()
	out := make(map[int64]Finish, len(ids))
	for rows.Next() {
		var id int64
		var f Finish
		if err := rows.Scan(&id, &f.Outcome, &f.RunID, &f.AttemptID, &f.OutboxID); err != nil {
			return nil, fmt.Errorf("finish attempts of %d workflow runs: %w", len(ids), err)
		}
		out[id] = f
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("finish attempts of %d workflow runs: %w", len(ids), err)
	}
	return out, nil
}
