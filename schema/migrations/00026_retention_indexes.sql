-- Indexes for the retention deletes (docs/operations.md "Retention"), built online.
--
-- Each index serves exactly one delete of migration 00027's boardreadyops_retention_delete (or a
-- foreign-key action it sets off), and the plan tests in pkg/retention show that it is used:
--
-- control_plane_jobs_completed_idx   the jobs half: completed jobs oldest first. Without it the
--                                    sweep read the whole table and sorted it (measured at 200,000
--                                    rows: a sequential scan and an external sort, 325 ms per
--                                    1,000-row batch, growing with the table).
-- release_runs_completed_idx         terminal release runs oldest first.
-- control_plane_outbox_superseded_by_idx
--                                    deleting an effect sets superseded_by = NULL on the effects it
--                                    superseded (ON DELETE SET NULL): one lookup per deleted row.
-- control_plane_outbox_execution_attempt_idx
--                                    deleting an execution attempt checks that no effect still
--                                    refers to it (the foreign key): one lookup per deleted row.
-- control_plane_audit_occurred_at_idx
--                                    audit rows oldest first (audit retention is off by default).
--
-- Completed effects oldest first already have control_plane_outbox_completed_idx (00001), effects
-- and attempts of a run control_plane_outbox_release_run_idx and execution_attempts_number_key.
--
-- CREATE INDEX CONCURRENTLY takes SHARE UPDATE EXCLUSIVE: claims, inserts and updates carry on
-- while the index is built (two table scans). It cannot run in a transaction, hence NO
-- TRANSACTION: goose runs each statement on its own. A build that fails (or is interrupted)
-- leaves an INVALID index of the same name behind; the DROP INDEX CONCURRENTLY IF EXISTS in front
-- of each build removes it when the migration is run again.

-- +goose NO TRANSACTION
-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_jobs_completed_idx;
CREATE INDEX CONCURRENTLY control_plane_jobs_completed_idx ON public.control_plane_jobs (completed_at)
    WHERE status = 'completed';
DROP INDEX CONCURRENTLY IF EXISTS public.release_runs_completed_idx;
CREATE INDEX CONCURRENTLY release_runs_completed_idx ON public.release_runs (completed_at)
    WHERE status IN ('succeeded', 'failed', 'cancelled');
DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_outbox_superseded_by_idx;
CREATE INDEX CONCURRENTLY control_plane_outbox_superseded_by_idx ON public.control_plane_outbox (superseded_by)
    WHERE superseded_by IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_outbox_execution_attempt_idx;
CREATE INDEX CONCURRENTLY control_plane_outbox_execution_attempt_idx ON public.control_plane_outbox (execution_attempt_id)
    WHERE execution_attempt_id IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_audit_occurred_at_idx;
CREATE INDEX CONCURRENTLY control_plane_audit_occurred_at_idx ON public.control_plane_audit (occurred_at);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_audit_occurred_at_idx;
DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_outbox_execution_attempt_idx;
DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_outbox_superseded_by_idx;
DROP INDEX CONCURRENTLY IF EXISTS public.release_runs_completed_idx;
DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_jobs_completed_idx;
