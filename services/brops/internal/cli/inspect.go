package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
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
			sql, args, err := queueList{table: "control_plane_jobs", columns: jobs.Columns, statuses: jobs.Statuses,
				status: status, limit: limit, oneMore: true}.query()
			if err != nil {
				return err
			}
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			rows, err := pool.Query(cmd.Context(), sql, args...)
			if err != nil {
				return fmt.Errorf("list jobs: %w", err)
			}
			list, err := pgx.CollectRows(rows, pgx.RowToStructByName[jobs.Job])
			if err != nil {
				return err
			}
			more := ""
			if len(list) > limit {
				list = list[:limit]
				more = g.moreNote(limit, "raise --limit (at most 1000) or narrow it with --status")
			}
			return g.render(list, func(w io.Writer) {
				if more != "" {
					fmt.Fprintln(w, more)
				}
				fmt.Fprintln(w, "ID\tKIND\tSTATUS\tATTEMPTS\tUPDATED\tLAST ERROR")
				for _, j := range list {
					fmt.Fprintf(w, "%d\t%s\t%s\t%d/%d\t%s\t%s\n", j.ID, j.Kind, j.Status, j.Attempts, j.MaxAttempts,
						j.UpdatedAt.UTC().Format(time.RFC3339), truncate(str(j.LastError), 80))
				}
			})
		},
	}
	list.Flags().StringVar(&status, "status", "", "only this status: "+strings.Join(jobs.Statuses, ", "))
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
