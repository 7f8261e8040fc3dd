package outbox

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/groupcommit"
	"github.com/boardreadyops/cloud/pkg/sqlstate"
)

// The Queue* methods add a transition to a group commit (groupcommit.Batch) instead of running
// it, so that many transitions share one round trip and one commit. Each reports its own outcome
// through done (classified like the direct methods) when the batch is sent; a failing one also
// fails the batch, whose committer then runs each transition on its own.
//
// Check-run creations, check-run completions and delivery starts of one worker share one
// set-based statement per batch (boardreadyops_outbox_complete_check_run_create_batch,
// ..._complete_check_run_complete_batch, ..._start_delivery_batch); an id that statement leaves
// out — lease gone, wrong type, a case only the single-row function handles — runs again alone
// through the single-row function, whose error is its exact outcome.

// QueueCompleteCheckRunCreate queues CompleteCheckRunCreate; done receives the enqueued dispatch
// id (0 when none). The creations of one worker in a batch share one set-based statement
// (boardreadyops_outbox_complete_check_run_create_batch, migration 00050), which carries out the
// common case; an effect it leaves out runs alone through the single-row function.
func (s *Store) QueueCompleteCheckRunCreate(b *groupcommit.Batch, id int64, worker string, checkRunID int64, done func(dispatchID int64, err error)) {
	const function = "boardreadyops_outbox_complete_check_run_create_batch"
	if set, ok := b.Join(function+"\x00"+worker, func() groupcommit.Set {
		return &createSet{worker: worker, now: s.now(), done: map[int64]func(int64, error){}}
	}); ok {
		set.(*createSet).add(id, checkRunID, done)
		return
	}
	b.Queue(`SELECT boardreadyops_outbox_complete_check_run_create($1, $2, $3, $4)`, id, worker, checkRunID, s.now()).QueryRow(func(row pgx.Row) error {
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

// QueueCompleteWorkflowDispatch queues CompleteWorkflowDispatch with the run's page GitHub
// returned ("" when none), so that the check-run update the completion enqueues links to it: one
// statement (boardreadyops_outbox_complete_workflow_dispatch_with_run, migration 00042).
func (s *Store) QueueCompleteWorkflowDispatch(b *groupcommit.Batch, id int64, worker string, workflowRunID int64, workflowRunURL string, done func(error)) {
	queueVoid(b, "complete workflow dispatch", id, done,
		`SELECT 1 FROM boardreadyops_outbox_complete_workflow_dispatch_with_run($1, $2, $3, $4, $5)`,
		id, worker, workflowRunID, nullIfEmpty(workflowRunURL), s.now())
}

// QueueCompleteWorkflowRunRead queues CompleteWorkflowRunRead.
func (s *Store) QueueCompleteWorkflowRunRead(b *groupcommit.Batch, id int64, worker string, r WorkflowRunRead, done func(outcome string, err error)) {
	b.Queue(`SELECT boardreadyops_outbox_complete_workflow_run_read($1, $2, $3, $4, $5, $6, $7)`,
		id, worker, r.Status, r.Conclusion, r.RunAttempt, r.HTMLURL, s.now()).QueryRow(func(row pgx.Row) error {
		var outcome string
		if err := row.Scan(&outcome); err != nil {
			err = fmt.Errorf("complete workflow run read %d: %w", id, sqlstate.Classify(err))
			done("", err)
			return err
		}
		done(outcome, nil)
		return nil
	})
}

// QueueCompleteCollaboratorPermissionRead queues CompleteCollaboratorPermissionRead.
func (s *Store) QueueCompleteCollaboratorPermissionRead(b *groupcommit.Batch, id int64, worker string, p CollaboratorPermission, done func(outcome string, err error)) {
	permission, roleName := p.args()
	b.Queue(`SELECT boardreadyops_outbox_complete_collaborator_permission_read($1, $2, $3, $4, $5)`,
		id, worker, permission, roleName, s.now()).QueryRow(func(row pgx.Row) error {
		var outcome string
		if err := row.Scan(&outcome); err != nil {
			err = fmt.Errorf("complete collaborator permission read %d: %w", id, sqlstate.Classify(err))
			done("", err)
			return err
		}
		done(outcome, nil)
		return nil
	})
}

// QueueCompleteCheckRunComplete queues CompleteCheckRunComplete.
func (s *Store) QueueCompleteCheckRunComplete(b *groupcommit.Batch, id int64, worker string, done func(error)) {
	if s.join(b, "boardreadyops_outbox_complete_check_run_complete_batch", worker, id, done) {
		return
	}
	queueVoid(b, "complete check run completion", id, done,
		`SELECT 1 FROM boardreadyops_outbox_complete_check_run_complete($1, $2, $3)`, id, worker, s.now())
}

// QueueStartDelivery queues StartDelivery: the caller may send the request only after the batch
// committed without error for it.
func (s *Store) QueueStartDelivery(b *groupcommit.Batch, id int64, worker string, done func(error)) {
	if s.join(b, "boardreadyops_outbox_start_delivery_batch", worker, id, done) {
		return
	}
	queueVoid(b, "start delivery of effect", id, done,
		`SELECT 1 FROM boardreadyops_outbox_start_delivery($1, $2, $3)`, id, worker, s.now())
}

func queueVoid(b *groupcommit.Batch, what string, id int64, done func(error), sql string, args ...any) {
	b.Queue(sql, args...).QueryRow(func(row pgx.Row) error {
		var one int
		if err := row.Scan(&one); err != nil {
			err = fmt.Errorf("%s %d: %w", what, id, sqlstate.Classify(err))
			done(err)
			return err
		}
		done(nil)
		return nil
	})
}

// join adds id to the batch's set for function and worker; false when the request runs alone.
func (s *Store) join(b *groupcommit.Batch, function, worker string, id int64, done func(error)) bool {
	set, ok := b.Join(function+"\x00"+worker, func() groupcommit.Set {
		return &idSet{function: function, worker: worker, now: s.now(), done: map[int64]func(error){}}
	})
	if !ok {
		return false
	}
	set.(*idSet).add(id, done)
	return true
}

// idSet is one set-based call, `SELECT id FROM function(ids, worker, now)`, returning the ids it
// transitioned.
type idSet struct {
	function string
	worker   string
	now      any
	ids      []int64
	done     map[int64]func(error)
}

func (s *idSet) add(id int64, done func(error)) {
	if prev, dup := s.done[id]; dup {
		// The same effect twice in one batch cannot happen (one transition in flight per lease);
		// if it did, the second runs alone rather than being reported done by the first's row.
		s.done[id] = func(err error) { prev(err); done(groupcommit.ErrAlone) }
		return
	}
	s.ids = append(s.ids, id)
	s.done[id] = done
}

func (s *idSet) Queue(b *pgx.Batch) {
	b.Queue(`SELECT id FROM `+s.function+`($1, $2, $3) AS t(id)`, s.ids, s.worker, s.now).Query(func(rows pgx.Rows) error {
		got := make(map[int64]bool, len(s.ids))
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return s.fail(err)
			}
			got[id] = true
		}
		if err := rows.Err(); err != nil {
			return s.fail(err)
		}
		for _, id := range s.ids {
			if got[id] {
				s.done[id](nil)
			} else {
				s.done[id](groupcommit.ErrAlone)
			}
		}
		return nil
	})
}

func (s *idSet) fail(err error) error {
	err = fmt.Errorf("%s: %w", s.function, sqlstate.Classify(err))
	for _, id := range s.ids {
		s.done[id](err)
	}
	return err
}

// createSet is one boardreadyops_outbox_complete_check_run_create_batch call: the check-run
// creations it completed, each with the dispatch it enqueued.
type createSet struct {
	worker      string
	now         any
	ids         []int64
	checkRunIDs []int64
	done        map[int64]func(int64, error)
}

func (s *createSet) add(id, checkRunID int64, done func(int64, error)) {
	if prev, dup := s.done[id]; dup {
		// As idSet.add: the second request for one effect runs alone.
		s.done[id] = func(n int64, err error) { prev(n, err); done(0, groupcommit.ErrAlone) }
		return
	}
	s.ids = append(s.ids, id)
	s.checkRunIDs = append(s.checkRunIDs, checkRunID)
	s.done[id] = done
}

func (s *createSet) Queue(b *pgx.Batch) {
	b.Queue(`SELECT id, dispatch_id FROM boardreadyops_outbox_complete_check_run_create_batch($1, $2, $3, $4)`,
		s.ids, s.checkRunIDs, s.worker, s.now).Query(func(rows pgx.Rows) error {
		got := make(map[int64]int64, len(s.ids))
		for rows.Next() {
			var id int64
			var dispatchID *int64
			if err := rows.Scan(&id, &dispatchID); err != nil {
				rows.Close()
				return s.fail(err)
			}
			got[id] = 0
			if dispatchID != nil {
				got[id] = *dispatchID
			}
		}
		if err := rows.Err(); err != nil {
			return s.fail(err)
		}
		for _, id := range s.ids {
			if dispatchID, ok := got[id]; ok {
				s.done[id](dispatchID, nil)
			} else {
				s.done[id](0, groupcommit.ErrAlone)
			}
		}
		return nil
	})
}

func (s *createSet) fail(err error) error {
	err = fmt.Errorf("boardreadyops_outbox_complete_check_run_create_batch: %w", sqlstate.Classify(err))
	for _, id := range s.ids {
		s.done[id](0, err)
	}
	return err
}
