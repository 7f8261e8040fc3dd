-- boardreadyops_outbox_dispatch_pause_reason in PL/pgSQL, which keeps its plan (issue 25,
-- docs/performance.md "Planned once, pinned to the index").
--
-- A SQL function that cannot be inlined (this one is SECURITY DEFINER and pins its search path)
-- is parsed and planned again in every transaction that calls it. Lifecycle's check-run creation
-- and the dispatch's creation call it once per release run each: at a steady 150 release runs/s,
-- 10,307 of its 12,000 calls were planned (pg_stat_statements.track_planning), 67 µs each. A
-- PL/pgSQL function caches the plan of its statement per connection (plan_cache_mode auto: a
-- generic plan once custom ones cost no less); the statement names at most two rows by primary
-- key (installation 0, everywhere, or the installation's own) of a table with one row per pause. A call alone (pgbench, one client) cost PostgreSQL 104 µs of CPU as SQL and
-- 71 µs as PL/pgSQL. Same result, same privileges.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_dispatch_pause_reason(p_installation_id bigint) RETURNS text
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    RETURN (SELECT p.reason FROM public.dispatch_pauses p WHERE p.installation_id IN (0, p_installation_id)
            ORDER BY p.installation_id LIMIT 1);
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_dispatch_pause_reason(p_installation_id bigint) RETURNS text
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT p.reason FROM public.dispatch_pauses p WHERE p.installation_id IN (0, p_installation_id)
    ORDER BY p.installation_id LIMIT 1;
$$;
-- +goose StatementEnd
