// Package handler turns one normalized delivery into installation, repository and release-run
// state, and writes the GitHub side effects that state requires into the outbox — all inside the
// caller's transaction, so the state change, its effects and the job's completion commit together.
// It never calls GitHub.
package handler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
)

// Outcomes of a handled job (metric label values, a closed set).
const (
	// OutcomeApplied: state changed (and effects may have been enqueued).
	OutcomeApplied = "applied"
	// OutcomeIgnored: recorded, nothing to do (ping, unhandled action, not ours, rules not met).
	OutcomeIgnored = "ignored"
	// OutcomeUnmatched: a workflow_run never matched an attempt within the match window.
	OutcomeUnmatched = "unmatched"
)

// Config holds the release defaults and identity the rules need.
type Config struct {
	// TagPattern is the default release tag pattern (path.Match syntax on the tag name).
	TagPattern string
	// WorkflowFile is the default release workflow file name.
	WorkflowFile string
	// CheckRunName is the name of the check runs BoardReadyOps creates.
	CheckRunName string
	// AppID, when non-zero, must match a rerequested check run's or check suite's app id.
	AppID int64
	// MatchWindow bounds how long a workflow_run waits for its dispatch to be recorded.
	MatchWindow time.Duration
}

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	if _, err := path.Match(c.TagPattern, "v1"); err != nil || c.TagPattern == "" {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_RELEASE_TAG_PATTERN %q is not a valid pattern", c.TagPattern))
	}
	if !workflowFilePattern.MatchString(c.WorkflowFile) {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_RELEASE_WORKFLOW %q is not a workflow file name (name.yml)", c.WorkflowFile))
	}
	if c.CheckRunName == "" {
		errs = append(errs, errors.New("check run name must not be empty"))
	}
	if c.MatchWindow < time.Minute || c.MatchWindow > 24*time.Hour {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_WORKFLOW_RUN_MATCH_WINDOW %v: want 1m to 24h", c.MatchWindow))
	}
	return errors.Join(errs...)
}

// DeferError asks the worker to put the job back until Until without spending an attempt.
type DeferError struct {
	Until  time.Time
	Reason string
}

func (e *DeferError) Error() string { return "deferred: " + e.Reason }

// Job is what a handler needs of a claimed job.
type Job struct {
	ID int64
	// Worker holds the job's lease: the release functions act only on a job leased to it.
	Worker      string
	Kind        string
	Attempts    int
	ReceivedAt  time.Time
	Document    eventdoc.Document
	Traceparent string // of the job's span: copied onto every effect enqueued
	// Finished is set when FinishAttempts finished this workflow_run job's attempt together with
	// others of its batch, in the same transaction: the handler takes its result instead of
	// finishing the attempt again.
	Finished *Finish
	// Created is set when CreateRuns decided this push job together with others of its batch, in
	// the same transaction: the handler returns it instead of deciding again.
	Created *Result
}

// Handlers applies jobs.
type Handlers struct {
	cfg    Config
	logger *slog.Logger
	now    func() time.Time
}

// New returns the handlers. now may be nil (time.Now).
func New(cfg Config, logger *slog.Logger, now func() time.Time) *Handlers {
	if now == nil {
		now = time.Now
	}
	return &Handlers{cfg: cfg, logger: logger, now: now}
}

// Result is what a handler did.
type Result struct {
	Outcome string
	// Effects is the number of outbox records enqueued.
	Effects int
	// OtherCommit: a release workflow ran another commit than its release run's, which failed the
	// run (counted apart, for its alert).
	OtherCommit bool
}

// Handle applies job in tx. An error rolls the job's work back; a *DeferError asks for a later
// retry without spending an attempt.
func (h *Handlers) Handle(ctx context.Context, tx pgx.Tx, job Job) (Result, error) {
	d := &job.Document
	switch d.Event {
	case eventdoc.EventInstallation:
		return h.installation(ctx, tx, job)
	case eventdoc.EventInstallationRepositories:
		return h.installationRepositories(ctx, tx, job)
	case eventdoc.EventRepository:
		return h.repository(ctx, tx, job)
	case eventdoc.EventPush:
		return h.push(ctx, tx, job)
	case eventdoc.EventCheckRun:
		return h.checkRun(ctx, tx, job)
	case eventdoc.EventCheckSuite:
		return h.checkSuite(ctx, tx, job)
	case eventdoc.EventWorkflowRun:
		return h.workflowRun(ctx, tx, job)
	default: // ping, and anything recorded but not acted on
		return Result{Outcome: OutcomeIgnored}, nil
	}
}

func applied(effects int) Result { return Result{Outcome: OutcomeApplied, Effects: effects} }

func ignored() Result { return Result{Outcome: OutcomeIgnored} }
