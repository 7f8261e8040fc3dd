-- The batch transitions are planned at every call (issue 25, docs/performance.md "End to end").
--
-- boardreadyops_job_complete_batch, boardreadyops_outbox_start_delivery_batch and
-- boardreadyops_outbox_complete_check_run_complete_batch find their rows by `id = ANY(p_ids)`.
-- PL/pgSQL caches a statement's generic plan per connection from its sixth call when it costs
-- less than the custom ones so far. Planned while the table was a few pages (a new installation,
-- the first minute of a load, before autovacuum's first ANALYZE), that generic plan is a
-- sequential scan, and the connection keeps it as the table grows until an ANALYZE invalidates
-- it. In one of three 20,000-run loads from an empty database (pg_stat_user_tables):
-- control_plane_jobs had 437 sequential scans reading 10.8 million rows, and the jobs' batch
-- completion read 480 buffers per call instead of 247 — the slowest of the three runs. Which
-- connection caches what depends on the first calls' timing: a lottery, and a large part of the
-- spread between two runs of the same code.
--
-- plan_cache_mode = force_custom_plan on these three functions plans their statements with the
-- call's array at every call, from the table's current size: a primary-key probe once the table
-- is more than a few pages. A plan costs tens of microseconds, once per batch. The claims are
-- planned per call already (their custom plans are cheaper than the generic one,
-- docs/performance.md "Levers measured"); no other hot table was read sequentially beyond its
-- first pages in those loads.

-- +goose Up
ALTER FUNCTION public.boardreadyops_job_complete_batch(bigint[], text, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION public.boardreadyops_outbox_start_delivery_batch(bigint[], text, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION public.boardreadyops_outbox_complete_check_run_complete_batch(bigint[], text, timestamptz) SET plan_cache_mode = force_custom_plan;

-- +goose Down
ALTER FUNCTION public.boardreadyops_job_complete_batch(bigint[], text, timestamptz) RESET plan_cache_mode;
ALTER FUNCTION public.boardreadyops_outbox_start_delivery_batch(bigint[], text, timestamptz) RESET plan_cache_mode;
ALTER FUNCTION public.boardreadyops_outbox_complete_check_run_complete_batch(bigint[], text, timestamptz) RESET plan_cache_mode;
