// Package app is the outbox dispatcher: it claims outbox effects, performs the GitHub requests
// (check runs and workflow dispatch) and commits the matching transitions.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/boardreadyops/cloud/pkg/config"
	"github.com/boardreadyops/cloud/pkg/daemon"
	"github.com/boardreadyops/cloud/pkg/githubapp"
	"github.com/boardreadyops/cloud/services/outbox-dispatcher/internal/dispatcher"
)

// Config is the dispatcher's own configuration.
type Config struct {
	D              dispatcher.Config
	GitHubURL      string
	AppID          int
	PrivateKeyFile string
	RequestTimeout time.Duration
}

func (c *Config) register(e *config.Env) {
	d := &c.D
	e.String(&c.GitHubURL, "github-api-url", "BOARDREADYOPS_GITHUB_API_URL", "https://api.github.com/", "GitHub REST API base URL")
	e.Int(&c.AppID, "github-app-id", "BOARDREADYOPS_GITHUB_APP_ID", 0, "GitHub App id")
	e.String(&c.PrivateKeyFile, "github-private-key-file", "BOARDREADYOPS_GITHUB_PRIVATE_KEY_FILE", "", "GitHub App private key (PEM) file")
	e.Duration(&c.RequestTimeout, "github-request-timeout", "BOARDREADYOPS_GITHUB_REQUEST_TIMEOUT", 20*time.Second,
		"bound on one GitHub request (at most half the lease)")
	e.Int(&d.Concurrency, "concurrency", "BOARDREADYOPS_DISPATCHER_CONCURRENCY", 32, "deliveries in flight at once")
	e.Int(&d.PerInstallation, "per-installation", "BOARDREADYOPS_DISPATCHER_PER_INSTALLATION", 1,
		"GitHub requests in flight for one installation, across replicas (GitHub asks for 1; 0: no per-installation pacing)")
	e.Duration(&d.MutationInterval, "mutation-interval", "BOARDREADYOPS_DISPATCHER_MUTATION_INTERVAL", time.Second,
		"least time from the end of one delivery of an installation to its next (GitHub asks for 1s between mutating requests)")
	e.Int(&d.BatchSize, "batch-size", "BOARDREADYOPS_DISPATCHER_BATCH_SIZE", 32, "effects claimed at once (at most the concurrency)")
	e.Duration(&d.ClaimFill, "claim-fill", "BOARDREADYOPS_DISPATCHER_CLAIM_FILL", 5*time.Millisecond,
		"while backlogged, how long to wait for a whole batch of free slots before claiming fewer (0: never waits)")
	e.Duration(&d.Lease, "lease", "BOARDREADYOPS_DISPATCHER_LEASE", time.Minute, "lease of a claimed effect; expired leases are recovered")
	e.Duration(&d.PollInterval, "poll-interval", "BOARDREADYOPS_DISPATCHER_POLL_INTERVAL", time.Second, "idle polling interval (notifications wake sooner)")
	e.Bool(&d.Listen, "listen", "BOARDREADYOPS_LISTEN", true, "LISTEN for new effects (disable behind transaction-pooling PgBouncer)")
	e.Duration(&d.MaxBackoff, "max-backoff", "BOARDREADYOPS_EFFECT_MAX_BACKOFF", 10*time.Minute, "cap of a failing effect's retry delay")
	e.String(&d.CheckRunName, "check-run-name", "BOARDREADYOPS_CHECK_RUN_NAME", "BoardReadyOps release", "check run name when an effect carries none")
}

func (c *Config) validate() error {
	d := c.D
	var errs []error
	if c.AppID <= 0 {
		errs = append(errs, errors.New("BOARDREADYOPS_GITHUB_APP_ID (or --github-app-id) is required"))
	}
	if c.PrivateKeyFile == "" {
		errs = append(errs, errors.New("BOARDREADYOPS_GITHUB_PRIVATE_KEY_FILE (or --github-private-key-file) is required"))
	}
	if d.Concurrency < 1 || d.Concurrency > 1024 {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_DISPATCHER_CONCURRENCY %d: want 1 to 1024", d.Concurrency))
	}
	if d.PerInstallation < 0 || d.PerInstallation > d.Concurrency {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_DISPATCHER_PER_INSTALLATION %d: want 0 (off) to the concurrency", d.PerInstallation))
	}
	if d.MutationInterval < 0 || d.MutationInterval > time.Minute {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_DISPATCHER_MUTATION_INTERVAL %v: want 0 to 1m", d.MutationInterval))
	}
	if d.BatchSize < 1 || d.BatchSize > 1000 {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_DISPATCHER_BATCH_SIZE %d: want 1 to 1000", d.BatchSize))
	}
	if d.ClaimFill < 0 || d.ClaimFill > time.Second {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_DISPATCHER_CLAIM_FILL %v: want 0 to 1s", d.ClaimFill))
	}
	if d.Lease < 10*time.Second || d.Lease > time.Hour {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_DISPATCHER_LEASE %v: want 10s to 1h", d.Lease))
	}
	if c.RequestTimeout <= 0 || c.RequestTimeout*2 > d.Lease {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_GITHUB_REQUEST_TIMEOUT %v must be positive and at most half the lease (%v)", c.RequestTimeout, d.Lease))
	}
	if d.PollInterval < 10*time.Millisecond || d.PollInterval > time.Minute {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_DISPATCHER_POLL_INTERVAL %v: want 10ms to 1m", d.PollInterval))
	}
	if d.MaxBackoff < time.Second {
		errs = append(errs, errors.New("BOARDREADYOPS_EFFECT_MAX_BACKOFF must be at least 1s"))
	}
	return errors.Join(errs...)
}

// Run runs the dispatcher until ctx ends.
func Run(ctx context.Context, args []string, getenv config.Getenv, stderr io.Writer) error {
	var c Config
	return daemon.Run(ctx, daemon.Spec{
		Name:     "outbox-dispatcher",
		Flags:    c.register,
		Validate: c.validate,
		Work:     func(ctx context.Context, b *daemon.Base) error { return work(ctx, b, c) },
	}, args, getenv, stderr)
}

func work(ctx context.Context, b *daemon.Base, c Config) error {
	key, err := githubapp.ReadPrivateKey(c.PrivateKeyFile)
	if err != nil {
		return err
	}
	tp := b.Traces
	tracer := tp.Tracer("github.com/boardreadyops/cloud/services/outbox-dispatcher")
	m := dispatcher.NewMetrics(b.Registry)
	var disp *dispatcher.Dispatcher // built below, on the client; the client reports budgets to it
	gh, err := githubapp.New(githubapp.Config{AppID: int64(c.AppID), PrivateKey: key, BaseURL: c.GitHubURL,
		Timeout: c.RequestTimeout, Observe: m.ObserveGitHub, Tracer: tracer,
		ObserveRate: func(id int64, r githubapp.Rate) { disp.ObserveRate(id, r) },
		OnCheckRunStateIgnored: func(installationID, checkRunID int64, sent, got string) {
			m.CheckRunStateIgnored()
			b.Logger.Warn("GitHub kept the check run's state: the check run does not show this update's status",
				"installation_id", installationID, "check_run_id", checkRunID, "sent", sent, "github_kept", got)
		}})
	if err != nil {
		return err
	}
	d := c.D
	d.WorkerID = daemon.WorkerID("outbox-dispatcher")
	d.Unpaced = d.PerInstallation == 0 // BOARDREADYOPS_DISPATCHER_PER_INSTALLATION=0: pacing off
	// GitHub: at least a minute after a secondary limit that names no time, growing exponentially.
	d.RateLimitBackoff, d.RateLimitMaxBackoff = time.Minute, 16*time.Minute
	d.GitHub, d.Metrics, d.Tracer, d.Logger = gh, m, tracer, b.Logger
	if disp, err = dispatcher.New(b.Pool, d); err != nil {
		return err
	}
	b.Logger.Info("dispatcher starting", "worker_id", d.WorkerID, "github_api_url", c.GitHubURL, "concurrency", d.Concurrency,
		"per_installation", d.PerInstallation, "mutation_interval", d.MutationInterval, "lease", d.Lease)
	return disp.Run(ctx)
}
