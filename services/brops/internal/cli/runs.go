package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
)

type runRow struct {
	ID             string     `db:"id" json:"id"`
	Repository     string     `db:"repository" json:"repository"`
	RepositoryID   int64      `db:"repository_id" json:"repository_id"`
	InstallationID int64      `db:"installation_id" json:"installation_id"`
	Ref            string     `db:"ref" json:"ref"`
	HeadSHA        string     `db:"head_sha" json:"head_sha"`
	WorkflowFile   string     `db:"workflow_file" json:"workflow_file"`
	Status         string     `db:"status" json:"status"`
	CurrentAttempt int        `db:"current_attempt" json:"current_attempt"`
	CheckRunID     *int64     `db:"check_run_id" json:"check_run_id,omitempty"`
	CreatedAt      time.Time  `db:"created_at" json:"created_at"`
	UpdatedAt      time.Time  `db:"updated_at" json:"updated_at"`
	CompletedAt    *time.Time `db:"completed_at" json:"completed_at,omitempty"`
}

const runSelect = `SELECT r.id::text AS id, p.full_name AS repository, r.repository_id, r.installation_id, r.ref, r.head_sha, r.workflow_file, r.status,
	r.current_attempt, r.check_run_id, r.created_at, r.updated_at, r.completed_at FROM release_runs r JOIN repositories p ON p.id = r.repository_id`

// repositoryNamed is the repository a --repo OWNER/NAME means, as a scalar subquery over
// repositories_full_name_idx. A name is not unique: a deleted repository keeps its row (removed_at)
// and a new one may take its name. The one still installed wins, then the most recently changed.
func repositoryNamed(param string) string {
	return "(SELECT id FROM repositories WHERE full_name = " + param + " ORDER BY removed_at IS NOT NULL, updated_at DESC, id DESC LIMIT 1)"
}

// runStatuses are the states of a release run (release_runs' row rule).
var runStatuses = []string{"requested", "check_pending", "dispatching", "running", "blocked", "succeeded", "failed", "cancelled"}

// runFilter selects release runs for list.
type runFilter struct {
	repository string
	status     string
	olderThan  time.Duration
	newerThan  time.Duration
	// unchangedFor: only runs whose state has not changed for this long (updated_at), as the
	// stale gauge counts them (migration 00072).
	unchangedFor time.Duration
	limit        int
}

// query builds list's statement with only the conditions asked for, so that each form has a
// plan of its own on the lookup indexes of migration 00023 (release_runs_repository_created_idx,
// release_runs_status_created_idx, repositories_full_name_idx) — no optional "$1 IS NULL OR"
// conditions that a generic plan cannot use an index for. Without a repository or a status, the
// newest of each status are read through the status index (newestOfAll).
// The limit, checked by validate, is written in: a generic plan takes a parameter's limit for a
// tenth of the rows.
func (f runFilter) query(now time.Time) (string, []any) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if f.repository != "" {
		where = append(where, "r.repository_id = "+repositoryNamed(arg(f.repository)))
	}
	if f.status != "" {
		where = append(where, "r.status = "+arg(f.status))
	}
	if f.olderThan > 0 {
		where = append(where, "r.created_at < "+arg(now.Add(-f.olderThan)))
	}
	if f.newerThan > 0 {
		where = append(where, "r.created_at >= "+arg(now.Add(-f.newerThan)))
	}
	if f.unchangedFor > 0 {
		// A run changes no earlier than its creation: the bound on created_at keeps the index range.
		at := arg(now.Add(-f.unchangedFor))
		where = append(where, "r.created_at < "+at, "r.updated_at < "+at)
	}
	newest := func(where []string) string {
		sql := runSelect
		if len(where) > 0 {
			sql += " WHERE " + strings.Join(where, " AND ")
		}
		return sql + fmt.Sprintf(" ORDER BY r.created_at DESC LIMIT %d", f.limit)
	}
	if f.repository != "" || f.status != "" {
		return newest(where), args
	}
	parts := make([]string, 0, len(runStatuses))
	for _, status := range runStatuses { // the row rule's set (TestQueueStatusesAreTheRowRules)
		parts = append(parts, "("+newest(append([]string{"r.status = '" + status + "'"}, where...))+")")
	}
	return newestOfAll(parts, "created_at DESC", f.limit), args
}

func (f runFilter) validate() error {
	if f.limit < 1 || f.limit > 1000 {
		return usageError{fmt.Errorf("--limit %d: want 1 to 1000", f.limit)}
	}
	if f.status != "" && !slices.Contains(runStatuses, f.status) {
		return usageError{fmt.Errorf("--status %q: want one of %s", f.status, strings.Join(runStatuses, ", "))}
	}
	if f.repository != "" && strings.Count(f.repository, "/") != 1 {
		return usageError{fmt.Errorf("--repo %q: want OWNER/NAME", f.repository)}
	}
	if f.olderThan < 0 || f.newerThan < 0 || f.unchangedFor < 0 {
		return usageError{errors.New("--older-than, --newer-than and --unchanged-for must not be negative")}
	}
	return nil
}

// uuidPattern is a release run id's form.
var uuidPattern = regexp.MustCompile(`^(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// runRef names a release run on the command line: its id, or repository and tag.
type runRef struct {
	repository, tag string
}

func (r *runRef) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&r.repository, "repo", "", "repository OWNER/NAME (with --tag, instead of a run id)")
	cmd.Flags().StringVar(&r.tag, "tag", "", "release tag, e.g. v1.2.0 (with --repo)")
}

// resolve finds the run: by id (args[0]) or by --repo and --tag (the newest run of the tag).
func (r *runRef) resolve(ctx context.Context, pool *pgxpool.Pool, args []string) (runRow, error) {
	var rows pgx.Rows
	var err error
	switch {
	case len(args) == 1 && r.repository == "" && r.tag == "":
		if !uuidPattern.MatchString(args[0]) {
			return runRow{}, usageError{fmt.Errorf("%q is not a release run id (a UUID); or use --repo OWNER/NAME --tag TAG", args[0])}
		}
		rows, err = pool.Query(ctx, runSelect+` WHERE r.id = $1::uuid`, args[0])
	case len(args) == 0 && r.repository != "" && r.tag != "":
		rows, err = pool.Query(ctx, runSelect+` WHERE r.repository_id = `+repositoryNamed("$1")+`
			AND r.ref = $2 ORDER BY r.created_at DESC LIMIT 1`, r.repository, "refs/tags/"+strings.TrimPrefix(r.tag, "refs/tags/"))
	default:
		return runRow{}, usageError{errors.New("give a release run id, or --repo OWNER/NAME and --tag TAG")}
	}
	if err != nil {
		return runRow{}, fmt.Errorf("find release run: %w", err)
	}
	run, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[runRow])
	if errors.Is(err, pgx.ErrNoRows) {
		if len(args) == 1 {
			return runRow{}, fmt.Errorf("no release run %s", args[0])
		}
		return runRow{}, fmt.Errorf("no release run for %s tag %s", r.repository, r.tag)
	}
	if err != nil {
		return runRow{}, fmt.Errorf("find release run: %w", err)
	}
	return run, nil
}

func newRunsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "release-runs", Short: "Inspect, create and cancel release runs"}
	f := runFilter{}
	list := &cobra.Command{
		Use:   "list",
		Short: "List release runs, newest first, by repository, status and age",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			probe := f // one run more than the limit: more match when it comes back
			probe.limit++
			sql, args := probe.query(time.Now())
			rows, err := pool.Query(cmd.Context(), sql, args...)
			if err != nil {
				return fmt.Errorf("list release runs: %w", err)
			}
			runs, err := pgx.CollectRows(rows, pgx.RowToStructByName[runRow])
			if err != nil {
				return fmt.Errorf("list release runs: %w", err)
			}
			more := ""
			if len(runs) > f.limit {
				runs = runs[:f.limit]
				more = g.moreNote(f.limit, "raise --limit (at most 1000) or narrow it with --repo, --status or an age")
			}
			return g.render(runs, func(w io.Writer) {
				if more != "" {
					fmt.Fprintln(w, more)
				}
				fmt.Fprintln(w, "ID\tREPOSITORY\tTAG\tSTATUS\tATTEMPT\tCHECK RUN\tCREATED\tAGE\tUNCHANGED FOR")
				for _, r := range runs {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.ID, r.Repository, strings.TrimPrefix(r.Ref, "refs/tags/"), r.Status,
						r.CurrentAttempt, i64(r.CheckRunID), r.CreatedAt.UTC().Format(time.RFC3339), time.Since(r.CreatedAt).Round(time.Second),
						time.Since(r.UpdatedAt).Round(time.Second))
				}
			})
		},
	}
	list.Flags().StringVar(&f.repository, "repo", "", "only this repository (OWNER/NAME)")
	list.Flags().StringVar(&f.status, "status", "", "only this status: "+strings.Join(runStatuses, ", "))
	list.Flags().DurationVar(&f.olderThan, "older-than", 0, "only runs created longer ago than this (e.g. 1h)")
	list.Flags().DurationVar(&f.newerThan, "newer-than", 0, "only runs created within this (e.g. 24h)")
	list.Flags().DurationVar(&f.unchangedFor, "unchanged-for", 0, "only runs whose state has not changed for this long, as the stale gauge counts them (e.g. 1h)")
	list.Flags().IntVar(&f.limit, "limit", 50, "at most this many (1-1000)")
	cmd.AddCommand(list, newRunShowCmd(g), newRunCreateCmd(g), newRunCancelCmd(g))
	return cmd
}
