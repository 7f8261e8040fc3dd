package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/boardreadyops/cloud/pkg/jobs"
	"github.com/boardreadyops/cloud/pkg/outbox"
)

func replayJob(ctx context.Context, pool *pgxpool.Pool, id int64, operator, reason string) (jobs.Job, error) {
	return (&jobs.Store{}).Replay(ctx, pool, id, operator, reason)
}

func newJobsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "jobs", Short: "Inspect and replay lifecycle jobs"}
	var status string
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List jobs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > 1000 {
				return usageError{fmt.Errorf("--limit %d: want 1 to 1000", limit)}
			}
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			rows, err := pool.Query(cmd.Context(), `SELECT `+jobs.Columns+` FROM control_plane_jobs WHERE ($1 = '' OR status = $1)
				ORDER BY updated_at DESC, id DESC LIMIT $2`, status, limit)
			if err != nil {
				return fmt.Errorf("list jobs: %w", err)
			}
			list, err := pgx.CollectRows(rows, pgx.RowToStructByName[jobs.Job])
			if err != nil {
				return err
			}
			return g.render(list, func(w io.Writer) {
				fmt.Fprintln(w, "ID\tKIND\tSTATUS\tATTEMPTS\tUPDATED\tLAST ERROR")
				for _, j := range list {
					fmt.Fprintf(w, "%d\t%s\t%s\t%d/%d\t%s\t%s\n", j.ID, j.Kind, j.Status, j.Attempts, j.MaxAttempts,
						j.UpdatedAt.UTC().Format(time.RFC3339), truncate(str(j.LastError), 80))
				}
			})
		},
	}
	list.Flags().StringVar(&status, "status", "", "available, leased, completed or dead_letter")
	list.Flags().IntVar(&limit, "limit", 50, "at most this many (1-1000)")
	cmd.AddCommand(list)
	cmd.AddCommand(&cobra.Command{
		Use:   "show ID",
		Short: "Show one job with its delivery and audit trail",
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
			j, err := jobs.Get(cmd.Context(), pool, ids[0])
			if err != nil {
				return err
			}
			var delivery, event string
			var doc []byte
			if err := pool.QueryRow(cmd.Context(), `SELECT delivery_id, event, payload::text::bytea FROM webhook_inbox WHERE id = $1`, j.InboxID).
				Scan(&delivery, &event, &doc); err != nil {
				return fmt.Errorf("read delivery: %w", err)
			}
			audit, err := auditTrail(cmd.Context(), pool, "job", j.ID)
			if err != nil {
				return err
			}
			return g.render(map[string]any{"job": j, "delivery_id": delivery, "document": string(doc), "audit": audit}, func(w io.Writer) {
				fmt.Fprintf(w, "id\t%d\nkind\t%s\nstatus\t%s\nattempts\t%d of %d\ndelivery\t%s (%s)\nlast error\t%s\ndocument\t%s\n",
					j.ID, j.Kind, j.Status, j.Attempts, j.MaxAttempts, delivery, event, str(j.LastError), doc)
				for _, a := range audit {
					fmt.Fprintf(w, "audit\t%s %s by %s: %s\n", a.OccurredAt.UTC().Format(time.RFC3339), a.Action, a.Operator, a.Reason)
				}
			})
		},
	})
	cmd.AddCommand(newReplayCmd(g, "job"))
	return cmd
}

type runRow struct {
	ID             string     `db:"id" json:"id"`
	Repository     string     `db:"repository" json:"repository"`
	Ref            string     `db:"ref" json:"ref"`
	HeadSHA        string     `db:"head_sha" json:"head_sha"`
	Status         string     `db:"status" json:"status"`
	CurrentAttempt int        `db:"current_attempt" json:"current_attempt"`
	CheckRunID     *int64     `db:"check_run_id" json:"check_run_id,omitempty"`
	CreatedAt      time.Time  `db:"created_at" json:"created_at"`
	CompletedAt    *time.Time `db:"completed_at" json:"completed_at,omitempty"`
}

const runSelect = `SELECT r.id::text AS id, p.full_name AS repository, r.ref, r.head_sha, r.status, r.current_attempt, r.check_run_id,
	r.created_at, r.completed_at FROM release_runs r JOIN repositories p ON p.id = r.repository_id`

type attemptRow struct {
	ID            string     `db:"id" json:"id"`
	Number        int        `db:"number" json:"number"`
	Status        string     `db:"status" json:"status"`
	WorkflowRunID *int64     `db:"workflow_run_id" json:"workflow_run_id,omitempty"`
	DispatchedAt  *time.Time `db:"dispatched_at" json:"dispatched_at,omitempty"`
	Conclusion    *string    `db:"conclusion" json:"conclusion,omitempty"`
}

func newRunsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "release-runs", Short: "Inspect release runs"}
	var status string
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List release runs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > 1000 {
				return usageError{fmt.Errorf("--limit %d: want 1 to 1000", limit)}
			}
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			rows, err := pool.Query(cmd.Context(), runSelect+` WHERE ($1 = '' OR r.status = $1) ORDER BY r.created_at DESC LIMIT $2`, status, limit)
			if err != nil {
				return fmt.Errorf("list release runs: %w", err)
			}
			runs, err := pgx.CollectRows(rows, pgx.RowToStructByName[runRow])
			if err != nil {
				return err
			}
			return g.render(runs, func(w io.Writer) {
				fmt.Fprintln(w, "ID\tREPOSITORY\tREF\tSTATUS\tATTEMPT\tCHECK RUN\tCREATED")
				for _, r := range runs {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.Repository, r.Ref, r.Status, r.CurrentAttempt, i64(r.CheckRunID),
						r.CreatedAt.UTC().Format(time.RFC3339))
				}
			})
		},
	}
	list.Flags().StringVar(&status, "status", "", "filter by status")
	list.Flags().IntVar(&limit, "limit", 50, "at most this many (1-1000)")
	cmd.AddCommand(list)
	cmd.AddCommand(&cobra.Command{
		Use:   "show ID",
		Short: "Show a release run with its attempts and effects",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			ctx := cmd.Context()
			rows, err := pool.Query(ctx, runSelect+` WHERE r.id::text = $1`, args[0])
			if err != nil {
				return err
			}
			run, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[runRow])
			if err != nil {
				return fmt.Errorf("release run %s: %w", args[0], err)
			}
			rows, err = pool.Query(ctx, `SELECT id::text AS id, number, status, workflow_run_id, dispatched_at, conclusion
				FROM execution_attempts WHERE release_run_id = $1 ORDER BY number`, run.ID)
			if err != nil {
				return err
			}
			attempts, err := pgx.CollectRows(rows, pgx.RowToStructByName[attemptRow])
			if err != nil {
				return err
			}
			rows, err = pool.Query(ctx, `SELECT `+outbox.Columns+` FROM control_plane_outbox WHERE release_run_id = $1 ORDER BY id`, run.ID)
			if err != nil {
				return err
			}
			effects, err := pgx.CollectRows(rows, pgx.RowToStructByName[outbox.Effect])
			if err != nil {
				return err
			}
			return g.render(map[string]any{"release_run": run, "attempts": attempts, "effects": effects}, func(w io.Writer) {
				fmt.Fprintf(w, "release run\t%s\nrepository\t%s\nref\t%s at %s\nstatus\t%s (attempt %d)\ncheck run\t%s\n",
					run.ID, run.Repository, run.Ref, run.HeadSHA, run.Status, run.CurrentAttempt, i64(run.CheckRunID))
				for _, a := range attempts {
					fmt.Fprintf(w, "attempt %d\t%s, workflow run %s, conclusion %s\n", a.Number, a.Status, i64(a.WorkflowRunID), str(a.Conclusion))
				}
				for _, e := range effects {
					fmt.Fprintf(w, "effect %d\t%s %s (attempts %d)\n", e.ID, e.EffectType, e.Status, e.Attempts)
				}
			})
		},
	})
	return cmd
}

func i64(p *int64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func newStatsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "Queue figures: the same aggregates the services export as metrics",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			o, err := (&outbox.Store{}).Stats(cmd.Context(), pool)
			if err != nil {
				return err
			}
			j, err := (&jobs.Store{}).Stats(cmd.Context(), pool)
			if err != nil {
				return err
			}
			return g.render(map[string]any{"outbox": o, "jobs": j}, func(w io.Writer) {
				fmt.Fprintln(w, "QUEUE\tAVAILABLE\tDUE\tLEASED\tRETRYING\tDEAD LETTER\tRECONCILIATION\tOLDEST DUE (s)")
				fmt.Fprintf(w, "outbox\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\n", o.Available, o.Due, o.Leased, o.Retrying, o.DeadLetter, o.ReconciliationRequired, o.OldestAvailableAgeSeconds)
				fmt.Fprintf(w, "jobs\t%d\t%d\t%d\t%d\t%d\t-\t%.1f\n", j.Available, j.Due, j.Leased, j.Retrying, j.DeadLetter, j.OldestAvailableAgeSeconds)
			})
		},
	}
}
