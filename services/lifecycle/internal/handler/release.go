package handler

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/boardreadyops/cloud/pkg/outbox"
)

// releaseSettings are a repository's effective settings: its row in repository_release_settings,
// with configured defaults for what it leaves NULL (or when it has none).
type releaseSettings struct {
	WorkflowFile string
	TagPattern   string
	Enabled      bool
}

func (h *Handlers) settings(ctx context.Context, tx pgx.Tx, repositoryID int64) (releaseSettings, error) {
	s := releaseSettings{WorkflowFile: h.cfg.WorkflowFile, TagPattern: h.cfg.TagPattern, Enabled: true}
	var wf, tp *string
	err := tx.QueryRow(ctx, `SELECT workflow_file, tag_pattern, enabled FROM repository_release_settings WHERE repository_id = $1`,
		repositoryID).Scan(&wf, &tp, &s.Enabled)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return s, fmt.Errorf("read release settings of repository %d: %w", repositoryID, err)
	}
	if wf != nil {
		s.WorkflowFile = *wf
	}
	if tp != nil {
		s.TagPattern = *tp
	}
	return s, nil
}

// pushTarget is what the push rules need, read in one statement.
type pushTarget struct {
	active, archived, removed bool
	settings                  releaseSettings
}

// pushTarget reads the installation's activity, the repository's state and its effective release
// settings; pgx.ErrNoRows when the repository or the installation is not recorded yet.
func (h *Handlers) pushTarget(ctx context.Context, tx pgx.Tx, installationID, repositoryID int64) (pushTarget, error) {
	t := pushTarget{settings: releaseSettings{WorkflowFile: h.cfg.WorkflowFile, TagPattern: h.cfg.TagPattern, Enabled: true}}
	var wf, tp *string
	var enabled *bool
	err := tx.QueryRow(ctx, `
		SELECT i.deleted_at IS NULL AND i.suspended_at IS NULL, r.archived, r.removed_at IS NOT NULL,
		       s.workflow_file, s.tag_pattern, s.enabled
		FROM repositories r
		JOIN installations i ON i.id = $1
		LEFT JOIN repository_release_settings s ON s.repository_id = r.id
		WHERE r.id = $2`, installationID, repositoryID).Scan(&t.active, &t.archived, &t.removed, &wf, &tp, &enabled)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, err
	}
	if err != nil {
		return t, fmt.Errorf("read repository %d: %w", repositoryID, err)
	}
	if wf != nil {
		t.settings.WorkflowFile = *wf
	}
	if tp != nil {
		t.settings.TagPattern = *tp
	}
	if enabled != nil {
		t.settings.Enabled = *enabled
	}
	return t, nil
}

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
	d := &job.Document
	p := d.Push
	tag, isTag := strings.CutPrefix(p.Ref, "refs/tags/")
	if !isTag || tag == "" || !p.Created || p.Deleted {
		return ignored(), nil
	}
	repo := d.Repository
	t, err := h.pushTarget(ctx, tx, d.InstallationID, repo.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		// First sight of this repository (or installation): record it, then read again.
		if err := ensureRepository(ctx, tx, d.InstallationID, repo); err != nil {
			return Result{}, err
		}
		t, err = h.pushTarget(ctx, tx, d.InstallationID, repo.ID)
	}
	if err != nil {
		return Result{}, err
	}
	if !t.active || t.archived || t.removed || !t.settings.Enabled {
		return ignored(), nil
	}
	if ok, err := path.Match(t.settings.TagPattern, tag); err != nil || !ok {
		if err != nil {
			h.logger.Warn("repository tag pattern is invalid; no release", "repository_id", repo.ID, "pattern", t.settings.TagPattern)
		}
		return ignored(), nil
	}
	var runID *string
	err = tx.QueryRow(ctx, `SELECT boardreadyops_release_run_create($1, $2, $3, $4, $5, $6, $7)::text`,
		repo.ID, d.InstallationID, p.Ref, p.After, t.settings.WorkflowFile, h.cfg.CheckRunName, nullIfEmpty(job.Traceparent)).Scan(&runID)
	if err != nil {
		return Result{}, fmt.Errorf("create release run: %w", err)
	}
	if runID == nil {
		return ignored(), nil // this tag at this commit already has its run
	}
	h.logger.Debug("release run created", "release_run_id", *runID, "repository_id", repo.ID, "tag", tag, "head_sha", p.After)
	return applied(1), nil
}

// checkRun: "Re-run" (rerequested) on a BoardReadyOps check run of a finished release run starts
// the next execution attempt with its own workflow dispatch. Anything else is recorded only.
func (h *Handlers) checkRun(ctx context.Context, tx pgx.Tx, job Job) (Result, error) {
	d := &job.Document
	cr := d.CheckRun
	if d.Action != "rerequested" || cr.Name != h.cfg.CheckRunName || (h.cfg.AppID != 0 && cr.AppID != h.cfg.AppID) {
		return ignored(), nil
	}
	var status string
	var repoID int64
	var installationID int64
	var checkRunID *int64
	err := tx.QueryRow(ctx, `SELECT status, repository_id, installation_id, check_run_id FROM release_runs WHERE id::text = $1`,
		cr.ExternalID).Scan(&status, &repoID, &installationID, &checkRunID)
	if errors.Is(err, pgx.ErrNoRows) {
		h.logger.Info("rerequested check run of an unknown release run; recorded", "external_id", cr.ExternalID, "check_run_id", cr.ID)
		return ignored(), nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("read release run %s: %w", cr.ExternalID, err)
	}
	if repoID != d.Repository.ID || checkRunID == nil || *checkRunID != cr.ID {
		h.logger.Warn("rerequested check run does not belong to its release run; recorded", "release_run_id", cr.ExternalID, "check_run_id", cr.ID)
		return ignored(), nil
	}
	if status != "succeeded" && status != "failed" && status != "cancelled" {
		h.logger.Info("rerequest of a release run still in progress; recorded", "release_run_id", cr.ExternalID, "status", status)
		return ignored(), nil
	}
	if active, err := installationActive(ctx, tx, installationID); err != nil || !active {
		return ignored(), err
	}
	var attemptID string
	var number int
	var outboxID *int64
	err = tx.QueryRow(ctx, `SELECT attempt_id::text, attempt_number, outbox_id FROM boardreadyops_execution_attempt_start_next($1::uuid, $2)`,
		cr.ExternalID, nullIfEmpty(job.Traceparent)).Scan(&attemptID, &number, &outboxID)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "BR005" {
		return ignored(), nil // raced with another transition: not finished any more
	}
	if err != nil {
		return Result{}, fmt.Errorf("start next attempt of run %s: %w", cr.ExternalID, err)
	}
	h.logger.Info("release run re-run", "release_run_id", cr.ExternalID, "execution_attempt_id", attemptID, "attempt", number)
	return applied(1), nil
}

// workflowRun: progress of a dispatched release workflow, matched by the persisted workflow run
// id. Completion finishes the attempt (and the run, when the attempt is current) and enqueues the
// check run's completion. A run that arrives before its dispatch was recorded waits (deferred,
// bounded by the match window); one that never matches is recorded as unmatched.
func (h *Handlers) workflowRun(ctx context.Context, tx pgx.Tx, job Job) (Result, error) {
	d := &job.Document
	wr := d.WorkflowRun
	if wr.Event != "workflow_dispatch" {
		return ignored(), nil // not started by a dispatch: not ours
	}
	var (
		attemptID, runID, attemptStatus, runStatus, fullName string
		number, currentAttempt                               int
		checkRunID                                           *int64
		installationID                                       int64
		workflowFile                                         string
	)
	err := tx.QueryRow(ctx, `
		SELECT a.id::text, a.number, a.status, r.id::text, r.status, r.current_attempt, r.check_run_id,
		       r.installation_id, r.workflow_file, p.full_name
		FROM execution_attempts a
		JOIN release_runs r ON r.id = a.release_run_id
		JOIN repositories p ON p.id = r.repository_id
		WHERE a.workflow_run_id = $1
		FOR UPDATE OF r, a SKIP LOCKED`, wr.ID).
		Scan(&attemptID, &number, &attemptStatus, &runID, &runStatus, &currentAttempt, &checkRunID, &installationID, &workflowFile, &fullName)
	if errors.Is(err, pgx.ErrNoRows) {
		// Not recorded yet, or its attempt is locked by the dispatch completion that is recording it
		// right now (SKIP LOCKED: waiting there could deadlock against that completion's batch).
		return h.unmatchedWorkflowRun(ctx, tx, job)
	}
	if err != nil {
		return Result{}, fmt.Errorf("match workflow run %d: %w", wr.ID, err)
	}
	if d.Action != "completed" {
		return ignored(), nil // requested / in_progress: the attempt is already running since its dispatch
	}
	if attemptStatus != "running" {
		return ignored(), nil // already finished: a redelivery or a re-run inside Actions
	}
	status, checkConclusion := conclusionOf(wr.Conclusion)
	if _, err := tx.Exec(ctx, `UPDATE execution_attempts SET status = $2, conclusion = $3, completed_at = now(), updated_at = now()
		WHERE id = $1`, attemptID, status, nonEmpty(wr.Conclusion, "unknown")); err != nil {
		return Result{}, fmt.Errorf("finish attempt %s: %w", attemptID, err)
	}
	if number == currentAttempt && runStatus == "running" {
		if _, err := tx.Exec(ctx, `UPDATE release_runs SET status = $2, completed_at = now(), updated_at = now() WHERE id = $1`,
			runID, status); err != nil {
			return Result{}, fmt.Errorf("finish release run %s: %w", runID, err)
		}
	}
	if checkRunID == nil {
		return applied(0), nil // no check run to complete (cannot happen after a dispatch; defensive)
	}
	_, _, err = h.outbox.Enqueue(ctx, tx, outbox.NewEffect{
		EffectType: outbox.EffectCheckRunComplete, ReleaseRunID: runID, ExecutionAttemptID: attemptID,
		InstallationID: installationID, Traceparent: job.Traceparent,
		Payload: map[string]any{
			"release_run_id":       runID,
			"execution_attempt_id": attemptID,
			"attempt_number":       number,
			"installation_id":      installationID,
			"repository_full_name": fullName,
			"check_run_id":         *checkRunID,
			"name":                 h.cfg.CheckRunName,
			"conclusion":           checkConclusion,
			"workflow_run_id":      wr.ID,
			"workflow_run_url":     wr.HTMLURL,
			"title":                fmt.Sprintf("Release %s", checkConclusion),
			"summary": fmt.Sprintf("Attempt %d: workflow %s run %d concluded %s.",
				number, workflowFile, wr.ID, nonEmpty(wr.Conclusion, "unknown")),
		},
	})
	if err != nil {
		return Result{}, err
	}
	h.logger.Info("release attempt finished", "release_run_id", runID, "execution_attempt_id", attemptID, "conclusion", wr.Conclusion)
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

// conclusionOf maps a workflow run conclusion to the attempt status and the check run conclusion.
func conclusionOf(c string) (status, check string) {
	switch c {
	case "success":
		return "succeeded", "success"
	case "cancelled":
		return "cancelled", "cancelled"
	default: // failure, timed_out, startup_failure, action_required, neutral, skipped, stale, ""
		return "failed", "failure"
	}
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
