package outbox

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/sqlstate"
)

// The Queue* methods add a completion to a pgx.Batch instead of running it, so that many
// completions share one round trip and one commit. Each reports its own outcome through done
// (classified like the direct methods) when the batch is sent; a failing one also fails the
// batch, whose caller then runs each completion on its own (see the dispatcher's completer).

// QueueCompleteCheckRunCreate queues CompleteCheckRunCreate; done receives the enqueued dispatch
// id (0 when none).
func (s *Store) QueueCompleteCheckRunCreate(b *pgx.Batch, id int64, worker string, checkRunID int64, done func(dispatchID int64, err error)) {
	b.Queue(`SELECT boardreadyops_complete_check_run_create($1, $2, $3, $4)`, id, worker, checkRunID, s.now()).QueryRow(func(row pgx.Row) error {
		var dispatchID *int64
		if err := row.Scan(&dispatchID); err != nil {
			err = fmt.Errorf("complete check run creation %d: %w", id, sqlstate.Classify(err))
			done(0, err)
			return err
		}
		if dispatchID == nil {
			done(0, nil)
		} else {
			done(*dispatchID, nil)
		}
		return nil
	})
}

// QueueCompleteWorkflowDispatch queues CompleteWorkflowDispatch.
func (s *Store) QueueCompleteWorkflowDispatch(b *pgx.Batch, id int64, worker string, workflowRunID int64, done func(error)) {
	queueVoid(b, fmt.Sprintf("complete workflow dispatch %d", id), done,
		`SELECT 1 FROM boardreadyops_complete_workflow_dispatch($1, $2, $3, $4)`, id, worker, workflowRunID, s.now())
}

// QueueCompleteCheckRunComplete queues CompleteCheckRunComplete.
func (s *Store) QueueCompleteCheckRunComplete(b *pgx.Batch, id int64, worker string, done func(error)) {
	queueVoid(b, fmt.Sprintf("complete check run completion %d", id), done,
		`SELECT 1 FROM boardreadyops_complete_check_run_complete($1, $2, $3)`, id, worker, s.now())
}

func queueVoid(b *pgx.Batch, what string, done func(error), sql string, args ...any) {
	b.Queue(sql, args...).QueryRow(func(row pgx.Row) error {
		var one int
		if err := row.Scan(&one); err != nil {
			err = fmt.Errorf("%s: %w", what, sqlstate.Classify(err))
			done(err)
			return err
		}
		done(nil)
		return nil
	})
}

// QueueStartDelivery queues StartDelivery: the caller may send the request only after the batch
// committed without error for it.
func (s *Store) QueueStartDelivery(b *pgx.Batch, id int64, worker string, done func(error)) {
	queueVoid(b, fmt.Sprintf("start delivery of effect %d", id), done,
		`SELECT 1 FROM boardreadyops_start_control_plane_outbox_delivery($1, $2, $3)`, id, worker, s.now())
}
