// Package app is the lifecycle service: it claims control-plane jobs and applies installation,
// repository and release-run state changes, writing the required GitHub side effects into the
// outbox in the same transaction. It never calls GitHub. One replica at a time (the retention
// lease) also runs the retention maintenance service (pkg/retention): lifecycle is the service
// that owns the jobs and writes the release runs and their effects, the rows retention deletes.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/boardreadyops/cloud/pkg/config"
	"github.com/boardreadyops/cloud/pkg/daemon"
	"github.com/boardreadyops/cloud/pkg/notify"
	"github.com/boardreadyops/cloud/pkg/retention"
	"github.com/boardreadyops/cloud/services/lifecycle/internal/handler"
	"github.com/boardreadyops/cloud/services/lifecycle/internal/worker"
)

// Config is lifecycle's own configuration.
type Config struct {
	Worker    worker.Config
	Handler   handler.Config
	AppID     int
	Retention retention.Settings
}

func (c *Config) register(e *config.Env) {
	w, h := &c.Worker, &c.Handler
	e.Int(&w.Concurrency, "concurrency", "BOARDREADYOPS_LIFECYCLE_CONCURRENCY", 4, "claim loops (each uses one database connection while working)")
	e.Int(&w.BatchSize, "batch-size", "BOARDREADYOPS_LIFECYCLE_BATCH_SIZE", 100, "jobs claimed and committed together (1-1000)")
	e.Duration(&w.Lease, "lease", "BOARDREADYOPS_LIFECYCLE_LEASE", time.Minute, "lease of a claimed batch; expired leases are recovered")
	e.Duration(&w.PollInterval, "poll-interval", "BOARDREADYOPS_LIFECYCLE_POLL_INTERVAL", time.Second, "idle polling interval (notifications wake sooner)")
	e.Bool(&w.Listen, "listen", "BOARDREADYOPS_LISTEN", true, "LISTEN for new jobs (disable behind transaction-pooling PgBouncer)")
	e.Duration(&w.MaxBackoff, "max-backoff", "BOARDREADYOPS_JOB_MAX_BACKOFF", 5*time.Minute, "cap of a failing job's retry delay")
	e.Duration(&w.StaleAfter, "release-run-stale-after", "BOARDREADYOPS_RELEASE_RUN_STALE_AFTER", time.Hour,
		"time without a change of state beyond which an unfinished release run counts in boardreadyops_release_runs_stale (at least 1m)")
	e.Duration(&w.ReadBackAfter, "release-run-read-back-after", "BOARDREADYOPS_RELEASE_RUN_READ_BACK_AFTER", 30*time.Minute,
		"how long a running release run's workflow run may stay quiet before it is read back from GitHub (at least 5m)")
	e.String(&h.TagPattern, "release-tag-pattern", "BOARDREADYOPS_RELEASE_TAG_PATTERN", "v*", "default release tag pattern (path.Match on the tag name)")
	e.String(&h.WorkflowFile, "release-workflow", "BOARDREADYOPS_RELEASE_WORKFLOW", "boardreadyops-release.yml", "default release workflow file")
	e.String(&h.CheckRunName, "check-run-name", "BOARDREADYOPS_CHECK_RUN_NAME", "BoardReadyOps release", "name of the check runs BoardReadyOps creates")
	e.Int(&c.AppID, "github-app-id", "BOARDREADYOPS_GITHUB_APP_ID", 0, "GitHub App id; when set, only its check runs are re-run (and a commit's \"Re-run all checks\" is acted on only when set)")
	e.Duration(&h.MatchWindow, "workflow-run-match-window", "BOARDREADYOPS_WORKFLOW_RUN_MATCH_WINDOW", 15*time.Minute,
		"how long a workflow_run waits for its dispatch to be recorded before it is recorded as unmatched")
	c.Retention.Register(e)
}

func (c *Config) validate() error {
	w := c.Worker
	var errs []error
	if w.Concurrency < 1 || w.Concurrency > 64 {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_LIFECYCLE_CONCURRENCY %d: want 1 to 64", w.Concurrency))
	}
	if w.BatchSize < 1 || w.BatchSize > 1000 {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_LIFECYCLE_BATCH_SIZE %d: want 1 to 1000", w.BatchSize))
	}
	if w.Lease < 5*time.Second || w.Lease > time.Hour {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_LIFECYCLE_LEASE %v: want 5s to 1h", w.Lease))
	}
	if w.PollInterval < 10*time.Millisecond || w.PollInterval > time.Minute {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_LIFECYCLE_POLL_INTERVAL %v: want 10ms to 1m", w.PollInterval))
	}
	if w.MaxBackoff < time.Second {
		errs = append(errs, errors.New("BOARDREADYOPS_JOB_MAX_BACKOFF must be at least 1s"))
	}
	// The worker reads 0 as its default and refuses a smaller value only once connected, naming
	// its own fields; the README documents no 0 for either, so 0 is refused here too, by name.
	if w.StaleAfter < time.Minute {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_RELEASE_RUN_STALE_AFTER %v: want at least 1m", w.StaleAfter))
	}
	if w.ReadBackAfter < 5*time.Minute {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_RELEASE_RUN_READ_BACK_AFTER %v: want at least 5m", w.ReadBackAfter))
	}
	if c.AppID < 0 {
		errs = append(errs, errors.New("BOARDREADYOPS_GITHUB_APP_ID must not be negative"))
	}
	c.Handler.AppID = int64(c.AppID)
	return errors.Join(append(errs, c.Handler.Validate(), c.Retention.Validate())...)
}

// Run runs the lifecycle service until ctx ends.
func Run(ctx context.Context, args []string, getenv config.Getenv, stderr io.Writer) error {
	var c Config
	return daemon.Run(ctx, daemon.Spec{
		Name:     "lifecycle",
		Flags:    c.register,
		Validate: c.validate,
		Work:     func(ctx context.Context, b *daemon.Base) error { return work(ctx, b, c) },
	}, args, getenv, stderr)
}

func work(ctx context.Context, b *daemon.Base, c Config) error {
	if need := int32(c.Worker.Concurrency + 2); b.Pool.Config().MaxConns < need {
		return fmt.Errorf("BOARDREADYOPS_DB_MAX_CONNS %d is too small for %d claim loops: need at least %d",
			b.Pool.Config().MaxConns, c.Worker.Concurrency, need)
	}
	wc := c.Worker
	wc.ID = daemon.WorkerID("lifecycle")

	wakeDispatchers := notify.New(b.Pool, notify.Outbox, 10*time.Millisecond, b.Logger)
	go wakeDispatchers.Run(ctx)

	wc.Handler = handler.New(c.Handler, b.Logger, nil)
	wc.Metrics = worker.NewMetrics(b.Registry)
	wc.Tracer = b.Traces.Tracer("github.com/boardreadyops/cloud/services/lifecycle")
	wc.Logger = b.Logger
	wc.OnEffects = wakeDispatchers.Signal
	w, err := worker.New(b.Pool, wc)
	if err != nil {
		return err
	}
	if c.Retention.Enabled {
		if err := retention.CheckShortAllowed(ctx, b.Pool, c.Retention); err != nil {
			return err
		}
		rc := c.Retention.Config(wc.ID)
		rc.Metrics, rc.Logger = retention.NewMetrics(b.Registry), b.Logger
		sweeper, err := retention.New(b.Pool, rc)
		if err != nil {
			return err
		}
		b.Logger.Info("retention enabled", "jobs", rc.Periods.Jobs, "digests", rc.Periods.Digests, "effects", rc.Periods.Effects,
			"release_runs", rc.Periods.ReleaseRuns, "audit", rc.Periods.Audit, "batch_size", rc.BatchSize)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); sweeper.Run(rctx) }()
		defer func() { cancel(); <-done }() // the worker stopped (ctx ended or it failed): hand the lease over
	} else {
		// Registered all the same: the leader gauge reads 0, so BoardReadyOpsRetentionNoLeader
		// fires while retention is off instead of its alerts losing their series and going quiet
		// (docs/operations.md, "Runbook: retention behind").
		retention.NewMetrics(b.Registry)
		b.Logger.Warn("retention disabled: nothing is deleted and BoardReadyOpsRetentionNoLeader fires until it is enabled again")
	}
	b.Logger.Info("lifecycle worker starting", "worker_id", wc.ID, "concurrency", wc.Concurrency, "batch_size", wc.BatchSize,
		"lease", wc.Lease, "listen", wc.Listen)
	return w.Run(ctx)
}
