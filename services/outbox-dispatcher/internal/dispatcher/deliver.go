package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/boardreadyops/cloud/pkg/checkrun"
	"github.com/boardreadyops/cloud/pkg/githubapp"
	"github.com/boardreadyops/cloud/pkg/groupcommit"
	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/sqlstate"
)

// GitHub is what the dispatcher asks of GitHub (*githubapp.Client in production; the benchmark of
// the queue machinery substitutes a no-op).
type GitHub interface {
	FindOrCreateCheckRun(ctx context.Context, cr githubapp.CheckRun) (int64, bool, error)
	DispatchWorkflowRun(ctx context.Context, d githubapp.Dispatch) (githubapp.DispatchedRun, error)
	UpdateCheckRun(ctx context.Context, u githubapp.CheckRunUpdate) error
	GetWorkflowRun(ctx context.Context, installationID int64, repository string, id int64) (githubapp.WorkflowRun, error)
	GetCollaboratorPermission(ctx context.Context, installationID int64, repository, username string) (githubapp.CollaboratorPermission, error)
	TagCommit(ctx context.Context, installationID int64, repository, tag, expected string) (string, error)
}

// payload is the union of the effect payloads (lifecycle and the SQL functions write them),
// decoded once per delivery: a check-run update's rendered state (checkrun.State: state, tag,
// head SHA, workflow file, attempts, …) is part of it.
type payload struct {
	// State is set on check-run updates written since migration 00021; without State.State the
	// effect is the earlier finished completion (conclusion, title, summary).
	checkrun.State
	ReleaseRunID       string `json:"release_run_id"`
	ExecutionAttemptID string `json:"execution_attempt_id"`
	AttemptNumber      int    `json:"attempt_number"`
	InstallationID     int64  `json:"installation_id"`
	RepositoryID       int64  `json:"repository_id"`
	RepositoryFullName string `json:"repository_full_name"`
	Ref                string `json:"ref"`
	Name               string `json:"name"`
	ExternalID         string `json:"external_id"`
	CheckRunID         int64  `json:"check_run_id"`
	WorkflowRunID      int64  `json:"workflow_run_id"`
	Conclusion         string `json:"conclusion"`
	Title              string `json:"title"`
	Summary            string `json:"summary"`
	WorkflowRunURL     string `json:"workflow_run_url"`
	// DispatchPaused is why workflow dispatches were paused when the run was created (brops
	// dispatch pause), or empty.
	DispatchPaused string `json:"dispatch_paused"`
	// Username is who pressed Retry (github.collaborator_permission.read).
	Username string `json:"username"`
}

// decodePayload decodes an effect's payload, once for its delivery and its metrics.
func decodePayload(raw []byte) (payload, error) {
	var p payload
	err := json.Unmarshal(raw, &p)
	return p, err
}

// Outcomes of one delivery (metric label values, a closed set).
const (
	OutcomeCompleted              = "completed"
	OutcomeRetried                = "retried"
	OutcomeDeferred               = "deferred"
	OutcomeDeadLetter             = "dead_letter"
	OutcomeReconciliationRequired = "reconciliation_required"
	// OutcomeLeaseLost: the lease expired and was taken over before the worker recorded the
	// outcome; lease recovery decides (a started dispatch goes to reconciliation).
	OutcomeLeaseLost = "lease_lost"
	// OutcomeStoreFailed: the outcome could not be recorded (database unreachable); the lease
	// expires and recovery decides.
	OutcomeStoreFailed = "store_failed"
)

// checkRunExternalID is the identity a check-run creation searches for and writes
// (pkg/checkrun.ExternalID: repository id and ref, which a release run recreated after a restore
// shares with its lost incarnation), and the run's earlier external_id, its id, which check runs
// created before migration 00031 carry. A payload without the repository id or ref (none is
// written so) keeps the earlier form.
func checkRunExternalID(e outbox.Effect, p payload) (string, []string) {
	runID := nonEmpty(p.ExternalID, e.ReleaseRunID)
	if p.RepositoryID <= 0 || p.Ref == "" {
		return runID, nil
	}
	if runID == "" {
		return checkrun.ExternalID(p.RepositoryID, p.Ref), nil
	}
	return checkrun.ExternalID(p.RepositoryID, p.Ref), []string{runID}
}

// deliver performs one effect, whose payload decoded to p (or failed to, perr), and records its
// transition. It returns the outcome.
func (d *Dispatcher) deliver(ctx context.Context, e outbox.Effect, p payload, perr error) string {
	if perr != nil || p.RepositoryFullName == "" {
		return d.record(ctx, e, d.outcomeOf(e, d.store.DeadLetter(ctx, d.pool, e.ID, d.cfg.WorkerID,
			fmt.Sprintf("payload cannot be delivered: %v", firstErr(perr, errors.New("no repository")))), OutcomeDeadLetter))
	}
	// A workflow dispatch first reads where its tag points, then records its start durably,
	// immediately before its request: the line after which it is never blindly retried.
	// Replay-safe effects had theirs recorded by the claim.
	if e.EffectType == outbox.EffectWorkflowDispatch {
		if outcome, ok := d.checkTag(ctx, e, p); !ok {
			return outcome
		}
		if outcome, ok := d.startDispatch(ctx, e); !ok {
			return outcome
		}
	}
	switch e.EffectType {
	case outbox.EffectCheckRunCreate:
		start := checkrun.Render(checkrun.State{State: checkrun.StateDispatching,
			Tag: nonEmpty(p.Tag, strings.TrimPrefix(p.Ref, "refs/tags/")), HeadSHA: p.HeadSHA, WorkflowFile: p.WorkflowFile,
			Notice: pausedNotice(p)})
		externalID, earlier := checkRunExternalID(e, p)
		id, _, err := d.github.FindOrCreateCheckRun(ctx, githubapp.CheckRun{
			InstallationID: e.InstallationID, Repository: p.RepositoryFullName, HeadSHA: p.HeadSHA,
			Name: nonEmpty(p.Name, d.cfg.CheckRunName), ExternalID: externalID, EarlierExternalIDs: earlier,
			Title: start.Title, Summary: start.Summary,
		})
		if err != nil {
			return d.failed(ctx, e, p, err, true)
		}
		var next int64
		err = d.commit(ctx, "boardreadyops_outbox_complete_check_run_create", d.withRelease(e, func(b *groupcommit.Batch, report func(error)) {
			d.store.QueueCompleteCheckRunCreate(b, e.ID, d.cfg.WorkerID, id, func(n int64, err error) { next = n; report(err) })
		}))
		if next != 0 {
			d.Wake() // the workflow dispatch it enqueued is due now
		}
		return d.record(ctx, e, d.outcomeOf(e, err, OutcomeCompleted))
	case outbox.EffectWorkflowDispatch:
		run, err := d.github.DispatchWorkflowRun(ctx, githubapp.Dispatch{
			InstallationID: e.InstallationID, Repository: p.RepositoryFullName, WorkflowFile: p.WorkflowFile, Ref: p.Ref,
			Inputs: map[string]string{"release_run_id": p.ReleaseRunID, "execution_attempt_id": p.ExecutionAttemptID},
		})
		if err != nil {
			return d.failed(ctx, e, p, err, false)
		}
		err = d.commit(ctx, "boardreadyops_outbox_complete_workflow_dispatch_with_run", d.withRelease(e, func(b *groupcommit.Batch, report func(error)) {
			d.store.QueueCompleteWorkflowDispatch(b, e.ID, d.cfg.WorkerID, run.ID, run.HTMLURL, report)
		}))
		runID := run.ID
		if errors.Is(err, sqlstate.ErrCannotAdvance) {
			// GitHub created the run, but the attempt cannot take it: an operator decides.
			rerr := d.store.RequireReconciliation(ctx, d.pool, e.ID, d.cfg.WorkerID,
				fmt.Sprintf("GitHub created workflow run %d, but the execution attempt cannot advance: %v", runID, err))
			return d.record(ctx, e, d.outcomeOf(e, rerr, OutcomeReconciliationRequired))
		}
		if err != nil {
			d.logger.Error("workflow dispatched but its completion was not recorded; recovery will require reconciliation",
				"outbox_id", e.ID, "workflow_run_id", runID, "error", err)
		}
		return d.record(ctx, e, d.outcomeOf(e, err, OutcomeCompleted))
	case outbox.EffectCheckRunComplete:
		err := d.github.UpdateCheckRun(ctx, d.checkRunUpdate(e, p))
		if err != nil {
			return d.failed(ctx, e, p, err, true)
		}
		err = d.commit(ctx, "boardreadyops_outbox_complete_check_run_complete", d.withRelease(e, func(b *groupcommit.Batch, report func(error)) {
			d.store.QueueCompleteCheckRunComplete(b, e.ID, d.cfg.WorkerID, report)
		}))
		return d.record(ctx, e, d.outcomeOf(e, err, OutcomeCompleted))
	case outbox.EffectWorkflowRunRead:
		run, err := d.github.GetWorkflowRun(ctx, e.InstallationID, p.RepositoryFullName, p.WorkflowRunID)
		if err != nil {
			return d.failed(ctx, e, p, err, true)
		}
		var result string
		err = d.commit(ctx, "boardreadyops_outbox_complete_workflow_run_read_at", d.withRelease(e, func(b *groupcommit.Batch, report func(error)) {
			d.store.QueueCompleteWorkflowRunRead(b, e.ID, d.cfg.WorkerID, outbox.WorkflowRunRead{Status: run.Status,
				Conclusion: run.Conclusion, RunAttempt: run.RunAttempt, HTMLURL: run.HTMLURL, HeadSHA: run.HeadSHA}, func(outcome string, err error) {
				result = outcome
				report(err)
			})
		}))
		if err == nil && result == "other_commit" {
			d.metrics.otherCommit.Inc()
			d.logger.Warn("release workflow read back ran another commit than its release run's; the run is failed",
				"outbox_id", e.ID, "release_run_id", e.ReleaseRunID, "workflow_run_id", p.WorkflowRunID, "workflow_head_sha", run.HeadSHA)
		}
		if result == "finished" || result == "other_commit" {
			d.Wake() // the check-run update it enqueued is due now
		}
		return d.record(ctx, e, d.outcomeOf(e, err, OutcomeCompleted))
	case outbox.EffectCollaboratorPermissionRead:
		// A 404 (not a collaborator) is an answer: the completion refuses the Retry.
		perm, err := d.github.GetCollaboratorPermission(ctx, e.InstallationID, p.RepositoryFullName, p.Username)
		if err != nil {
			return d.failed(ctx, e, p, err, true)
		}
		var result string
		err = d.commit(ctx, "boardreadyops_outbox_complete_collaborator_permission_read", d.withRelease(e, func(b *groupcommit.Batch, report func(error)) {
			d.store.QueueCompleteCollaboratorPermissionRead(b, e.ID, d.cfg.WorkerID, outbox.CollaboratorPermission{
				Collaborator: perm.Collaborator, Permission: perm.Permission, RoleName: perm.RoleName}, func(outcome string, err error) {
				result = outcome
				report(err)
			})
		}))
		if result == "retried" || result == "refused" {
			d.Wake() // the replayed dispatch, or the check-run answer, is due now
		}
		return d.record(ctx, e, d.outcomeOf(e, err, OutcomeCompleted))
	}
	return d.record(ctx, e, d.outcomeOf(e, d.store.DeadLetter(ctx, d.pool, e.ID, d.cfg.WorkerID,
		"unknown effect type "+e.EffectType), OutcomeDeadLetter))
}

// checkRunUpdate is the PATCH a check-run effect asks for: rendered from the run's state, or,
// for an effect written before migration 00021, the finished completion it carries.
func (d *Dispatcher) checkRunUpdate(e outbox.Effect, p payload) githubapp.CheckRunUpdate {
	u := githubapp.CheckRunUpdate{InstallationID: e.InstallationID, Repository: p.RepositoryFullName, CheckRunID: p.CheckRunID,
		Name: nonEmpty(p.Name, d.cfg.CheckRunName)}
	if p.State.State == "" {
		u.Status, u.Conclusion = "completed", p.Conclusion
		u.Title, u.Summary, u.DetailsURL = nonEmpty(p.Title, "Release "+p.Conclusion), p.Summary, p.WorkflowRunURL
		return u
	}
	o := checkrun.Render(p.State)
	u.Status, u.Conclusion, u.Title, u.Summary, u.Text, u.DetailsURL = o.Status, o.Conclusion, o.Title, o.Summary, o.Text, o.DetailsURL
	u.Actions = make([]githubapp.CheckRunAction, 0, len(o.Actions))
	for _, a := range o.Actions {
		u.Actions = append(u.Actions, githubapp.CheckRunAction(a))
	}
	return u
}

// groupCommitSpan are the options of commit's span, built once: one delivery or two per effect.
var groupCommitSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient),
	trace.WithAttributes(attribute.String("db.system", "postgresql"), attribute.Bool("boardreadyops.group_commit", true))}

// commit runs one state-machine call through the group committer. The batch runs outside the
// delivery's context, so its query spans are not in the delivery's trace: this span, named as the
// query tracer names the call, stands for it there.
func (d *Dispatcher) commit(ctx context.Context, function string, queue func(b *groupcommit.Batch, report func(error))) error {
	ctx, span := d.tracer.Start(ctx, "db "+function, groupCommitSpan...)
	defer span.End()
	err := d.completer.Do(ctx, queue)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "statement failed")
	}
	return err
}

// tagReadAttempts is how many reads a dispatch's tag gets before a missing or moved tag
// dead-letters it: GitHub's replicas can lag a push by a moment, and a tag pushed a second ago can
// read as missing, or at its previous commit.
const tagReadAttempts = 3

// checkTag reads the commit the run's tag points at now, before the dispatch's start is recorded
// (docs/dispatcher.md, "A tag moved or deleted"). GitHub runs a dispatched workflow at whatever
// its ref names when the request arrives, and a tag can be moved (a forced push) or deleted and
// pushed again after its release run was created, with lifecycle ignoring both pushes: a
// dispatch by name would then run another commit's workflow under this run's check run, and a
// Re-run days later would. A tag at another commit, or missing, is read again with backoff, and
// at the tagReadAttempts-th claim dead-letters the dispatch with the reason, which the check run
// shows (blocked, with Retry); nothing was sent, so Retry or brops outbox replay reads the tag
// again. The read sends the run's commit as the ETag: GitHub answers 304 while the tag still
// points at it, which costs no primary rate-limit budget. A failed read is retried like any
// replay-safe request: the dispatch was not sent. The read gets a quarter of the lease, so the
// dispatch and its recording keep the three quarters they are sized for (RequestTimeout is at
// most half the lease).
func (d *Dispatcher) checkTag(ctx context.Context, e outbox.Effect, p payload) (string, bool) {
	tag, isTag := strings.CutPrefix(p.Ref, "refs/tags/")
	if !isTag || tag == "" || p.HeadSHA == "" {
		return "", true // no tag to read (a run always has both; nothing to compare without them)
	}
	readCtx, cancel := context.WithTimeout(ctx, d.cfg.Lease/4)
	sha, err := d.github.TagCommit(readCtx, e.InstallationID, p.RepositoryFullName, tag, p.HeadSHA)
	cancel()
	var reason string
	switch {
	case errors.Is(err, githubapp.ErrTagMissing):
		reason = fmt.Sprintf("tag %s does not exist in %s (GitHub answered HTTP 422 for it), so the release workflow was not dispatched: "+
			"push the tag again at commit %s and press Retry, or push a new tag", tag, p.RepositoryFullName, p.HeadSHA)
	case err != nil:
		return d.failed(ctx, e, p, err, true), false
	case !strings.EqualFold(sha, p.HeadSHA):
		reason = fmt.Sprintf("tag %s was moved: it points at commit %s now, not at %s, the commit this release run "+
			"was started for, so the release workflow was not dispatched (it would have run the other commit); "+
			"Retry works once the tag points at %s again; to release the other commit, push a new tag", tag, sha, p.HeadSHA, p.HeadSHA)
	default:
		return "", true
	}
	if e.Attempts < tagReadAttempts {
		return d.retryLater(ctx, e, reason), false
	}
	return d.record(ctx, e, d.outcomeOf(e, d.store.DeadLetter(ctx, d.pool, e.ID, d.cfg.WorkerID, reason), OutcomeDeadLetter)), false
}

// startDispatch records delivery_started_at, committed with whatever other starts and
// completions are waiting; a refusal means the request must not be sent.
func (d *Dispatcher) startDispatch(ctx context.Context, e outbox.Effect) (string, bool) {
	if err := d.commit(ctx, "boardreadyops_outbox_start_delivery", func(b *groupcommit.Batch, report func(error)) {
		d.store.QueueStartDelivery(b, e.ID, d.cfg.WorkerID, report)
	}); err != nil {
		if errors.Is(err, sqlstate.ErrLeaseNotHeld) {
			return OutcomeLeaseLost, false
		}
		d.logger.Warn("start delivery failed; not sending", "outbox_id", e.ID, "error", err)
		return OutcomeStoreFailed, false
	}
	return "", true
}

// failed records a GitHub failure by its class. replaySafe effects retry what may have been
// delivered; a workflow dispatch needs reconciliation instead. A refusal is dead-lettered, unless
// it was sent under an installation or name its repository no longer has (transferred or renamed:
// migration 00088): then it goes out again under the current ones.
func (d *Dispatcher) failed(ctx context.Context, e outbox.Effect, p payload, err error, replaySafe bool) string {
	msg := err.Error()
	switch githubapp.ClassOf(err) {
	case githubapp.RateLimited:
		return d.rateLimited(ctx, e, err)
	case githubapp.Rejected:
		status, serr := d.store.Reject(ctx, d.pool, e.ID, d.cfg.WorkerID, msg, e.InstallationID, p.RepositoryFullName)
		if serr == nil && status != outbox.StatusDeadLetter { // available again, or completed as superseded
			if status == outbox.StatusAvailable {
				d.logger.Info("refused under the repository's previous installation or name; sent again under its current ones",
					"outbox_id", e.ID, "effect_type", e.EffectType, "installation_id", e.InstallationID, "error", msg)
				d.Wake()
			}
			return d.record(ctx, e, OutcomeRetried)
		}
		return d.record(ctx, e, d.outcomeOf(e, serr, OutcomeDeadLetter))
	case githubapp.MaybeDelivered:
		if !replaySafe {
			return d.record(ctx, e, d.outcomeOf(e, d.store.RequireReconciliation(ctx, d.pool, e.ID, d.cfg.WorkerID, msg), OutcomeReconciliationRequired))
		}
	case githubapp.NotDelivered:
	default:
		if !replaySafe {
			// Unclassified: it cannot be shown that the request never left, so it is not retried.
			return d.record(ctx, e, d.outcomeOf(e, d.store.RequireReconciliation(ctx, d.pool, e.ID, d.cfg.WorkerID, msg), OutcomeReconciliationRequired))
		}
	}
	wait := d.backoff.Delay(e.Attempts)
	if githubapp.ClassOf(err) != githubapp.NotDelivered && mayHaveCreated(err) {
		wait = max(wait, CreationSettles)
	}
	return d.retryAfter(ctx, e, msg, wait)
}

// CreationSettles is how long a check run's creation that may have reached GitHub waits before it
// searches the commit's check runs again: GitHub can still be making a request its worker gave up
// on, and a search before it lands would create a second check run. Lease recovery waits as long
// (migration 00089).
const CreationSettles = 15 * time.Second

// mayHaveCreated reports whether err came from a check run's creation request (not from the
// search before it, which creates nothing).
func mayHaveCreated(err error) bool {
	var ge *githubapp.Error
	return errors.As(err, &ge) && ge.Op == githubapp.OpCreateCheckRun
}

// retryLater returns the effect to the queue after its backoff, with msg as its last error (or
// dead-letters it when its attempts are spent).
func (d *Dispatcher) retryLater(ctx context.Context, e outbox.Effect, msg string) string {
	return d.retryAfter(ctx, e, msg, d.backoff.Delay(e.Attempts))
}

// retryAfter returns the effect to the queue after wait, as retryLater does.
func (d *Dispatcher) retryAfter(ctx context.Context, e outbox.Effect, msg string, wait time.Duration) string {
	status, serr := d.store.Retry(ctx, d.pool, e.ID, d.cfg.WorkerID, msg, time.Now().Add(wait))
	if serr == nil && status == outbox.StatusDeadLetter {
		return d.record(ctx, e, OutcomeDeadLetter)
	}
	return d.record(ctx, e, d.outcomeOf(e, serr, OutcomeRetried))
}

// record logs notable outcomes and passes the outcome through.
func (d *Dispatcher) record(_ context.Context, e outbox.Effect, outcome string) string {
	switch outcome {
	case OutcomeDeadLetter, OutcomeReconciliationRequired, OutcomeStoreFailed, OutcomeLeaseLost:
		d.logger.Warn("effect not completed", "outbox_id", e.ID, "effect_type", e.EffectType, "outcome", outcome,
			"release_run_id", e.ReleaseRunID, "installation_id", e.InstallationID, "attempts", e.Attempts)
	}
	return outcome
}

// outcomeOf maps the error of the recording transition: none → want; lease gone → lease_lost;
// anything else → store_failed (the lease expires and recovery decides). The error itself is
// logged here, where it is handled, so the outcome never hides why.
func (d *Dispatcher) outcomeOf(e outbox.Effect, err error, want string) string {
	switch {
	case err == nil:
		return want
	case errors.Is(err, sqlstate.ErrLeaseNotHeld):
		d.logger.Warn("outcome not recorded: the lease is gone; lease recovery decides", "outbox_id", e.ID,
			"effect_type", e.EffectType, "wanted", want, "error", err)
		return OutcomeLeaseLost
	default:
		d.logger.Error("outcome not recorded; the lease expires and recovery decides", "outbox_id", e.ID,
			"effect_type", e.EffectType, "wanted", want, "error", err)
		return OutcomeStoreFailed
	}
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// pausedNotice is what a new check run adds when workflow dispatches are paused: why, and that
// the release workflow starts when they resume; empty when they are not.
func pausedNotice(p payload) string {
	if p.DispatchPaused != "" {
		return "The release is paused: an operator paused workflow dispatches (" + p.DispatchPaused +
			"). The release workflow starts when they resume."
	}
	return ""
}
