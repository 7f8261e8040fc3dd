-- The stale-runs gauge reads the status index, however far behind the table's vacuum is.
--
-- boardreadyops_release_run_stale_counts (lifecycle, every 5 s on every replica, for the gauge
-- boardreadyops_release_runs_stale) counts each unfinished state's runs older than a
-- threshold with one subquery per state. The state is a parameter of that subquery, so the
-- planner costs it for an average state, not for the few unfinished runs there are; while
-- release_runs' recent updates are not yet vacuumed (its pages not all-visible, autovacuum
-- waiting for a fifth of a large table to be dead), it chose a sequential scan of the whole table,
-- five times per call: on 300,000 runs that had just finished, 100,000 buffers and 270 ms per call
-- against 2,700 buffers and 27 ms through release_runs_status_created_idx (which then also marks
-- the finished runs' dead entries, so that later calls step over them). The function now runs with
-- sequential and bitmap scans off, one generic plan, and without JIT (its cost estimate grows with
-- the table), as the claims do (00043). Nothing else changes.
--
-- Only a function's settings changed: no table lock.

-- +goose Up
ALTER FUNCTION public.boardreadyops_release_run_stale_counts(interval, timestamp with time zone)
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION public.boardreadyops_release_run_stale_counts(interval, timestamp with time zone)
    SET enable_seqscan = off;
ALTER FUNCTION public.boardreadyops_release_run_stale_counts(interval, timestamp with time zone)
    SET enable_bitmapscan = off;
ALTER FUNCTION public.boardreadyops_release_run_stale_counts(interval, timestamp with time zone)
    SET jit = off;

-- +goose Down
ALTER FUNCTION public.boardreadyops_release_run_stale_counts(interval, timestamp with time zone)
    RESET jit;
ALTER FUNCTION public.boardreadyops_release_run_stale_counts(interval, timestamp with time zone)
    RESET enable_bitmapscan;
ALTER FUNCTION public.boardreadyops_release_run_stale_counts(interval, timestamp with time zone)
    RESET enable_seqscan;
ALTER FUNCTION public.boardreadyops_release_run_stale_counts(interval, timestamp with time zone)
    RESET plan_cache_mode;
