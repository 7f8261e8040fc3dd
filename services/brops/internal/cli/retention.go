package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/boardreadyops/cloud/pkg/config"
	"github.com/boardreadyops/cloud/pkg/retention"
)

// retentionFlags are the periods brops retention works with: the lifecycle service's
// BOARDREADYOPS_RETENTION_* settings (run brops with the same environment), overridable per flag.
type retentionFlags struct {
	s   retention.Settings
	err error
}

func (r *retentionFlags) register(cmd *cobra.Command, getenv config.Getenv) {
	e := config.NewEnv(flag.NewFlagSet("retention", flag.ContinueOnError), getenv)
	r.s.RegisterPeriods(e)
	r.err = e.Parse(nil)
	f := cmd.PersistentFlags()
	f.DurationVar(&r.s.Periods.Jobs, "jobs", r.s.Periods.Jobs, "completed jobs and their inbox rows (env BOARDREADYOPS_RETENTION_JOBS; 0: never)")
	f.DurationVar(&r.s.Periods.Digests, "digests", r.s.Periods.Digests, "body digests, the replay window (env BOARDREADYOPS_RETENTION_DIGESTS; 0: never; at least 72h; raised to --jobs)")
	f.DurationVar(&r.s.Periods.Effects, "effects", r.s.Periods.Effects, "completed effects of finished runs (env BOARDREADYOPS_RETENTION_EFFECTS; 0: never)")
	f.DurationVar(&r.s.Periods.ReleaseRuns, "release-runs", r.s.Periods.ReleaseRuns, "finished release runs (env BOARDREADYOPS_RETENTION_RELEASE_RUNS; 0: never)")
	f.DurationVar(&r.s.Periods.Audit, "audit", r.s.Periods.Audit, "audit rows (env BOARDREADYOPS_RETENTION_AUDIT; 0: never)")
	f.IntVar(&r.s.BatchSize, "batch-size", r.s.BatchSize, "rows per delete (env BOARDREADYOPS_RETENTION_BATCH_SIZE)")
	f.BoolVar(&r.s.AllowShort, "allow-short", r.s.AllowShort, "allow a jobs or digests period under 72h (env BOARDREADYOPS_RETENTION_ALLOW_SHORT)")
}

func (r *retentionFlags) validate() error {
	if r.err != nil {
		return usageError{r.err}
	}
	// The service's own settings (interval, lease) are not brops': validate a copy without them,
	// then keep the periods as validated. Validate raises the digests period to the jobs period
	// (and to never beside a jobs period of never), as lifecycle does; brops must delete no
	// digest lifecycle keeps, nor show a period lifecycle is not using.
	s := r.s
	s.Enabled = false
	if err := s.Validate(); err != nil {
		return usageError{err}
	}
	r.s.Periods = s.Periods
	return nil
}

func newRetentionCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "retention",
		Short: "What retention deletes, and run it (docs/operations.md, Retention)",
	}
	var rf retentionFlags
	rf.register(cmd, g.getenv)

	status := &cobra.Command{
		Use:   "status",
		Short: "Per table: the period, how many rows are past it, the oldest past it, the retention leader",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := rf.validate(); err != nil {
				return err
			}
			return g.retentionStatus(cmd, rf.s, false)
		},
	}

	var dryRun, yes bool
	run := &cobra.Command{
		Use:   "run [--dry-run] [--yes]",
		Short: "Delete everything past its period now, in batches (takes the retention lease)",
		Long: `Deletes, in batches of --batch-size, what the periods make expired, exactly as the lifecycle
service does, holding the retention lease meanwhile: it refuses while a lifecycle replica holds it
(the service is already deleting). --dry-run prints what it would delete and deletes nothing.
Dead letters, reconciliation_required effects and anything a release run that is not finished
refers to are never deleted. The periods are brops' own (its environment's BOARDREADYOPS_RETENTION_*
and the flags), not read from the lifecycle service: it prints them and asks before deleting,
unless --yes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := rf.validate(); err != nil {
				return err
			}
			if dryRun {
				return g.retentionStatus(cmd, rf.s, true)
			}
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			if err := retention.CheckShortAllowed(cmd.Context(), pool, rf.s); err != nil {
				return err
			}
			if !yes && !g.confirm(fmt.Sprintf("delete what is past these periods (brops' own settings, not lifecycle's): %s? [y/N] ",
				describePeriods(rf.s.Periods))) {
				return usageError{errors.New("not confirmed (pass --yes in scripts; --dry-run shows what would go)")}
			}
			svc, err := retention.New(pool, retention.Config{Owner: bropsOwner(), Periods: rf.s.Periods, BatchSize: rf.s.BatchSize, Lease: time.Minute})
			if err != nil {
				return err
			}
			deleted, err := svc.RunOnce(cmd.Context())
			if errors.Is(err, retention.ErrLeaseHeld) {
				return fmt.Errorf("%w (a lifecycle replica is running retention; see brops retention status)", err)
			}
			if rerr := g.render(deleted, func(w io.Writer) {
				fmt.Fprintln(w, "TABLE\tDELETED")
				for _, t := range retention.Tables {
					if rf.s.Periods.Of(t) > 0 {
						fmt.Fprintf(w, "%s\t%d\n", t, deleted[t])
					}
				}
			}); rerr != nil {
				return rerr
			}
			return err
		},
	}
	run.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be deleted, delete nothing")
	run.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	cmd.AddCommand(status, run, newReindexCmd(g))
	return cmd
}

// retentionReport is brops retention status (and run --dry-run).
type retentionReport struct {
	Tables    []retention.TableStatus `json:"tables"`
	Leader    *string                 `json:"leader,omitempty"`
	LeaseTill *time.Time              `json:"lease_until,omitempty"`
	DryRun    bool                    `json:"dry_run,omitempty"`
}

func (g *globals) retentionStatus(cmd *cobra.Command, s retention.Settings, dryRun bool) error {
	pool, err := g.pool(cmd.Context())
	if err != nil {
		return err
	}
	defer pool.Close()
	st, err := (&retention.Store{}).Status(cmd.Context(), pool, s.Periods, true)
	if err != nil {
		return err
	}
	rep := retentionReport{Tables: st, DryRun: dryRun}
	var holder string
	var until time.Time
	err = pool.QueryRow(cmd.Context(), `SELECT owner, expires_at FROM retention_leases WHERE name = 'retention' AND expires_at > now()`).Scan(&holder, &until)
	switch {
	case err == nil:
		rep.Leader, rep.LeaseTill = &holder, &until
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("read the retention lease: %w", err)
	}
	return g.render(rep, func(w io.Writer) {
		if dryRun {
			fmt.Fprintln(w, "dry run: nothing deleted; a run would delete:")
		}
		fmt.Fprintln(w, "TABLE\tRETENTION\tEXPIRED\tOLDEST EXPIRED\tOLDEST")
		for _, t := range st {
			period, expired := "never", "-"
			if t.Retention != nil {
				period = t.Retention.String()
			}
			if t.Expired != nil {
				expired = fmt.Sprint(*t.Expired)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", t.Table, period, expired, timeOrDash(t.OldestExpiredAt), timeOrDash(t.OldestAt))
		}
		if rep.Leader != nil {
			fmt.Fprintf(w, "leader: %s (lease until %s)\n", holder, until.UTC().Format(time.RFC3339))
		} else {
			fmt.Fprintln(w, "leader: none (no lifecycle replica runs retention)")
		}
	})
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// bropsOwner names this brops process in the retention lease.
func bropsOwner() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("brops/%s@%s/%d", name, host, os.Getpid())
}

// describePeriods lists the periods retention deletes by, in table order ("never" for 0).
func describePeriods(p retention.Periods) string {
	parts := make([]string, 0, len(retention.Tables))
	for _, t := range retention.Tables {
		d := "never"
		if v := p.Of(t); v > 0 {
			d = v.String()
		}
		parts = append(parts, t+" "+d)
	}
	return strings.Join(parts, ", ")
}
