-- Completed jobs in one index, not two; dead letters in their own (issue 25, docs/performance.md
-- "Where a run's CPU goes, by call graph").
--
-- No job transition is HOT (each changes status), so each row version enters every index whose
-- predicate it meets. A completed job met two: control_plane_jobs_completed_idx (completed_at,
-- 00026: retention's pick) and control_plane_jobs_terminal_idx (status, updated_at over completed
-- jobs and dead letters, 00001). The terminal index's completed half served only `brops jobs
-- list --status completed`, which now orders completed jobs by completed_at (the same instant as
-- their updated_at: every completion sets both, and nothing changes a completed job's updated_at
-- while it stays completed) and so reads the completed index. Its dead-letter half (the listing,
-- and the dead-letter count of boardreadyops_job_stats) moves to
-- control_plane_jobs_dead_letter_idx. Two index insertions fewer per release run (two jobs), and
-- one index entry fewer for every completed job retention keeps.
--
-- Locks: CREATE and DROP INDEX CONCURRENTLY take SHARE UPDATE EXCLUSIVE: claims, inserts and
-- updates carry on (the build reads the table twice, and each step waits for the transactions
-- open on the table when it starts). Hence NO TRANSACTION, as 00026 and 00049. A run again
-- after an interruption keeps the new index when it was built (a valid index is not rebuilt,
-- so the dead-letter count never goes without one), and stops, saying what to do, when an
-- interrupted build left it INVALID, as 00049 does.
--
-- The previous release's `brops jobs list --status completed` (ordered by updated_at) still
-- works on this schema, reading the table whole; its dead-letter listing reads the new index.

-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS control_plane_jobs_dead_letter_idx ON public.control_plane_jobs (updated_at)
    WHERE status = 'dead_letter';
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_index i
               WHERE i.indexrelid = 'public.control_plane_jobs_dead_letter_idx'::pg_catalog.regclass AND NOT i.indisvalid) THEN
        RAISE EXCEPTION 'control_plane_jobs_dead_letter_idx is INVALID (an interrupted build or drop): run DROP INDEX CONCURRENTLY public.control_plane_jobs_dead_letter_idx, then migrate again';
    END IF;
END;
$$;
-- +goose StatementEnd
DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_jobs_terminal_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS control_plane_jobs_terminal_idx ON public.control_plane_jobs (status, updated_at)
    WHERE status IN ('completed', 'dead_letter');
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_index i
               WHERE i.indexrelid = 'public.control_plane_jobs_terminal_idx'::pg_catalog.regclass AND NOT i.indisvalid) THEN
        RAISE EXCEPTION 'control_plane_jobs_terminal_idx is INVALID (an interrupted build or drop): run DROP INDEX CONCURRENTLY public.control_plane_jobs_terminal_idx, then migrate down again';
    END IF;
END;
$$;
-- +goose StatementEnd
DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_jobs_dead_letter_idx;
