package outbox

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/groupcommit"
	"github.com/boardreadyops/cloud/pkg/sqlstate"
)

// The Queue* methods add a transition to a group commit (groupcommit.Batch) instead of running
// it, so that many transitions share one round trip and one commit. Each reports its own outcome
// through done (classified like the direct methods) when the batch is sent; a failing one also
// fails the batch, whose committer then runs each transition on its own.
//
// Check-run creations, workflow-dispatch completions, check-run completions and delivery starts
// of one worker share one set-based call per batch (boardreadyops_outbox_complete_check_run_create_batch,
// ..._complete_workflow_dispatch_batch, ..._complete_check_run_complete_batch,
// ..._start_delivery_batch); an id that call leaves out — lease gone, wrong type, a case only the
// single-row function handles — runs again alone through the single-row function, whose error
// is its exact outcome.

// QueueCompleteCheckRunCreate queues CompleteCheckRunCreate; done receives the enqueued dispatch
// id (0 when none). The creations of one worker in a batch share one set-based statement
// (boardreadyops_outbox_complete_check_run_create_batch, migration 00050), which carries out the
// common case; an effect it leaves out runs alone through the single-row function.
func (s *Store) QueueCompleteCheckRunCreate(b *groupcommit.Batch, id int64, worker string, checkRunID int64, done func(dispatchID int64, err error)) {
	if s.joinSet(b, "boardreadyops_outbox_complete_check_run_create_batch", true, worker, id, done, checkRunID) {
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
// returned ("" when none), so that the check-run update the completion enqueues links to it. The
// completions of one worker in a batch share one set-based call
// (boardreadyops_outbox_complete_workflow_dispatch_batch, migration 00051), which carries out the
// common case; one it leaves out runs alone through the single-row function
// (boardreadyops_outbox_complete_workflow_dispatch_with_run, migration 00042).
func (s *Store) QueueCompleteWorkflowDispatch(b *groupcommit.Batch, id int64, worker string, workflowRunID int64, workflowRunURL string, done func(error)) {
	if s.joinSet(b, "boardreadyops_outbox_complete_workflow_dispatch_batch", false, worker, id, errOnly(done), workflowRunID, nullIfEmpty(workflowRunURL)) {
		return
	}
	queueVoid(b, "complete workflow dispatch", id, done,
		`SELECT 1 FROM boardreadyops_outbox_complete_workflow_dispatch_with_run($1, $2, $3, $4, $5)`,
		id, worker, workflowRunID, nullIfEmpty(workflowRunURL), s.now())
}

// QueueCompleteWorkflowRunRead queues CompleteWorkflowRunRead.
func (s *Store) QueueCompleteWorkflowRunRead(b *groupcommit.Batch, id int64, worker string, r WorkflowRunRead, done func(outcome string, err error)) {
	b.Queue(`SELECT boardreadyops_outbox_complete_workflow_run_read_at($1, $2, $3, $4, $5, $6, $7, $8)`,
		id, worker, r.Status, r.Conclusion, r.RunAttempt, r.HTMLURL, nullIfEmpty(r.HeadSHA), s.now()).QueryRow(func(row pgx.Row) error {
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
	if s.joinSet(b, "boardreadyops_outbox_complete_check_run_complete_batch", false, worker, id, errOnly(done)) {
		return
	}
	queueVoid(b, "complete check run completion", id, done,
		`SELECT 1 FROM boardreadyops_outbox_complete_check_run_complete($1, $2, $3)`, id, worker, s.now())
}

// QueueStartDelivery queues StartDelivery: the caller may send the request only after the batch
// committed without error for it.
func (s *Store) QueueStartDelivery(b *groupcommit.Batch, id int64, worker string, done func(error)) {
	if s.joinSet(b, "boardreadyops_outbox_start_delivery_batch", false, worker, id, errOnly(done)) {
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

// joinSet adds id, with its own arguments (each an int64 or a *string), to the batch's set for
// function and worker; false when the request runs alone. withValue: the function returns a
// value with each id (RETURNS TABLE (id, value)), else only the ids (SETOF bigint).
func (s *Store) joinSet(b *groupcommit.Batch, function string, withValue bool, worker string, id int64, done func(value int64, err error), args ...any) bool {
	set, ok := b.Join(function+"\x00"+worker, func() groupcommit.Set {
		return &rowSet{function: function, withValue: withValue, worker: worker, now: s.now(), args: make([]any, len(args)),
			done: map[int64]func(int64, error){}}
	})
	if !ok {
		return false
	}
	set.(*rowSet).add(id, done, args)
	return true
}

func errOnly(done func(error)) func(int64, error) {
	return func(_ int64, err error) { done(err) }
}

// rowSet is one set-based call, `function(ids, per-id argument arrays…, worker, now)`, returning
// the ids it carried out (with a value each when withValue: a nullable bigint, reported as 0 when
// NULL). An id it does not return is reported ErrAlone.
type rowSet struct {
	function  string
	withValue bool
	worker    string
	now       any
	ids       []int64
	args      []any // one array per argument: []int64 or []*string
	done      map[int64]func(int64, error)
}

func (s *rowSet) add(id int64, done func(int64, error), args []any) {
	if prev, dup := s.done[id]; dup {
		// The same effect twice in one batch cannot happen (one transition in flight per lease);
		// if it did, the second runs alone rather than being reported done by the first's row.
		s.done[id] = func(n int64, err error) { prev(n, err); done(0, groupcommit.ErrAlone) }
		return
	}
	s.ids = append(s.ids, id)
	for i, a := range args {
		switch v := a.(type) {
		case int64:
			col, _ := s.args[i].([]int64)
			s.args[i] = append(col, v)
		case *string:
			col, _ := s.args[i].([]*string)
			s.args[i] = append(col, v)
		default:
			panic(fmt.Sprintf("outbox: %s argument %d of type %T", s.function, i, a))
		}
	}
	s.done[id] = done
}

func (s *rowSet) Queue(b *pgx.Batch) {
	args := append(append([]any{s.ids}, s.args...), s.worker, s.now)
	params := make([]string, len(args))
	for i := range args {
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	columns := "t(id)"
	if s.withValue {
		columns = "t(id, value)"
	}
	b.Queue(`SELECT * FROM `+s.function+`(`+strings.Join(params, ", ")+`) AS `+columns, args...).Query(func(rows pgx.Rows) error {
		got := make(map[int64]int64, len(s.ids))
		for rows.Next() {
			var id int64
			var value *int64
			dest := []any{&id}
			if s.withValue {
				dest = append(dest, &value)
			}
			if err := rows.Scan(dest...); err != nil {
				rows.Close()
				return s.fail(err)
			}
			got[id] = 0
			if value != nil {
				got[id] = *value
			}
		}
		if err := rows.Err(); err != nil {
			return s.fail(err)
		}
		for _, id := range s.ids {
			if value, ok := got[id]; ok {
				s.done[id](value, nil)
			} else {
				s.done[id](0, groupcommit.ErrAlone)
			}
		}
		return nil
	})
}

func (s *rowSet) fail(err error) error {
	err = fmt.Errorf("%s: %w", s.function, sqlstate.Classify(err))
	for _, id := range s.ids {
		s.done[id](0, err)
	}
	return err
}
