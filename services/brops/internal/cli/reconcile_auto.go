package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/boardreadyops/cloud/pkg/githubapp"
	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/reconciliation"
)

// githubFlags registers the App's credentials on cmd (reconcile inspect and auto, webhooks
// redeliver), with defaults from the environment. A malformed BOARDREADYOPS_GITHUB_APP_ID fails
// cmd before it runs, unless --github-app-id is given: the flag wins.
func (g *globals) githubFlags(cmd *cobra.Command, apiURL *string, appID *int64, keyFile *string) {
	id, idErr := envInt(g.getenv, "BOARDREADYOPS_GITHUB_APP_ID")
	cmd.Flags().StringVar(apiURL, "github-api-url", envOr(g.getenv, "BOARDREADYOPS_GITHUB_API_URL", "https://api.github.com/"), "GitHub REST API base URL")
	cmd.Flags().Int64Var(appID, "github-app-id", id, "GitHub App id")
	cmd.Flags().StringVar(keyFile, "github-private-key-file", g.getenv("BOARDREADYOPS_GITHUB_PRIVATE_KEY_FILE"), "GitHub App private key file")
	if idErr != nil {
		next := cmd.PreRunE
		cmd.PreRunE = func(c *cobra.Command, args []string) error {
			if !c.Flags().Changed("github-app-id") {
				return usageError{idErr}
			}
			if next != nil {
				return next(c, args)
			}
			return nil
		}
	}
}

func (g *globals) github(apiURL string, appID int64, keyFile, what string) (*githubapp.Client, error) {
	if appID <= 0 || keyFile == "" {
		return nil, usageError{fmt.Errorf("%s asks GitHub: set BOARDREADYOPS_GITHUB_APP_ID and BOARDREADYOPS_GITHUB_PRIVATE_KEY_FILE (or the flags)", what)}
	}
	key, err := githubapp.ReadPrivateKey(keyFile)
	if err != nil {
		return nil, err
	}
	return githubapp.New(githubapp.Config{AppID: appID, PrivateKey: key, BaseURL: apiURL, Timeout: 20 * time.Second})
}

// maxCandidateRuns is how many workflow_dispatch runs candidatesFor reads, newest first.
const maxCandidateRuns = 500

// tooManyRunsError says that more workflow_dispatch runs were created since a dispatch's delivery
// started than candidatesFor reads: the oldest, those nearest the dispatch, were not looked at,
// so neither a match nor the absence of one can be decided from what was read.
type tooManyRunsError struct {
	effect int64
	since  time.Time
	file   string
}

func (e *tooManyRunsError) Error() string {
	return fmt.Sprintf("effect %d: more than %d workflow_dispatch runs of %s since %s, newest first: the oldest, nearest the dispatch, were not read; "+
		"look for its run on GitHub (the workflow's runs created from that time) and resolve it by hand, never --not-dispatched from this",
		e.effect, maxCandidateRuns, e.file, e.since.UTC().Format(time.RFC3339))
}

// candidatesFor lists the workflow_dispatch runs GitHub created since the dispatch's delivery
// started (a minute of slack for clock skew) and classifies them. When more were created than it
// reads, it returns them with a *tooManyRunsError.
func candidatesFor(ctx context.Context, gh *githubapp.Client, e outbox.Effect) (dispatchPayload, []reconciliation.Candidate, error) {
	var p dispatchPayload
	if e.EffectType != outbox.EffectWorkflowDispatch || e.DeliveryStartedAt == nil {
		return p, nil, usageError{fmt.Errorf("effect %d is a %s in %s: only started workflow dispatches are reconciled", e.ID, e.EffectType, e.Status)}
	}
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		return p, nil, fmt.Errorf("effect %d payload: %w", e.ID, err)
	}
	from := e.DeliveryStartedAt.Add(-time.Minute)
	runs, truncated, err := gh.ListWorkflowRuns(ctx, e.InstallationID, p.RepositoryFullName, p.WorkflowFile, "workflow_dispatch", from, maxCandidateRuns)
	if err != nil {
		return p, nil, fmt.Errorf("effect %d: list workflow runs: %w", e.ID, err)
	}
	cands := reconciliation.Candidates(p.dispatch(), runs)
	if truncated {
		return p, cands, &tooManyRunsError{effect: e.ID, since: from, file: p.WorkflowFile}
	}
	return p, cands, nil
}

// autoDecision is one record's outcome in reconcile auto.
type autoDecision struct {
	Effect       int64                      `json:"effect"`
	ReleaseRunID string                     `json:"release_run_id"`
	Action       string                     `json:"action"` // resolved, left, would_resolve, would_leave
	Decision     reconciliation.Decision    `json:"decision"`
	Candidates   []reconciliation.Candidate `json:"candidates"`
}

func newReconcileAutoCmd(g *globals) *cobra.Command {
	var apiURL, keyFile, operator string
	var appID int64
	var dryRun bool
	var limit int
	cmd := &cobra.Command{
		Use:   "auto",
		Short: "Resolve the dispatches with exactly one exact match on GitHub; leave the rest for a person",
		Long: `For every dispatch in reconciliation_required (the oldest first, at most --limit), ask GitHub
as inspect does. A record with exactly one exact match — run name carrying the release-run and
execution-attempt ids, the release's head SHA, the tag as head branch — is resolved with that run
(audited as outbox.reconciliation.repair). Every other record is left for a person and audited as
outbox.reconciliation.left with the reason: several exact matches, a run named for the attempt on
another branch or commit (a decoy), only runs of the same tag, or none. --dry-run asks GitHub and
prints the decisions without writing anything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(operator) == "" {
				return usageError{errors.New("--operator is required (or set BOARDREADYOPS_OPERATOR)")}
			}
			if limit < 1 || limit > 1000 {
				return usageError{fmt.Errorf("--limit %d: want 1 to 1000", limit)}
			}
			gh, err := g.github(apiURL, appID, keyFile, "auto")
			if err != nil {
				return err
			}
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			backlog, err := reconciliationBacklog(cmd.Context(), pool)
			if err != nil {
				return err
			}
			out, err := reconcileAuto(cmd.Context(), pool, gh, operator, limit, dryRun)
			if err != nil {
				return err
			}
			// Records beyond --limit: said above the table, or on stderr beside -o json's list.
			waiting := ""
			if rest := backlog - len(out); len(out) == limit && rest > 0 {
				waiting = fmt.Sprintf("%d more were not examined (--limit %d; passes take turns, the least recently examined first): run it again", rest, limit)
				if g.output == "json" {
					fmt.Fprintf(g.stderr, "brops: %s\n", waiting)
				}
			}
			return g.render(out, func(w io.Writer) {
				if waiting != "" {
					fmt.Fprintln(w, waiting)
				}
				fmt.Fprintln(w, "EFFECT\tRELEASE RUN\tACTION\tRUN\tREASON")
				for _, d := range out {
					fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", d.Effect, d.ReleaseRunID, d.Action, i64(nonZero(d.Decision.WorkflowRunID)), d.Decision.Reason)
				}
			})
		},
	}
	g.githubFlags(cmd, &apiURL, &appID, &keyFile)
	g.operatorFlag(cmd, &operator)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "ask GitHub and print the decisions; write nothing")
	cmd.Flags().IntVar(&limit, "limit", 100, "at most this many records (1-1000)")
	return cmd
}

// reconciliationQueue is the next limit workflow dispatches in reconciliation_required for a
// pass of reconcile auto: those no pass has left since they entered it first, oldest first (by
// updated_at, the moment each entered; leaving one writes only an audit row), then those left the
// longest ago. So passes take turns over the records a person has not resolved yet, and records
// left again and again do not keep a pass from the others, old or new. It reads every record in
// reconciliation_required (the attention index; a few hundred after a restore) and each one's
// audit rows by subject.
func reconciliationQueue(ctx context.Context, pool *pgxpool.Pool, limit int) ([]outbox.Effect, error) {
	rows, err := pool.Query(ctx, `SELECT `+outbox.Columns+` FROM control_plane_outbox o
		WHERE o.status = 'reconciliation_required' AND o.effect_type = $1
		ORDER BY (SELECT max(a.occurred_at) FROM control_plane_audit a
		          WHERE a.subject_type = 'outbox' AND a.subject_id = o.id AND a.action = 'outbox.reconciliation.left'
		            AND a.occurred_at >= o.updated_at) NULLS FIRST, o.updated_at, o.id
		LIMIT $2`, outbox.EffectWorkflowDispatch, limit)
	if err != nil {
		return nil, fmt.Errorf("list the dispatches to reconcile: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[outbox.Effect])
}

// reconciliationBacklog counts the workflow dispatches in reconciliation_required.
func reconciliationBacklog(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM control_plane_outbox WHERE status = 'reconciliation_required' AND effect_type = $1`,
		outbox.EffectWorkflowDispatch).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the dispatches to reconcile: %w", err)
	}
	return n, nil
}

func reconcileAuto(ctx context.Context, pool *pgxpool.Pool, gh *githubapp.Client, operator string, limit int, dryRun bool) ([]autoDecision, error) {
	effects, err := reconciliationQueue(ctx, pool, limit)
	if err != nil {
		return nil, err
	}
	store := &outbox.Store{}
	out := make([]autoDecision, 0, len(effects))
	for _, e := range effects {
		p, cands, err := candidatesFor(ctx, gh, e)
		var many *tooManyRunsError
		if err != nil && !errors.As(err, &many) {
			return out, err
		}
		d := autoDecision{Effect: e.ID, ReleaseRunID: p.ReleaseRunID, Decision: reconciliation.Decide(cands), Candidates: cands}
		if many != nil {
			// Not all runs read: no decision, left for a person with the reason.
			d.Decision = reconciliation.Decision{Reason: many.Error()}
		}
		switch {
		case dryRun && d.Decision.Resolve:
			d.Action = "would_resolve"
		case dryRun:
			d.Action = "would_leave"
		case d.Decision.Resolve:
			if err := store.ResolveReconciliationRepair(ctx, pool, e.ID, operator, d.Decision.WorkflowRunID, "reconcile auto: "+d.Decision.Reason); err != nil {
				return out, fmt.Errorf("effect %d: %w", e.ID, err)
			}
			d.Action = "resolved"
		default:
			evidence, _ := json.Marshal(map[string]any{"exact": d.Decision.Exact, "name_only": d.Decision.NameOnly, "tag": d.Decision.Tag, "candidates": len(cands)})
			if _, err := pool.Exec(ctx, `INSERT INTO control_plane_audit (operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
				VALUES ($1, 'outbox.reconciliation.left', 'outbox', $2, $3, $4::jsonb, 'reconciliation_required', 'reconciliation_required')`,
				operator, e.ID, "reconcile auto: "+d.Decision.Reason, string(evidence)); err != nil {
				return out, fmt.Errorf("effect %d: audit the decision: %w", e.ID, err)
			}
			d.Action = "left"
		}
		out = append(out, d)
	}
	return out, nil
}

func nonZero(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}
