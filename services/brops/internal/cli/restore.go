package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/boardreadyops/cloud/pkg/database"
	"github.com/boardreadyops/cloud/pkg/eventdoc"
	"github.com/boardreadyops/cloud/pkg/outbox"
	"github.com/boardreadyops/cloud/schema"
)

// fencedDispatch is one workflow dispatch the restore fence moved to reconciliation_required.
type fencedDispatch struct {
	ID                 int64     `db:"id" json:"id"`
	ReleaseRunID       string    `db:"release_run_id" json:"release_run_id"`
	ExecutionAttemptID *string   `db:"execution_attempt_id" json:"execution_attempt_id"`
	CreatedAt          time.Time `db:"created_at" json:"created_at"`
	FromStatus         string    `db:"from_status" json:"from_status"`
}

// fenceResult is what brops restore fence reports.
type fenceResult struct {
	Since  time.Time        `json:"since"`
	Window time.Time        `json:"window_start"` // since − margin
	Fenced []fencedDispatch `json:"fenced"`
	// DeadLetters: workflow dispatches left dead-lettered, which need a look before any replay.
	DeadLetters int `json:"dead_letter_dispatches"`
	// DeadLetterJobs and DeadLetterCreations: push, check_run and check_suite jobs, and check-run
	// creations and permission reads, left dead-lettered. Each, replayed, creates a run or starts or
	// replays an attempt whose dispatch the hold no longer catches after the close, and the old
	// deployment may have replayed it after the restore point already.
	DeadLetterJobs      int    `json:"dead_letter_jobs"`
	DeadLetterCreations int    `json:"dead_letter_creations"`
	Redeliver           string `json:"redeliver_command"`
}

func newRestoreCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Make a restored database safe before the services start (docs/operations.md, backup and restore)",
	}
	var sinceText, reason, operator string
	var margin time.Duration
	fence := &cobra.Command{
		Use:   "fence --since TIMESTAMP",
		Short: "Move workflow dispatches that may have been sent after the restore point to reconciliation_required",
		Long: `Run after restoring a backup and before any outbox-dispatcher starts. --since is the restore
point (the recovery_target_time, or the end of the base backup). Every workflow dispatch still
available or leased, however old, may have been sent by the old dispatchers after that point,
which the restored database cannot know (one waiting at it for a retry, a rate-limit block or a
pause too): it is moved to reconciliation_required (audited), so it is never sent again blindly;
resolve each with brops reconcile inspect / resolve. Check-run effects need nothing: their
creation lists before it creates, their completion is idempotent. --since minus --margin starts
the window of deliveries to ask GitHub for again, with room for the clocks of GitHub and the
database. Opens a hold: new workflow dispatches wait in reconciliation_required until brops
restore close. Prints the brops webhooks redeliver command that asks GitHub
for the deliveries the restored database never received. Refuses a database whose schema is older
than this brops expects (a backup taken before an upgrade): its fence may lack later fixes, so run
brops migrate up first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sinceText == "" {
				return usageError{errors.New("--since is required: the restore point, e.g. 2026-12-03T09:15:00Z")}
			}
			since, err := time.Parse(time.RFC3339, sinceText)
			if err != nil {
				return usageError{fmt.Errorf("--since %q: want an RFC 3339 time such as 2026-12-03T09:15:00Z", sinceText)}
			}
			if margin < 0 {
				return usageError{errors.New("--margin must not be negative")}
			}
			if strings.TrimSpace(operator) == "" {
				return usageError{errors.New("--operator is required (or set BOARDREADYOPS_OPERATOR)")}
			}
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			if err := requireFenceSchema(cmd.Context(), pool); err != nil {
				return err
			}
			window := since.Add(-margin)
			rows, err := pool.Query(cmd.Context(), `SELECT id, release_run_id::text, execution_attempt_id::text, created_at, from_status
				FROM boardreadyops_outbox_fence_restored($1, $2, $3)`, window, operator, reason)
			if err != nil {
				return fmt.Errorf("fence restored dispatches: %w", err)
			}
			fenced, err := pgx.CollectRows(rows, pgx.RowToStructByName[fencedDispatch])
			if err != nil {
				return fmt.Errorf("fence restored dispatches: %w", err)
			}
			var deadLetters, deadJobs, deadCreations int
			// Dead letters are left as they are (an operator decided not to send them), but one
			// replayed after the restore point may have been sent: replaying it again would
			// dispatch the release twice. So may the dispatch that a dead-lettered push,
			// check_run or check_suite job, check-run creation or permission read leads to, once
			// replayed: the close's wait counts only those dead-lettered since the fence, so these
			// are reported here, the only time. Each count reads control_plane_*_dead_letter_idx's
			// rows.
			if err := pool.QueryRow(cmd.Context(), `SELECT
				(SELECT count(*) FROM control_plane_outbox WHERE status = 'dead_letter' AND effect_type = $1),
				(SELECT count(*) FROM control_plane_jobs WHERE status = 'dead_letter' AND kind = ANY ($3)),
				(SELECT count(*) FROM control_plane_outbox WHERE status = 'dead_letter' AND effect_type = ANY ($2))`,
				outbox.EffectWorkflowDispatch, dispatchingEffects, dispatchingJobs).
				Scan(&deadLetters, &deadJobs, &deadCreations); err != nil {
				return fmt.Errorf("count dead letters: %w", err)
			}
			res := fenceResult{Since: since, Window: window, Fenced: fenced, DeadLetters: deadLetters,
				DeadLetterJobs: deadJobs, DeadLetterCreations: deadCreations, Redeliver: redeliverCommand(window, time.Now())}
			return g.render(res, func(w io.Writer) {
				fmt.Fprintf(w, "%d workflow dispatches not yet delivered (available or leased, however old) moved to reconciliation_required\n", len(fenced))
				if len(fenced) > 0 {
					fmt.Fprintln(w, "ID\tRELEASE RUN\tATTEMPT\tCREATED\tWAS")
					for _, f := range fenced {
						fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", f.ID, f.ReleaseRunID, str(f.ExecutionAttemptID), f.CreatedAt.UTC().Format(time.RFC3339), f.FromStatus)
					}
					fmt.Fprintln(w, "next: brops reconcile list, then brops reconcile inspect ID / resolve ID for each")
				}
				if res.DeadLetters > 0 {
					fmt.Fprintf(w, "%d workflow dispatches are dead letters: one replayed after the restore point may have been sent; check GitHub for its release's run before replaying any (brops reconcile inspect ID)\n", res.DeadLetters)
				}
				if res.DeadLetterJobs > 0 || res.DeadLetterCreations > 0 {
					fmt.Fprintf(w, "%d push, check_run or check_suite jobs and %d check-run creations or permission reads are dead letters: each, replayed, "+
						"leads to a workflow dispatch, held only until brops restore close, and the old deployment may have replayed and dispatched it after the restore point; "+
						"check GitHub for their releases' runs (brops jobs list --status dead_letter, brops outbox list --status dead_letter) and replay only those it did not run, "+
						"before the close\n", res.DeadLetterJobs, res.DeadLetterCreations)
				}
				fmt.Fprintf(w, "then recover the deliveries GitHub sent after the restore point:\n  %s\n", res.Redeliver)
				fmt.Fprintln(w, "new workflow dispatches wait in reconciliation_required until: brops restore close")
			})
		},
	}
	fence.Flags().StringVar(&sinceText, "since", "", "the restore point, RFC 3339 (required)")
	fence.Flags().DurationVar(&margin, "margin", 15*time.Minute, "start the redelivery window this long before --since")
	fence.Flags().StringVar(&reason, "reason", "point-in-time restore", "why (audited)")
	g.operatorFlag(fence, &operator)
	var closeOperator string
	var closeWait time.Duration
	var closeForce bool
	closeCmd := &cobra.Command{
		Use:   "close",
		Short: "End the hold the fence opened, once the redelivered deliveries are processed",
		Long: `While a fence's hold is open, every new workflow dispatch waits in reconciliation_required:
a redelivered push creates a new release run, which the old deployment may already have
dispatched under other ids, and a check-run creation restored mid-way enqueues a dispatch the old
deployment sent. Close the hold once brops webhooks redeliver has run and its --dry-run lists
none, lifecycle has processed the redeliveries and the dispatchers have done the pending
check-run creations. The last two it checks itself: it closes only when no push, check_run or
check_suite job and no check-run creation or permission read is available or leased, or
dead-lettered since the fence (each would create a release run or enqueue or replay a dispatch
after the close, unheld), waiting up to --wait for them; --force closes regardless. Its last count
and the close are one transaction, which holds off new jobs and effects for the few milliseconds
it takes: none can arrive between them. New releases then dispatch again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(closeOperator) == "" {
				return usageError{errors.New("--operator is required (or set BOARDREADYOPS_OPERATOR)")}
			}
			if closeWait < 0 {
				return usageError{errors.New("--wait must not be negative")}
			}
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			var open bool
			if err := pool.QueryRow(cmd.Context(), `SELECT EXISTS (SELECT 1 FROM restore_fences WHERE closed_at IS NULL)`).Scan(&open); err != nil {
				return fmt.Errorf("read the restore fences: %w", err)
			}
			var n int
			if open && !closeForce {
				if n, err = closeHoldDrained(cmd.Context(), pool, closeOperator, closeWait); err != nil {
					return err
				}
			} else if err := pool.QueryRow(cmd.Context(), `SELECT boardreadyops_outbox_fence_close($1)`, closeOperator).Scan(&n); err != nil {
				return fmt.Errorf("close restore fence: %w", err)
			}
			return g.render(map[string]int{"closed": n}, func(w io.Writer) { fmt.Fprintf(w, "%d restore fence holds closed\n", n) })
		},
	}
	closeCmd.Flags().DurationVar(&closeWait, "wait", time.Minute, "wait this long for pending push, check_run and check_suite jobs, check-run creations and permission reads")
	closeCmd.Flags().BoolVar(&closeForce, "force", false, "close even while such work is pending (see --wait)")
	g.operatorFlag(closeCmd, &closeOperator)
	cmd.AddCommand(fence, closeCmd)
	return cmd
}

// requireFenceSchema refuses a database whose schema is older than this binary's. A backup taken
// before an upgrade restores the older schema, and with it the older fence function, which may lack
// later fixes: before migration 00066 it left the dispatches created before the window's start
// available, to be sent a second time by the restored dispatchers; before 00067 a dispatch replayed
// during the hold was not held. Migrated first, the database fences as this binary's runbook says.
// A newer schema is accepted, as by the services' readiness check (database.CheckReady):
// migrations are additive, so its fence has every fix this binary knows of.
func requireFenceSchema(ctx context.Context, pool *pgxpool.Pool) error {
	v, err := database.SchemaVersion(ctx, pool)
	if err != nil {
		return err
	}
	if want := schema.ExpectedVersion(); v < want {
		return fmt.Errorf("not fenced: %w: at version %d, need %d (a backup taken before an upgrade?), and an older schema's fence may lack later fixes. "+
			"Run brops migrate up first (as the migration user, the services still scaled to 0), then brops restore fence", database.ErrSchemaBehind, v, want)
	}
	return nil
}

// dispatchingJobs are the job kinds that lead to a workflow dispatch: a push creates a release run,
// a check_run (Re-run, Retry) or check_suite ("Re-run all checks") rerequest starts an attempt.
// dispatchingEffects are the effects that do: a check-run creation enqueues its run's dispatch, a
// permission read starts or refuses a re-run.
var (
	dispatchingJobs    = []string{eventdoc.EventPush, eventdoc.EventCheckRun, eventdoc.EventCheckSuite}
	dispatchingEffects = []string{outbox.EffectCheckRunCreate, outbox.EffectCollaboratorPermissionRead}
)

// holdPendingSQL counts what must drain before the hold closes: dispatchingJobs and
// dispatchingEffects available or leased, or dead-lettered since the open fence. Dead letters
// from before the fence are the fence's count to report, not the close's: some can never be
// cleared. Each status is counted through its partial index.
const holdPendingSQL = `WITH f AS (SELECT min(fenced_at) AS at FROM restore_fences WHERE closed_at IS NULL)
	SELECT
	(SELECT count(*) FROM control_plane_jobs WHERE status = 'available' AND kind = ANY ($2))
	+ (SELECT count(*) FROM control_plane_jobs WHERE status = 'leased' AND kind = ANY ($2))
	+ (SELECT count(*) FROM control_plane_jobs j, f WHERE j.status = 'dead_letter' AND j.updated_at >= f.at AND j.kind = ANY ($2)),
	(SELECT count(*) FROM control_plane_outbox WHERE status = 'available' AND effect_type = ANY ($1))
	+ (SELECT count(*) FROM control_plane_outbox WHERE status = 'leased' AND effect_type = ANY ($1))
	+ (SELECT count(*) FROM control_plane_outbox o, f WHERE o.status = 'dead_letter' AND o.updated_at >= f.at AND o.effect_type = ANY ($1))`

// closeLockTimeout bounds each of the close's two lock waits (closeHoldDrained).
const closeLockTimeout = 400 * time.Millisecond

// closeHoldDrained closes the open hold once nothing that leads to a dispatch is pending
// (holdPendingSQL), waiting up to wait for it: each would, after the close, create a release run,
// start a re-run's attempt or replay a dispatch, which the hold would no longer catch. It returns
// how many holds it closed.
//
// The last count and the close are one transaction, which first takes SHARE locks on the outbox
// and the jobs: a job or effect written by a transaction still open when the close begins is
// counted once that commits, and none can be written until the close has committed. Counted apart,
// a push accepted between the count and the close escaped the hold. The locks stop every writer of
// the two tables for the count's few milliseconds. While the close waits for a lock, the writers
// that come after it wait too, so each wait is bounded by closeLockTimeout. The outbox comes first,
// as in lifecycle's transactions; in a cycle with a writer that wrote the jobs and then the outbox,
// the close is the one that began to wait first, so its wait ends first (its lock timeout, or its
// own deadlock check) and the writer goes on. The close then counts and tries again, a second
// later, until wait ends.
func closeHoldDrained(ctx context.Context, pool *pgxpool.Pool, operator string, wait time.Duration) (int, error) {
	deadline := time.Now().Add(wait)
	for {
		// Counted first without the locks: while work is pending, nobody waits for the close.
		var pushes, creations int64
		if err := pool.QueryRow(ctx, holdPendingSQL, dispatchingEffects, dispatchingJobs).Scan(&pushes, &creations); err != nil {
			return 0, fmt.Errorf("read pending push jobs and check-run creations: %w", err)
		}
		busy := false
		if pushes == 0 && creations == 0 {
			n, closed, err := closeIfDrained(ctx, pool, operator, &pushes, &creations)
			switch {
			case err == nil && closed:
				return n, nil
			case tablesBusy(err):
				busy = true
			case err != nil:
				return 0, fmt.Errorf("close restore fence: %w", err)
			}
		}
		if !time.Now().Before(deadline) {
			if busy {
				return 0, fmt.Errorf("not closed: the close's locks on the jobs and the outbox were not granted within %s each (writers busy, or a deadlock with one) by the end of --wait (%s); run it again, or with a longer --wait", closeLockTimeout, wait)
			}
			return 0, fmt.Errorf("not closed: %d push, check_run or check_suite jobs and %d check-run creations or permission reads are still available, leased or dead-lettered since the fence; "+
				"closed now, a release run they lead to would be dispatched without the hold, a second time if the old deployment dispatched it. "+
				"Wait for lifecycle and the dispatchers (brops jobs list, brops outbox list --effect-type github.check_run.create or github.collaborator_permission.read), "+
				"replay or resolve dead letters, and run it again; --force closes regardless", pushes, creations)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// closeIfDrained is the close's one transaction: the SHARE locks (closeHoldDrained), the count
// into pushes and creations, and the close when both are 0. closed says whether it closed; n is
// how many holds.
func closeIfDrained(ctx context.Context, pool *pgxpool.Pool, operator string, pushes, creations *int64) (n int, closed bool, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, closeLockTimeout.String()); err != nil {
			return err
		}
		// The outbox first: lifecycle writes it before it completes its jobs, ingest writes only
		// the jobs, the dispatchers only the outbox.
		for _, table := range []string{"control_plane_outbox", "control_plane_jobs"} {
			if _, err := tx.Exec(ctx, `LOCK TABLE `+table+` IN SHARE MODE`); err != nil {
				return err
			}
		}
		if err := tx.QueryRow(ctx, holdPendingSQL, dispatchingEffects, dispatchingJobs).Scan(pushes, creations); err != nil {
			return err
		}
		if *pushes != 0 || *creations != 0 {
			return nil // nothing written: the hold stays open
		}
		closed = true
		return tx.QueryRow(ctx, `SELECT boardreadyops_outbox_fence_close($1)`, operator).Scan(&n)
	})
	return n, closed && err == nil, err
}

// tablesBusy: the close's locks were not granted within its lock timeout (55P03), or it deadlocked
// with a writer (40P01).
func tablesBusy(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "40P01")
}

// redeliverCommand is the brops webhooks redeliver invocation that covers the deliveries since
// window, seen at now. It names window as a fixed time, to the second rounded down, so that the
// command still covers it when it is run again later (the runbook runs it until its dry run lists
// none); a period ("47m") would slide past the restore point. A window beyond GitHub's 72 hours of
// delivery history is capped at them, and then the command is a period: the oldest deliveries are
// gone anyway.
func redeliverCommand(window, now time.Time) string {
	if now.Sub(window) >= githubDeliveryHistory {
		return "brops webhooks redeliver --include-delivered --since 72h"
	}
	return "brops webhooks redeliver --include-delivered --since " + window.UTC().Truncate(time.Second).Format(time.RFC3339)
}
