package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/pkg/sqlstate"
)

func (g *globals) pool(ctx context.Context) (*pgxpool.Pool, error) {
	if err := g.requireDatabase(); err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, g.databaseURL)
	if err != nil {
		return nil, errors.New("invalid database URL (check DATABASE_URL)")
	}
	return pool, nil
}

// operatorFlag registers --operator, defaulting to BOARDREADYOPS_OPERATOR, then the OS user.
func (g *globals) operatorFlag(cmd *cobra.Command, p *string) {
	def := g.getenv("BOARDREADYOPS_OPERATOR")
	if def == "" {
		if u, err := user.Current(); err == nil {
			def = u.Username
		}
	}
	cmd.Flags().StringVar(p, "operator", def, "who is acting (audited; env BOARDREADYOPS_OPERATOR, default the OS user)")
}

func parseIDs(args []string) ([]int64, error) {
	ids := make([]int64, 0, len(args))
	for _, a := range args {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			return nil, usageError{fmt.Errorf("%q is not a record id", a)}
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func since(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func str(p *string) string {
	if p == nil {
		return "-"
	}
	return *p
}

func newOutboxCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "outbox", Short: "Inspect and replay outbox effects"}

	var status, effectType string
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List effects, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			if effectType != "" && !slices.Contains(outbox.EffectTypes, effectType) {
				return usageError{fmt.Errorf("--effect-type %q: want one of %s", effectType, strings.Join(outbox.EffectTypes, ", "))}
			}
			effects, err := listEffects(cmd.Context(), pool, queueList{status: status, effectType: effectType, limit: limit, oneMore: true})
			if err != nil {
				return err
			}
			more := ""
			if len(effects) > limit {
				effects = effects[:limit]
				more = g.moreNote(limit, "raise --limit (at most 1000) or narrow it with --status or --effect-type")
			}
			return g.render(effects, func(w io.Writer) {
				if more != "" {
					fmt.Fprintln(w, more)
				}
				fmt.Fprintln(w, "ID\tEFFECT\tSTATUS\tATTEMPTS\tINSTALLATION\tRELEASE RUN\tUPDATED\tLAST ERROR")
				for _, e := range effects {
					fmt.Fprintf(w, "%d\t%s\t%s\t%d/%d\t%d\t%s\t%s\t%s\n", e.ID, e.EffectType, e.Status, e.Attempts, e.MaxAttempts,
						e.InstallationID, e.ReleaseRunID, e.UpdatedAt.UTC().Format(time.RFC3339), truncate(str(e.LastError), 80))
				}
			})
		},
	}
	list.Flags().StringVar(&status, "status", "", "only this status: "+strings.Join(outbox.Statuses, ", "))
	list.Flags().StringVar(&effectType, "effect-type", "", "one of "+strings.Join(outbox.EffectTypes, ", "))
	list.Flags().IntVar(&limit, "limit", 50, "at most this many (1-1000)")
	cmd.AddCommand(list)

	cmd.AddCommand(&cobra.Command{
		Use:   "show ID",
		Short: "Show one effect in full, with its audit trail",
		Args:  cobra.ExactArgs(1),
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
			audit, err := auditTrail(cmd.Context(), pool, "outbox", e.ID)
			if err != nil {
				return err
			}
			return g.render(map[string]any{"effect": e, "audit": audit}, func(w io.Writer) {
				fmt.Fprintf(w, "id\t%d\neffect type\t%s\nidempotency key\t%s\nstatus\t%s\nattempts\t%d of %d\n", e.ID, e.EffectType, e.IdempotencyKey, e.Status, e.Attempts, e.MaxAttempts)
				fmt.Fprintf(w, "installation\t%d\nrelease run\t%s\nexecution attempt\t%s\n", e.InstallationID, e.ReleaseRunID, str(e.ExecutionAttemptID))
				fmt.Fprintf(w, "available at\t%s\nlease\t%s until %s\ndelivery started\t%s\ncompleted\t%s\n", e.AvailableAt.UTC().Format(time.RFC3339),
					str(e.LeaseOwner), since(e.LeaseExpiresAt), since(e.DeliveryStartedAt), since(e.CompletedAt))
				fmt.Fprintf(w, "last error\t%s\nresult\t%s\npayload\t%s\n", str(e.LastError), string(e.Result), string(e.Payload))
				for _, a := range audit {
					fmt.Fprintf(w, "audit\t%s %s by %s: %s (%s -> %s)\n", a.OccurredAt.UTC().Format(time.RFC3339), a.Action, a.Operator, a.Reason, a.FromStatus, a.ToStatus)
				}
			})
		},
	})
	cmd.AddCommand(newReplayCmd(g, "outbox"))
	return cmd
}

func truncate(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// listEffects reads the outbox rows q selects (its status, effect type, limit and oneMore).
func listEffects(ctx context.Context, pool *pgxpool.Pool, q queueList) ([]outbox.Effect, error) {
	q.table, q.columns, q.statuses = "control_plane_outbox", outbox.Columns, outbox.Statuses
	sql, args, err := q.query()
	if err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list effects: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[outbox.Effect])
}

type auditRow struct {
	OccurredAt time.Time `db:"occurred_at" json:"occurred_at"`
	Operator   string    `db:"operator" json:"operator"`
	Action     string    `db:"action" json:"action"`
	Reason     string    `db:"reason" json:"reason"`
	Evidence   []byte    `db:"evidence" json:"evidence,omitempty"`
	FromStatus string    `db:"from_status" json:"from_status"`
	ToStatus   string    `db:"to_status" json:"to_status"`
}

func auditTrail(ctx context.Context, pool *pgxpool.Pool, subject string, id int64) ([]auditRow, error) {
	rows, err := pool.Query(ctx, `SELECT occurred_at, operator, action, reason, evidence::text::bytea AS evidence, from_status, to_status
		FROM control_plane_audit WHERE subject_type = $1 AND subject_id = $2 ORDER BY occurred_at, id`, subject, id)
	if err != nil {
		return nil, fmt.Errorf("read audit trail: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[auditRow])
}

// newReplayCmd builds "outbox replay" and "jobs replay": by ids, or every dead letter matching a
// filter (--all-dead-letters), with --dry-run and a confirmation (--yes for scripts).
func newReplayCmd(g *globals, subject string) *cobra.Command {
	var reason, operator, effectType string
	var dryRun, yes, all bool
	cmd := &cobra.Command{
		Use:   "replay [ID...]",
		Short: "Return dead letters to the queue (audited)",
		Long: `Return dead letters to the queue, audited with your identity and the reason.

Give ids, or --all-dead-letters (with --effect-type for the outbox) to replay every dead letter
that matches; --dry-run lists what would be replayed. A reconciliation_required workflow dispatch
is never replayed: find out whether GitHub created the run (brops reconcile inspect), then resolve
it (brops reconcile resolve).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return usageError{errors.New("--reason is required: say why replaying is safe now")}
			}
			if strings.TrimSpace(operator) == "" {
				return usageError{errors.New("--operator is required (or set BOARDREADYOPS_OPERATOR)")}
			}
			if all == (len(args) > 0) {
				return usageError{errors.New("give record ids or --all-dead-letters, not both")}
			}
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			if effectType != "" && !slices.Contains(outbox.EffectTypes, effectType) {
				return usageError{fmt.Errorf("--effect-type %q: want one of %s", effectType, strings.Join(outbox.EffectTypes, ", "))}
			}
			if all {
				if ids, err = deadLetterIDs(cmd.Context(), pool, subject, effectType); err != nil {
					return err
				}
				if len(ids) > maxBulkReplay {
					ids = ids[:maxBulkReplay]
					fmt.Fprintf(g.stderr, "brops: only the oldest %d dead letters are taken; run the command again for the rest\n", maxBulkReplay)
				}
			}
			if dryRun {
				return g.render(map[string]any{"would_replay": ids}, func(w io.Writer) {
					fmt.Fprintf(w, "would replay %d %s records: %v\n", len(ids), subject, ids)
				})
			}
			if len(ids) > 1 && !yes && !g.confirm(fmt.Sprintf("replay %d %s records? [y/N] ", len(ids), subject)) {
				return usageError{errors.New("not confirmed (pass --yes in scripts)")}
			}
			type result struct {
				ID     int64  `json:"id"`
				Status string `json:"status"`
				Error  string `json:"error,omitempty"`
				Hint   string `json:"hint,omitempty"`
			}
			var results []result
			failed := 0
			for _, id := range ids {
				r := result{ID: id, Status: "available"}
				var err error
				if subject == "outbox" {
					var e outbox.Effect
					if e, err = (&outbox.Store{}).Replay(cmd.Context(), pool, id, operator, reason); err == nil {
						r.Status, r.Hint = replayOutcome(e)
					}
				} else {
					_, err = replayJob(cmd.Context(), pool, id, operator, reason)
				}
				if err != nil {
					failed++
					r.Status, r.Error, r.Hint = "refused", err.Error(), sqlstate.Hint(err)
					if errors.Is(err, sqlstate.ErrReconciliationRequired) {
						r.Hint = "GitHub may already have created this workflow run: run `brops reconcile inspect " + strconv.FormatInt(id, 10) +
							"`, then `brops reconcile resolve` with the evidence"
					}
				}
				results = append(results, r)
			}
			if err := g.render(results, func(w io.Writer) {
				fmt.Fprintln(w, "ID\tRESULT\tDETAIL")
				for _, r := range results {
					fmt.Fprintf(w, "%d\t%s\t%s\n", r.ID, r.Status, strings.TrimSpace(r.Error+" "+r.Hint))
				}
			}); err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d replays refused", failed, len(ids))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why replaying is safe now (audited)")
	g.operatorFlag(cmd, &operator)
	cmd.Flags().BoolVar(&all, "all-dead-letters", false, "replay every dead letter (matching --effect-type)")
	if subject == "outbox" {
		cmd.Flags().StringVar(&effectType, "effect-type", "", "with --all-dead-letters: only this effect type")
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be replayed, change nothing")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	return cmd
}

// replayOutcome says what a replay did to an outbox record: most go back to the queue, but a
// check-run update with a newer one for its run completes as superseded (00068), and a workflow
// dispatch replayed under an open restore fence waits for reconciliation (00067).
func replayOutcome(e outbox.Effect) (status, detail string) {
	switch {
	case e.Status == outbox.StatusCompleted && e.SupersededBy != nil:
		return "superseded", fmt.Sprintf("not sent: the run's newer check-run update %d supersedes it (brops outbox show %d; replay it too if it is a dead letter)", *e.SupersededBy, *e.SupersededBy)
	case e.Status == outbox.StatusReconciliationRequired:
		return e.Status, "held by the open restore fence: the old deployment may have sent it; run `brops reconcile inspect " +
			strconv.FormatInt(e.ID, 10) + "`, then `brops reconcile resolve` with the evidence"
	default:
		return e.Status, ""
	}
}

// maxBulkReplay is how many dead letters one --all-dead-letters run takes, the oldest first.
const maxBulkReplay = 10000

// deadLetterIDs lists the dead letters --all-dead-letters replays, oldest first: one more than
// maxBulkReplay, so that the caller can say some are left.
func deadLetterIDs(ctx context.Context, pool *pgxpool.Pool, subject, effectType string) ([]int64, error) {
	q := fmt.Sprintf(`SELECT id FROM control_plane_jobs WHERE status = 'dead_letter' ORDER BY id LIMIT %d`, maxBulkReplay+1)
	args := []any{}
	if subject == "outbox" {
		q = fmt.Sprintf(`SELECT id FROM control_plane_outbox WHERE status = 'dead_letter' AND superseded_by IS NULL AND ($1 = '' OR effect_type = $1) ORDER BY id LIMIT %d`, maxBulkReplay+1)
		args = append(args, effectType)
	}
	rows, err := pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}
