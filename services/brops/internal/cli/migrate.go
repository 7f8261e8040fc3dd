package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/boardreadyops/cloud/pkg/migrate"
	"github.com/boardreadyops/cloud/schema"
)

func newMigrateCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply, inspect or roll back the database schema",
		Long: `Apply, inspect or roll back the database schema.

Migrations are embedded in this binary. "up" takes a PostgreSQL advisory lock, so concurrent
runners (two Helm hook Jobs) apply each migration once; with nothing pending it changes nothing.
The connecting user is the migration user: a member of boardreadyops_schema_owner, which owns
the schema (docs/operations.md, "Bootstrap"); it needs CREATEROLE only when the group roles do not
exist yet. "up" refuses to run while schema public holds objects that neither created.`,
	}
	var to int64
	var dryRun bool
	up := &cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration, or those up to --to (a no-op when none is pending)",
		Long: `Apply the pending migrations. Before applying, it warns (on stderr) about every migration
statement that reads or rewrites a large table while holding a lock, with the table's size; the
chart's pre-upgrade hook runs this, so the warnings are in the hook Job's log. --dry-run prints the
plan (brops migrate plan) and applies nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := g.openMigrations()
			if err != nil {
				return err
			}
			defer r.Close()
			plan, err := r.Plan(cmd.Context(), to)
			if err != nil {
				return err
			}
			if dryRun {
				return g.renderPlan(plan)
			}
			for _, p := range plan {
				for _, w := range p.Warnings {
					fmt.Fprintf(g.stderr, "brops: warning: %s\n", w)
				}
			}
			var res []migrate.Result
			if to > 0 {
				res, err = r.UpTo(cmd.Context(), to)
			} else {
				res, err = r.Up(cmd.Context())
			}
			if err != nil {
				return err
			}
			version := schema.ExpectedVersion()
			if to > 0 {
				version = to
			}
			return g.renderResults(res, "no pending migrations: schema at version %d\n", version)
		},
	}
	up.Flags().Int64Var(&to, "to", 0, "apply pending migrations up to and including this version")
	up.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be applied (SQL and locks), apply nothing")
	cmd.AddCommand(up)
	var planTo int64
	plan := &cobra.Command{
		Use:   "plan",
		Short: "Print the pending migrations, their SQL and the table locks each takes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := g.openMigrations()
			if err != nil {
				return err
			}
			defer r.Close()
			p, err := r.Plan(cmd.Context(), planTo)
			if err != nil {
				return err
			}
			return g.renderPlan(p)
		},
	}
	plan.Flags().Int64Var(&planTo, "to", 0, "plan up to and including this version")
	cmd.AddCommand(plan)
	cmd.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "List every migration and whether it is applied",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := g.openMigrations()
			if err != nil {
				return err
			}
			defer r.Close()
			st, err := r.Status(cmd.Context())
			if err != nil {
				return err
			}
			return g.render(st, func(w io.Writer) {
				fmt.Fprintln(w, "VERSION\tNAME\tAPPLIED\tAPPLIED AT")
				for _, s := range st {
					at := s.AppliedAt
					if at == "" {
						at = "-"
					}
					fmt.Fprintf(w, "%d\t%s\t%t\t%s\n", s.Version, s.Name, s.Applied, at)
				}
			})
		},
	})
	var yes bool
	down := &cobra.Command{
		Use:   "down",
		Short: "Roll back the newest migration (development only; drops data)",
		Long: `Roll back the newest applied migration. This drops tables and their data; it is meant for
development. Service roles are cluster-wide and are left in place. Requires --yes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !yes {
				return usageError{errors.New("migrate down drops data: pass --yes to confirm")}
			}
			r, err := g.openMigrations()
			if err != nil {
				return err
			}
			defer r.Close()
			res, err := r.Down(cmd.Context())
			if err != nil {
				return err
			}
			return g.renderResults(res, "nothing rolled back\n")
		},
	}
	down.Flags().BoolVar(&yes, "yes", false, "confirm that data may be dropped")
	cmd.AddCommand(down)
	return cmd
}

func (g *globals) openMigrations() (*migrate.Runner, error) {
	if err := g.requireDatabase(); err != nil {
		return nil, err
	}
	return migrate.Open(g.databaseURL, slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

func (g *globals) renderResults(res []migrate.Result, emptyFormat string, args ...any) error {
	if len(res) == 0 && g.output == "table" {
		_, err := fmt.Fprintf(g.stdout, emptyFormat, args...)
		return err
	}
	return g.render(res, func(w io.Writer) {
		fmt.Fprintln(w, "VERSION\tNAME\tDIRECTION\tDURATION")
		for _, r := range res {
			fmt.Fprintf(w, "%d\t%s\t%s\t%dms\n", r.Version, r.Name, r.Direction, r.DurationMS)
		}
	})
}

// renderPlan prints each pending migration with its locks, warnings and SQL.
func (g *globals) renderPlan(plan []migrate.Planned) error {
	if len(plan) == 0 && g.output == "table" {
		_, err := fmt.Fprintln(g.stdout, "no pending migrations")
		return err
	}
	return g.render(plan, func(w io.Writer) {
		for _, p := range plan {
			fmt.Fprintf(w, "== %d %s\n", p.Version, p.Name)
			if len(p.Locks) == 0 {
				fmt.Fprintln(w, "locks: none on existing tables")
			}
			for _, l := range p.Locks {
				scan := ""
				if l.Scans {
					scan = ", reads or rewrites every row"
				}
				fmt.Fprintf(w, "lock: %s on %s%s\t%s\n", l.Mode, l.Table, scan, l.Statement)
			}
			for _, warn := range p.Warnings {
				fmt.Fprintf(w, "warning: %s\n", warn)
			}
			fmt.Fprintf(w, "%s\n\n", p.SQL)
		}
	})
}
