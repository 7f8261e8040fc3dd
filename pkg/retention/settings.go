package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/boardreadyops/cloud/pkg/config"
	"github.com/boardreadyops/cloud/pkg/database"
)

// MinSafeJobs is the shortest jobs (and inbox) period allowed without Settings.AllowShort: an
// inbox row is how a redelivered delivery is recognised by its id, and GitHub redelivers for
// three days.
const MinSafeJobs = 72 * time.Hour

// DefaultDigests is the default replay window (BOARDREADYOPS_RETENTION_DIGESTS): thirty days,
// what docs/security.md recommends since migration 00019.
const DefaultDigests = 30 * 24 * time.Hour

// MinAudit is the shortest audit period: the database refuses less, whoever asks.
const MinAudit = 365 * 24 * time.Hour

// Settings are the BOARDREADYOPS_RETENTION_* settings, shared by lifecycle (which runs the
// service) and brops retention (which reports and runs what the same settings would delete).
type Settings struct {
	Enabled    bool
	Periods    Periods
	BatchSize  int
	BatchPause time.Duration
	Interval   time.Duration
	Lease      time.Duration
	// AllowShort lets the jobs and digests periods be shorter than MinSafeJobs (load tests).
	AllowShort bool
}

// RegisterPeriods adds the per-table periods to e.
func (s *Settings) RegisterPeriods(e *config.Env) {
	e.Duration(&s.Periods.Jobs, "retention-jobs", "BOARDREADYOPS_RETENTION_JOBS", 7*24*time.Hour,
		"delete completed jobs and their inbox rows completed longer ago (0: never)")
	e.Duration(&s.Periods.Digests, "retention-digests", "BOARDREADYOPS_RETENTION_DIGESTS", DefaultDigests,
		"the replay window: delete body digests received longer ago whose delivery has left the inbox (0: never; at least 72h; raised to the jobs period, never when jobs is never)")
	e.Duration(&s.Periods.Effects, "retention-effects", "BOARDREADYOPS_RETENTION_EFFECTS", 7*24*time.Hour,
		"delete completed effects of finished release runs completed longer ago (0: never)")
	e.Duration(&s.Periods.ReleaseRuns, "retention-release-runs", "BOARDREADYOPS_RETENTION_RELEASE_RUNS", 90*24*time.Hour,
		"delete finished release runs, their attempts and effects, finished longer ago (0: never)")
	e.Duration(&s.Periods.Audit, "retention-audit", "BOARDREADYOPS_RETENTION_AUDIT", 0,
		"delete audit rows older than this (0: never, the default; else at least 8760h)")
	e.Int(&s.BatchSize, "retention-batch-size", "BOARDREADYOPS_RETENTION_BATCH_SIZE", 1000, "rows one retention delete removes (1-10000)")
	e.Bool(&s.AllowShort, "retention-allow-short", "BOARDREADYOPS_RETENTION_ALLOW_SHORT", false,
		"allow a jobs or digests period under 72h (load tests; redeliveries and replays older than it are stored again)")
}

// Register adds every setting (the service's too) to e.
func (s *Settings) Register(e *config.Env) {
	e.Bool(&s.Enabled, "retention", "BOARDREADYOPS_RETENTION_ENABLED", true, "run the retention maintenance service (one replica at a time)")
	s.RegisterPeriods(e)
	e.Duration(&s.BatchPause, "retention-batch-pause", "BOARDREADYOPS_RETENTION_BATCH_PAUSE", 100*time.Millisecond, "pause between two retention batches")
	e.Duration(&s.Interval, "retention-interval", "BOARDREADYOPS_RETENTION_INTERVAL", 5*time.Minute, "wait between two retention passes")
	e.Duration(&s.Lease, "retention-lease", "BOARDREADYOPS_RETENTION_LEASE", 30*time.Second,
		"retention leader lease (1s-1h); another replica takes over this long after the leader died")
}

// Validate checks the settings.
func (s *Settings) Validate() error {
	var errs []error
	for _, p := range []struct {
		env string
		d   time.Duration
	}{{"BOARDREADYOPS_RETENTION_JOBS", s.Periods.Jobs}, {"BOARDREADYOPS_RETENTION_DIGESTS", s.Periods.Digests},
		{"BOARDREADYOPS_RETENTION_EFFECTS", s.Periods.Effects},
		{"BOARDREADYOPS_RETENTION_RELEASE_RUNS", s.Periods.ReleaseRuns}, {"BOARDREADYOPS_RETENTION_AUDIT", s.Periods.Audit}} {
		if p.d < 0 || (p.d > 0 && p.d < time.Second) {
			errs = append(errs, fmt.Errorf("%s %v: want 0 (never) or at least 1s", p.env, p.d))
		}
	}
	if s.Periods.Audit > 0 && s.Periods.Audit < MinAudit {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_RETENTION_AUDIT %v: want 0 (never) or at least 8760h (365 days)", s.Periods.Audit))
	}
	if s.Periods.Jobs > 0 && s.Periods.Jobs < MinSafeJobs && !s.AllowShort {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_RETENTION_JOBS %v is shorter than GitHub's redelivery window (72h): set BOARDREADYOPS_RETENTION_ALLOW_SHORT=true to mean it", s.Periods.Jobs))
	}
	errs = append(errs, s.validateDigests())
	if s.BatchSize < 1 || s.BatchSize > 10000 {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_RETENTION_BATCH_SIZE %d: want 1 to 10000", s.BatchSize))
	}
	if s.BatchPause < 0 {
		errs = append(errs, errors.New("BOARDREADYOPS_RETENTION_BATCH_PAUSE must not be negative"))
	}
	if s.Enabled && (s.Interval < time.Second || s.Interval > 24*time.Hour) {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_RETENTION_INTERVAL %v: want 1s to 24h", s.Interval))
	}
	if s.Enabled && (s.Lease < time.Second || s.Lease > time.Hour) {
		errs = append(errs, fmt.Errorf("BOARDREADYOPS_RETENTION_LEASE %v: want 1s to 1h", s.Lease))
	}
	return errors.Join(errs...)
}

// Config returns the service configuration of these settings for owner.
func (s *Settings) Config(owner string) Config {
	return Config{Owner: owner, Periods: s.Periods, BatchSize: s.BatchSize, BatchPause: s.BatchPause, Interval: s.Interval, Lease: s.Lease}
}

// validateDigests keeps the digests period from being shorter than the replay window it is: a
// digest is the only thing that recognises a signed body resent under a new delivery id
// (docs/security.md, "The replay window"). A period under GitHub's redelivery window (72h) is
// refused unless AllowShort. A period shorter than the jobs period is raised to it, and beside a
// jobs period of never (0) it becomes never: the inbox keeps a stored delivery's digest as long
// as its row anyway, so a shorter period would forget only the bodies of ignored events early.
// Raising instead of refusing keeps a deployment that set only the jobs period (or none) starting
// after an upgrade; lifecycle logs the period in force.
func (s *Settings) validateDigests() error {
	d, jobs := s.Periods.Digests, s.Periods.Jobs
	switch {
	case d <= 0:
		return nil
	case d < MinSafeJobs && !s.AllowShort:
		return fmt.Errorf("BOARDREADYOPS_RETENTION_DIGESTS %v is shorter than GitHub's redelivery window (72h), the shortest replay window: set BOARDREADYOPS_RETENTION_ALLOW_SHORT=true to mean it", d)
	case jobs == 0:
		s.Periods.Digests = 0
	case d < jobs:
		s.Periods.Digests = jobs
	}
	return nil
}

// ErrShortNotAllowed: a jobs or digests period under MinSafeJobs, which the database refuses to a
// login outside boardreadyops_clock (migration 00074), whatever AllowShort says.
var ErrShortNotAllowed = errors.New("a jobs or digests retention period under 72h needs a login in boardreadyops_clock")

// CheckShortAllowed refuses, before any pass, periods the database would refuse on every pass:
// with AllowShort, a jobs or digests period under MinSafeJobs is deleted only for a session whose
// login is a member of boardreadyops_clock (load tests; a superuser is one). Since the jobs table
// comes first, every pass would fail and nothing at all would be deleted.
func CheckShortAllowed(ctx context.Context, db database.DBTX, s Settings) error {
	short := func(d time.Duration) bool { return d > 0 && d < MinSafeJobs }
	if !short(s.Periods.Jobs) && !short(s.Periods.Digests) {
		return nil
	}
	var member bool
	if err := db.QueryRow(ctx, `SELECT pg_has_role(session_user, 'boardreadyops_clock', 'MEMBER')`).Scan(&member); err != nil {
		return fmt.Errorf("check the retention periods' login: %w", err)
	}
	if !member {
		return fmt.Errorf("%w (migration 00074): jobs %v, digests %v; the database refuses them to this login, and every retention pass would fail. Use 72h or more, or a login in boardreadyops_clock for a load test",
			ErrShortNotAllowed, s.Periods.Jobs, s.Periods.Digests)
	}
	return nil
}
