package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/reconciliation"
)

// dispatchPayload is what reconciliation reads of a workflow dispatch's payload.
type dispatchPayload struct {
	ReleaseRunID       string `json:"release_run_id"`
	ExecutionAttemptID string `json:"execution_attempt_id"`
	AttemptNumber      int    `json:"attempt_number"`
	RepositoryFullName string `json:"repository_full_name"`
	WorkflowFile       string `json:"workflow_file"`
	Ref                string `json:"ref"`
	HeadSHA            string `json:"head_sha"`
}

func (p dispatchPayload) dispatch() reconciliation.Dispatch {
	return reconciliation.Dispatch{ReleaseRunID: p.ReleaseRunID, ExecutionAttemptID: p.ExecutionAttemptID, Ref: p.Ref, HeadSHA: p.HeadSHA}
}

// maxReconcileList is how many records brops reconcile list shows, the newest first.
const maxReconcileList = 1000

func newReconcileCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Resolve workflow dispatches whose outcome is unknown (reconciliation_required)",
		Long: `A workflow dispatch that may have reached GitHub is never replayed. Find out what GitHub did
(inspect), then record it (resolve): either the run GitHub created, or that it created none.`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List dispatches that need reconciliation",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			effects, err := listEffects(cmd.Context(), pool, queueList{status: outbox.StatusReconciliationRequired,
				effectType: outbox.EffectWorkflowDispatch, limit: maxReconcileList})
			if err != nil {
				return err
			}
			// More than the list shows: said above the table, or on stderr beside -o json's list.
			more := ""
			if len(effects) == maxReconcileList {
				backlog, err := reconciliationBacklog(cmd.Context(), pool)
				if err != nil {
					return err
				}
				if backlog > len(effects) {
					more = fmt.Sprintf("the newest %d of %d shown", len(effects), backlog)
					if g.output == "json" {
						fmt.Fprintf(g.stderr, "brops: %s\n", more)
					}
				}
			}
			return g.render(effects, func(w io.Writer) {
				if more != "" {
					fmt.Fprintln(w, more)
				}
				fmt.Fprintln(w, "ID\tRELEASE RUN\tATTEMPT\tDELIVERY STARTED\tLAST ERROR")
				for _, e := range effects {
					fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", e.ID, e.ReleaseRunID, str(e.ExecutionAttemptID), since(e.DeliveryStartedAt), truncate(str(e.LastError), 80))
				}
			})
		},
	})

	var apiURL, keyFile string
	var appID int64
	inspect := &cobra.Command{
		Use:   "inspect ID",
		Short: "Ask GitHub (read-only) which workflow runs the dispatch may have created",
		Long: `List the workflow's workflow_dispatch runs created since the dispatch's delivery started, and
mark as exact those whose run name carries the release-run and execution-attempt ids, whose head
SHA is the release's commit and whose head branch is its tag (name_only: the name matches but the
branch or commit does not — a decoy). A release workflow names its runs so (README, "Running
against GitHub"):

  run-name: release ${{ inputs.release_run_id }} attempt ${{ inputs.execution_attempt_id }}`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			e, err := outbox.Get(cmd.Context(), pool, ids[0])
			if err != nil {
				return err
			}
			gh, err := g.github(apiURL, appID, keyFile, "inspect")
			if err != nil {
				return err
			}
			p, cands, err := candidatesFor(cmd.Context(), gh, e)
			if err != nil {
				return err
			}
			advice := adviceFor(e.ID, cands)
			return g.render(map[string]any{"effect": e.ID, "status": e.Status, "repository": p.RepositoryFullName, "workflow": p.WorkflowFile,
				"release_run_id": p.ReleaseRunID, "execution_attempt_id": p.ExecutionAttemptID, "delivery_started_at": e.DeliveryStartedAt,
				"candidates": cands, "advice": advice}, func(w io.Writer) {
				fmt.Fprintf(w, "effect %d (%s): %s %s, release run %s attempt %s, delivery started %s\n\n", e.ID, e.Status, p.RepositoryFullName,
					p.WorkflowFile, p.ReleaseRunID, p.ExecutionAttemptID, since(e.DeliveryStartedAt))
				fmt.Fprintln(w, "RUN\tMATCH\tCREATED\tSTATUS\tNAME\tURL")
				for _, c := range cands {
					fmt.Fprintf(w, "%d\t%s\t%s\t%s/%s\t%s\t%s\n", c.ID, c.Match, c.CreatedAt.UTC().Format(time.RFC3339), c.Status, c.Conclusion, c.DisplayTitle, c.HTMLURL)
				}
				fmt.Fprintf(w, "\n%s\n", advice)
			})
		},
	}
	g.githubFlags(inspect, &apiURL, &appID, &keyFile)
	cmd.AddCommand(inspect, newReconcileAutoCmd(g))

	var runID int64
	var notDispatched bool
	var evidence, operator string
	resolve := &cobra.Command{
		Use:   "resolve ID (--workflow-run-id N | --not-dispatched) --evidence TEXT",
		Short: "Record what GitHub did for a dispatch that needs reconciliation (audited)",
		Long: `--workflow-run-id N: GitHub created run N; it is recorded and the attempt advances, as the
completion would have. --not-dispatched: GitHub created no run; the record is closed and a fresh
dispatch for the same attempt is enqueued under a new idempotency key. Both are audited with your
identity and the evidence, and both refuse a record that is not in reconciliation_required.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			if (runID > 0) == notDispatched {
				return usageError{errors.New("give exactly one of --workflow-run-id N and --not-dispatched")}
			}
			if strings.TrimSpace(evidence) == "" {
				return usageError{errors.New("--evidence is required: what you found on GitHub")}
			}
			if strings.TrimSpace(operator) == "" {
				return usageError{errors.New("--operator is required (or set BOARDREADYOPS_OPERATOR)")}
			}
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			store := &outbox.Store{}
			out := map[string]any{"effect": ids[0]}
			if runID > 0 {
				if err := store.ResolveReconciliationRepair(cmd.Context(), pool, ids[0], operator, runID, evidence); err != nil {
					return err
				}
				out["resolution"], out["workflow_run_id"] = "repair", runID
			} else {
				newID, err := store.ResolveReconciliationSupersede(cmd.Context(), pool, ids[0], operator, evidence)
				if err != nil {
					return err
				}
				out["resolution"], out["replacement"] = "supersede", newID
			}
			return g.render(out, func(w io.Writer) {
				if runID > 0 {
					fmt.Fprintf(w, "effect %d repaired: workflow run %d recorded, the attempt advanced\n", ids[0], runID)
				} else {
					fmt.Fprintf(w, "effect %d superseded: fresh dispatch enqueued as effect %v\n", ids[0], out["replacement"])
				}
			})
		},
	}
	resolve.Flags().Int64Var(&runID, "workflow-run-id", 0, "the run GitHub created for this dispatch")
	resolve.Flags().BoolVar(&notDispatched, "not-dispatched", false, "GitHub created no run for this dispatch")
	resolve.Flags().StringVar(&evidence, "evidence", "", "what you found on GitHub (audited)")
	g.operatorFlag(resolve, &operator)
	cmd.AddCommand(resolve)
	return cmd
}

func adviceFor(id int64, cands []reconciliation.Candidate) string {
	d := reconciliation.Decide(cands)
	switch {
	case d.Resolve:
		return fmt.Sprintf("GitHub created run %d for this dispatch: brops reconcile resolve %d --workflow-run-id %d --evidence \"run %d, exact match: run name, head SHA, tag\" (or brops reconcile auto)",
			d.WorkflowRunID, id, d.WorkflowRunID, d.WorkflowRunID)
	case len(d.Exact) == 0 && len(d.NameOnly) == 0 && len(d.Tag) == 1:
		return fmt.Sprintf("run %d released this tag for a release run the database no longer has (a restore): adopt it with brops reconcile resolve %d --workflow-run-id %d --evidence \"run %d, same tag, dispatched before the restore\"",
			d.Tag[0], id, d.Tag[0], d.Tag[0])
	case len(cands) == 0:
		return fmt.Sprintf("no workflow_dispatch run since the delivery started: if enough time has passed, brops reconcile resolve %d --not-dispatched --evidence \"no run since <time>\"", id)
	case len(d.Exact) == 0 && len(d.NameOnly) == 0:
		return "no run carries this attempt's ids; if the workflow does not set run-name from its inputs, compare the runs above by time before resolving"
	}
	return d.Reason
}

func envOr(getenv func(string) string, k, def string) string {
	if v := getenv(k); v != "" {
		return v
	}
	return def
}

// envInt reads the integer variable k: 0 when unset, an error naming k when it is not an integer
// (read as 0, it would only be reported as unset).
func envInt(getenv func(string) string, k string) (int64, error) {
	v := getenv(k)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: not an integer", k, v)
	}
	return n, nil
}
