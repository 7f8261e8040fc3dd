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
	cmd.AddCommand(&cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration (a no-op when none is pending)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := g.openMigrations()
			if err != nil {
				return err
			}
			defer r.Close()
			res, err := r.Up(cmd.Context())
			if err != nil {
				return err
			}
			return g.renderResults(res, "no pending migrations: schema at version %d\n", schema.ExpectedVersion())
		},
	})
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
