package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/boardreadyops/cloud/pkg/outbox"
)

type attemptRow struct {
	ID            string     `db:"id" json:"id"`
	Number        int        `db:"number" json:"number"`
	Status        string     `db:"status" json:"status"`
	WorkflowRunID *int64     `db:"workflow_run_id" json:"workflow_run_id,omitempty"`
	DispatchedAt  *time.Time `db:"dispatched_at" json:"dispatched_at,omitempty"`
	CompletedAt   *time.Time `db:"completed_at" json:"completed_at,omitempty"`
	Conclusion    *string    `db:"conclusion" json:"conclusion,omitempty"`
}

// event is one line of a release run's timeline.
type event struct {
	At      time.Time `json:"at"`
	What    string    `json:"what"`
	Attempt int       `json:"attempt,omitempty"`
	Detail  string    `json:"detail,omitempty"`
	URL     string    `json:"url,omitempty"`
}

// runView is everything show prints.
type runView struct {
	Run      runRow          `json:"release_run"`
	TraceID  string          `json:"trace_id,omitempty"`
	CheckURL string          `json:"check_run_url,omitempty"`
	Timeline []event         `json:"timeline"`
	Attempts []attemptRow    `json:"attempts"`
	Effects  []outbox.Effect `json:"effects"`
	Audit    []auditRow      `json:"audit"`
}

func newRunShowCmd(g *globals) *cobra.Command {
	var ref runRef
	var webURL string
	cmd := &cobra.Command{
		Use:   "show (ID | --repo OWNER/NAME --tag TAG)",
		Short: "Show a release run's timeline, GitHub links, trace id, effects and audit trail",
		Long: `The timeline: the push delivery received (the newest push of the tag and commit in the hour
before the run was created), the run created, the check run created, each attempt's dispatch
started and sent, its workflow run, a read-back of its workflow run when its webhook did not come,
the permission read of a Retry pressed on the check run, its completion and the check run's
updates and completion; then every
effect with its state, attempts and last error, and the audit trail (replays, reconciliation,
cancellation). With --repo and --tag, the newest run of the tag.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			run, err := ref.resolve(cmd.Context(), pool, args)
			if err != nil {
				return err
			}
			v, err := loadRunView(cmd.Context(), pool, run, strings.TrimSuffix(webURL, "/"))
			if err != nil {
				return err
			}
			return g.render(v, func(w io.Writer) { v.table(w) })
		},
	}
	ref.flags(cmd)
	cmd.Flags().StringVar(&webURL, "github-url", envOr(g.getenv, "BOARDREADYOPS_GITHUB_WEB_URL", "https://github.com"), "GitHub's web address, for links")
	return cmd
}

func loadRunView(ctx context.Context, pool *pgxpool.Pool, run runRow, web string) (runView, error) {
	v := runView{Run: run}
	rows, err := pool.Query(ctx, `SELECT id::text AS id, number, status, workflow_run_id, dispatched_at, completed_at, conclusion
		FROM execution_attempts WHERE release_run_id = $1 ORDER BY number`, run.ID)
	if err != nil {
		return v, fmt.Errorf("read attempts: %w", err)
	}
	if v.Attempts, err = pgx.CollectRows(rows, pgx.RowToStructByName[attemptRow]); err != nil {
		return v, fmt.Errorf("read attempts: %w", err)
	}
	rows, err = pool.Query(ctx, `SELECT `+outbox.Columns+` FROM control_plane_outbox WHERE release_run_id = $1 ORDER BY id`, run.ID)
	if err != nil {
		return v, fmt.Errorf("read effects: %w", err)
	}
	if v.Effects, err = pgx.CollectRows(rows, pgx.RowToStructByName[outbox.Effect]); err != nil {
		return v, fmt.Errorf("read effects: %w", err)
	}
	rows, err = pool.Query(ctx, `SELECT occurred_at, operator, action, reason, evidence::text::bytea AS evidence, from_status, to_status
		FROM control_plane_audit WHERE release_run_id = $1::uuid
		   OR (subject_type = 'outbox' AND subject_id IN (SELECT id FROM control_plane_outbox WHERE release_run_id = $1::uuid))
		ORDER BY occurred_at, id`, run.ID)
	if err != nil {
		return v, fmt.Errorf("read audit trail: %w", err)
	}
	if v.Audit, err = pgx.CollectRows(rows, pgx.RowToStructByName[auditRow]); err != nil {
		return v, fmt.Errorf("read audit trail: %w", err)
	}

	repoURL := web + "/" + run.Repository
	if run.CheckRunID != nil {
		v.CheckURL = fmt.Sprintf("%s/runs/%d", repoURL, *run.CheckRunID)
	}
	var delivery string
	var received time.Time
	err = pool.QueryRow(ctx, `SELECT delivery_id, received_at FROM webhook_inbox
		WHERE received_at BETWEEN $1::timestamptz - interval '1 hour' AND $1::timestamptz AND event = 'push'
		  AND repository_id = $2
		  AND payload -> 'push' ->> 'ref' = $3
		  -- The tagged commit (00075): an annotated tag's after is its tag object.
		  AND coalesce(payload -> 'push' ->> 'head_sha', payload -> 'push' ->> 'after') = $4
		ORDER BY received_at DESC LIMIT 1`, run.CreatedAt, run.RepositoryID, run.Ref, run.HeadSHA).Scan(&delivery, &received)
	switch {
	case err == nil:
		v.Timeline = append(v.Timeline, event{At: received, What: "webhook received", Detail: "push delivery " + delivery})
	case !errors.Is(err, pgx.ErrNoRows):
		return v, fmt.Errorf("find the push delivery: %w", err)
	}
	v.Timeline = append(v.Timeline, event{At: run.CreatedAt, What: "release run created",
		Detail: fmt.Sprintf("%s at %s, workflow %s", strings.TrimPrefix(run.Ref, "refs/tags/"), run.HeadSHA, run.WorkflowFile),
		URL:    fmt.Sprintf("%s/tree/%s", repoURL, strings.TrimPrefix(run.Ref, "refs/tags/"))})
	attemptNumber := map[string]int{}
	for _, a := range v.Attempts {
		attemptNumber[a.ID] = a.Number
	}
	for _, e := range v.Effects {
		if v.TraceID == "" && e.Traceparent != nil && len(*e.Traceparent) == 55 {
			v.TraceID = (*e.Traceparent)[3:35]
		}
		n := 0
		if e.ExecutionAttemptID != nil {
			n = attemptNumber[*e.ExecutionAttemptID]
		}
		v.Timeline = append(v.Timeline, effectEvents(e, n, v.CheckURL, repoURL)...)
	}
	for _, a := range v.Attempts {
		if a.WorkflowRunID != nil && a.DispatchedAt != nil {
			v.Timeline = append(v.Timeline, event{At: *a.DispatchedAt, What: "workflow run", Attempt: a.Number,
				Detail: fmt.Sprintf("run %d recorded", *a.WorkflowRunID), URL: fmt.Sprintf("%s/actions/runs/%d", repoURL, *a.WorkflowRunID)})
		}
		if a.CompletedAt != nil {
			v.Timeline = append(v.Timeline, event{At: *a.CompletedAt, What: "completion", Attempt: a.Number, Detail: a.Status + ", conclusion " + str(a.Conclusion)})
		}
	}
	for _, a := range v.Audit {
		v.Timeline = append(v.Timeline, event{At: a.OccurredAt, What: "operator: " + a.Action, Detail: a.Operator + ": " + a.Reason})
	}
	sort.SliceStable(v.Timeline, func(i, j int) bool { return v.Timeline[i].At.Before(v.Timeline[j].At) })
	return v, nil
}

// effectEvents are the timeline's lines of one effect.
func effectEvents(e outbox.Effect, attempt int, checkURL, repoURL string) []event {
	var out []event
	var result struct {
		CheckRunID    int64  `json:"check_run_id"`
		WorkflowRunID int64  `json:"workflow_run_id"`
		Resolution    string `json:"resolution"`
		SupersededBy  int64  `json:"superseded_by"`
		// A read's answer (workflow_run.read, collaborator_permission.read) and what its
		// completion did with it.
		WorkflowRunStatus string `json:"workflow_run_status"`
		Conclusion        string `json:"conclusion"`
		Permission        string `json:"permission"`
		Collaborator      *bool  `json:"collaborator"`
		Outcome           string `json:"outcome"`
	}
	_ = json.Unmarshal(e.Result, &result)
	// An effect completed by a cancellation or superseded by a newer one was never delivered, nor
	// was a dispatch an operator reconciled as not dispatched ("supersede": brops reconcile resolve
	// --not-dispatched), which GitHub never received.
	done := e.CompletedAt != nil && result.Resolution != "cancelled" && result.Resolution != "superseded" && result.Resolution != "supersede"
	switch e.EffectType {
	case outbox.EffectCheckRunCreate:
		if done {
			out = append(out, event{At: *e.CompletedAt, What: "check run created", Detail: fmt.Sprintf("check run %d", result.CheckRunID), URL: checkURL})
		}
	case outbox.EffectWorkflowDispatch:
		if e.DeliveryStartedAt != nil {
			out = append(out, event{At: *e.DeliveryStartedAt, What: "dispatch started", Attempt: attempt, Detail: fmt.Sprintf("effect %d", e.ID)})
		}
		if done {
			d := event{At: *e.CompletedAt, What: "dispatch sent", Attempt: attempt, Detail: fmt.Sprintf("effect %d", e.ID)}
			if result.WorkflowRunID > 0 {
				d.Detail += fmt.Sprintf(", workflow run %d", result.WorkflowRunID)
				d.URL = fmt.Sprintf("%s/actions/runs/%d", repoURL, result.WorkflowRunID)
			}
			out = append(out, d)
		}
		if e.CompletedAt != nil && result.Resolution == "supersede" {
			out = append(out, event{At: *e.CompletedAt, What: "dispatch not sent", Attempt: attempt,
				Detail: fmt.Sprintf("effect %d reconciled as never dispatched, superseded by effect %d", e.ID, result.SupersededBy)})
		}
	case outbox.EffectCheckRunComplete:
		if done {
			// Since 00021 the effect carries the run's state, and a run has several updates; only a
			// finished state (or an earlier completion, which has no state) completes the check run.
			var p struct {
				State string `json:"state"`
			}
			_ = json.Unmarshal(e.Payload, &p)
			what := "check run completed"
			switch p.State {
			case "", "succeeded", "failed", "cancelled":
			default:
				what = "check run updated: " + p.State
			}
			out = append(out, event{At: *e.CompletedAt, What: what, Attempt: attempt, URL: checkURL})
		}
	case outbox.EffectWorkflowRunRead:
		// The read-back of a run whose workflow_run webhook did not come (docs/lifecycle.md).
		if done {
			var p struct {
				WorkflowRunID int64 `json:"workflow_run_id"`
			}
			_ = json.Unmarshal(e.Payload, &p)
			d := event{At: *e.CompletedAt, What: "workflow run read back", Attempt: attempt,
				Detail: fmt.Sprintf("run %d %s", p.WorkflowRunID, nonEmpty(result.WorkflowRunStatus, "?"))}
			if result.Conclusion != "" {
				d.Detail += ", conclusion " + result.Conclusion
			}
			d.Detail += ": " + readOutcome(result.Outcome)
			if p.WorkflowRunID > 0 {
				d.URL = fmt.Sprintf("%s/actions/runs/%d", repoURL, p.WorkflowRunID)
			}
			out = append(out, d)
		}
	case outbox.EffectCollaboratorPermissionRead:
		// A Retry pressed on the check run: the presser's permission, then the replay or refusal.
		if done {
			var p struct {
				Username string `json:"username"`
			}
			_ = json.Unmarshal(e.Payload, &p)
			perm := nonEmpty(result.Permission, "none")
			if result.Collaborator != nil && !*result.Collaborator {
				perm = "not a collaborator"
			}
			out = append(out, event{At: *e.CompletedAt, What: "Retry's permission read", Attempt: attempt,
				Detail: fmt.Sprintf("@%s: %s: %s", p.Username, perm, readOutcome(result.Outcome))})
		}
	}
	return out
}

// readOutcome says what a read's completion did, from the outcome its function returned.
func readOutcome(outcome string) string {
	switch outcome {
	case "finished":
		return "the attempt finished with it"
	case "other_commit":
		return "it ran another commit: the attempt failed"
	case "not_finished":
		return "still running"
	case "stale":
		return "the attempt had moved on (its webhook came, or it ended otherwise)"
	case "retried":
		return "Retry accepted: dead letters replayed"
	case "nothing_to_retry":
		return "nothing left to retry"
	case "refused":
		return "Retry refused"
	case "":
		return "done"
	}
	return outcome
}

func (v runView) table(w io.Writer) {
	r := v.Run
	fmt.Fprintf(w, "release run\t%s\nrepository\t%s (installation %d)\ntag\t%s at %s\nworkflow\t%s\nstatus\t%s (attempt %d)\ncheck run\t%s %s\ntrace id\t%s\n",
		r.ID, r.Repository, r.InstallationID, strings.TrimPrefix(r.Ref, "refs/tags/"), r.HeadSHA, r.WorkflowFile, r.Status, r.CurrentAttempt,
		i64(r.CheckRunID), v.CheckURL, nonEmpty(v.TraceID, "-"))
	fmt.Fprintln(w, "\nTIMELINE\tATTEMPT\tEVENT\tDETAIL\tLINK")
	for _, e := range v.Timeline {
		a := "-"
		if e.Attempt > 0 {
			a = fmt.Sprint(e.Attempt)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", e.At.UTC().Format(time.RFC3339), a, e.What, e.Detail, nonEmpty(e.URL, "-"))
	}
	fmt.Fprintln(w, "\nEFFECT\tTYPE\tSTATE\tATTEMPTS\tLAST ERROR")
	for _, e := range v.Effects {
		fmt.Fprintf(w, "%d\t%s\t%s\t%d/%d\t%s\n", e.ID, e.EffectType, e.Status, e.Attempts, e.MaxAttempts, truncate(str(e.LastError), 100))
	}
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
