package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

func newRunCancelCmd(g *globals) *cobra.Command {
	var ref runRef
	var reason, operator, checkRunName string
	cmd := &cobra.Command{
		Use:   "cancel (ID | --repo OWNER/NAME --tag TAG) --reason TEXT",
		Short: "Cancel an unfinished release run: its check run completes as cancelled (audited)",
		Long: `Marks the run and its current attempt cancelled, completes its pending effects (available and
dead-lettered) as superseded by the cancellation, and enqueues the check run's completion with
conclusion cancelled (the github.check_run.complete effect; the dispatchers send it). Refused for a
finished run, for a run with an effect being delivered right now (try again in a minute), and for
a run whose dispatch awaits reconciliation (it may have started the workflow: reconcile it first).
A workflow run already running on GitHub is not stopped: cancel it in the Actions UI too.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireAudited(reason, operator, "say why the release is cancelled"); err != nil {
				return err
			}
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			run, err := ref.resolve(cmd.Context(), pool, args)
			if err != nil {
				return err
			}
			var checkRunEffect *int64
			var superseded int
			if err := pool.QueryRow(cmd.Context(), `SELECT check_run_outbox_id, superseded FROM boardreadyops_release_run_cancel($1::uuid, $2, $3, $4)`,
				run.ID, operator, reason, checkRunName).Scan(&checkRunEffect, &superseded); err != nil {
				return fmt.Errorf("cancel release run %s: %w", run.ID, err)
			}
			out := map[string]any{"release_run": run.ID, "status": "cancelled", "superseded_effects": superseded, "check_run_effect": checkRunEffect}
			return g.render(out, func(w io.Writer) {
				fmt.Fprintf(w, "release run %s (%s %s) cancelled: %d pending effect(s) superseded", run.ID, run.Repository,
					strings.TrimPrefix(run.Ref, "refs/tags/"), superseded)
				if checkRunEffect != nil {
					fmt.Fprintf(w, ", check run %s completes as cancelled (effect %d)", i64(run.CheckRunID), *checkRunEffect)
				} else if run.CheckRunID != nil {
					// The attempt's completion (its key: run and attempt) was enqueued before.
					fmt.Fprintf(w, ", check run %d already has this attempt's completion enqueued or sent", *run.CheckRunID)
				} else {
					fmt.Fprint(w, ", no check run to complete (its creation was superseded)")
				}
				fmt.Fprintln(w)
			})
		},
	}
	ref.flags(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why (audited, shown on the check run)")
	cmd.Flags().StringVar(&checkRunName, "check-run-name", envOr(g.getenv, "BOARDREADYOPS_CHECK_RUN_NAME", "BoardReadyOps release"), "the check run's name (as lifecycle's)")
	g.operatorFlag(cmd, &operator)
	return cmd
}
