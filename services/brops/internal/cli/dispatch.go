package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
)

type pauseRow struct {
	InstallationID int64     `db:"installation_id" json:"installation_id"` // 0: every installation
	Operator       string    `db:"operator" json:"operator"`
	Reason         string    `db:"reason" json:"reason"`
	PausedAt       time.Time `db:"paused_at" json:"paused_at"`
}

func newDispatchCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dispatch",
		Short: "Pause and resume workflow dispatches (during a GitHub incident)",
		Long: `A pause is durable (it survives restarts and applies to every dispatcher replica) and stops only
workflow dispatches: check runs are still created and completed. Paused dispatches stay available,
with no attempt spent, and are sent once the pause is lifted. A pause is global or for one
installation (--installation); a global pause and an installation's own are independent.`,
	}
	for _, verb := range []string{"pause", "resume"} {
		var installation int64
		var reason, operator string
		c := &cobra.Command{
			Use:   verb + " [--installation ID] --reason TEXT",
			Short: map[string]string{"pause": "Stop sending workflow dispatches (audited)", "resume": "Send workflow dispatches again (audited)"}[verb],
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if err := requireAudited(reason, operator, "say why you "+verb+" dispatches"); err != nil {
					return err
				}
				if installation < 0 {
					return usageError{fmt.Errorf("--installation %d: want a GitHub installation id", installation)}
				}
				pool, err := g.pool(cmd.Context())
				if err != nil {
					return err
				}
				defer pool.Close()
				var scope any // NULL: global
				what := "every installation"
				if installation > 0 {
					scope, what = installation, fmt.Sprintf("installation %d", installation)
				}
				fn := map[string]string{"pause": "boardreadyops_outbox_pause_dispatches", "resume": "boardreadyops_outbox_resume_dispatches"}[verb]
				var changed bool
				if err := pool.QueryRow(cmd.Context(), `SELECT `+fn+`($1, $2, $3)`, scope, operator, reason).Scan(&changed); err != nil {
					return fmt.Errorf("%s dispatches of %s: %w", verb, what, err)
				}
				return g.render(map[string]any{"scope": what, "action": verb, "changed": changed}, func(w io.Writer) {
					switch {
					case verb == "pause" && changed:
						fmt.Fprintf(w, "workflow dispatches of %s paused; check runs keep working\n", what)
					case verb == "pause":
						fmt.Fprintf(w, "workflow dispatches of %s were already paused; reason updated\n", what)
					case changed:
						fmt.Fprintf(w, "workflow dispatches of %s resumed\n", what)
					default:
						fmt.Fprintf(w, "workflow dispatches of %s were not paused (brops dispatch status lists the pauses)\n", what)
					}
				})
			},
		}
		c.Flags().Int64Var(&installation, "installation", 0, "only this installation (default: every installation)")
		c.Flags().StringVar(&reason, "reason", "", "why (audited)")
		g.operatorFlag(c, &operator)
		cmd.AddCommand(c)
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "List the dispatch pauses in force",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			rows, err := pool.Query(cmd.Context(), `SELECT installation_id, operator, reason, paused_at FROM dispatch_pauses ORDER BY installation_id`)
			if err != nil {
				return fmt.Errorf("read dispatch pauses: %w", err)
			}
			pauses, err := pgx.CollectRows(rows, pgx.RowToStructByName[pauseRow])
			if err != nil {
				return fmt.Errorf("read dispatch pauses: %w", err)
			}
			return g.render(pauses, func(w io.Writer) {
				if len(pauses) == 0 {
					fmt.Fprintln(w, "no dispatch pause: workflow dispatches are sent")
					return
				}
				fmt.Fprintln(w, "SCOPE\tSINCE\tBY\tREASON")
				for _, p := range pauses {
					scope := "global"
					if p.InstallationID > 0 {
						scope = fmt.Sprintf("installation %d", p.InstallationID)
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", scope, p.PausedAt.UTC().Format(time.RFC3339), p.Operator, p.Reason)
				}
			})
		},
	})
	return cmd
}
