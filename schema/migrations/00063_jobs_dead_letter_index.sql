-- Completed jobs in one index, not two; dead letters in their own (issue 25, docs/performance.md
-- "Where a run's CPU goes, by call graph").
--
-- No job transition is HOT (each changes status), so each row version enters every index whose
-- predicate it meets. A completed job met two: control_plane_jobs_completed_idx (completed_at,
-- 00026: retention's pick) and control_plane_jobs_terminal_idx (status, updated_at over completed
-- jobs and dead letters, 00001). The terminal index's completed half served only `brops jobs
-- list --status completed`, which now orders completed jobs by completed_at (the same instant as
-- their updated_at: both are set by the completion, and a completed job is never written again)
-- and so reads the completed index. Its dead-letter half (the listing, and the dead-letter count
-- of boardreadyops_job_stats) moves to control_plane_jobs_dead_letter_idx. Two index insertions
-- fewer per release run (two jobs), and one index entry fewer for every completed job retention
-- keeps.
--
-- Locks: CREATE and DROP INDEX CONCURRENTLY take SHARE UPDATE EXCLUSIVE: claims, inserts and
-- updates carry on (the build reads the table twice). Hence NO TRANSACTION, as 00026; the DROP
-- INDEX CONCURRENTLY IF EXISTS in front of the build removes an INVALID index an interrupted run
-- left behind, so a run again starts over.

-- +goose NO TRANSACTION
-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_jobs_dead_letter_idx;
CREATE INDEX CONCURRENTLY control_plane_jobs_dead_letter_idx ON public.control_plane_jobs (updated_at)
    WHERE status = 'dead_letter';
DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_jobs_terminal_idx;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_jobs_terminal_idx;
CREATE INDEX CONCURRENTLY control_plane_jobs_terminal_idx ON public.control_plane_jobs (status, updated_at)
    WHERE status IN ('completed', 'dead_letter');
DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_jobs_dead_letter_idx;
