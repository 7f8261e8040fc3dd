-- A release run is stale when its state has not changed for the threshold, not when it was
-- created longer ago (docs/operations.md, "Runbook: stale release runs").
--
-- boardreadyops_release_run_stale_counts (lifecycle, every 5 s, for the gauge
-- boardreadyops_release_runs_stale and the alert BoardReadyOpsReleaseRunsStale) counted the
-- unfinished runs created before the threshold. A run re-run from its check run, retried, or
-- replayed by an operator hours after its tag was pushed counted at once, and the alert paged 15
-- minutes later while the new attempt was healthy. It now counts the runs whose last transition
-- (updated_at: every change of state sets it) is older than the threshold: a run stuck in a
-- state, however it got there. A run never moved since its creation counts as before.
--
-- The count still reads one range of release_runs_status_created_idx per state: a run's last
-- change is never before its creation, so created_at before the threshold bounds the range, and
-- updated_at filters it. The function's settings (00060) are restated, as CREATE OR REPLACE
-- replaces them.
--
-- Only a function changes: no table lock; a previous release's lifecycle calls it unchanged.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_stale_counts(p_threshold interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(status text, stale bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_threshold IS NULL OR p_threshold < interval '1 minute' THEN
        RAISE EXCEPTION 'stale threshold must be at least 1 minute, got %', p_threshold USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT s.state, (SELECT count(*) FROM public.release_runs r WHERE r.status = s.state
                     AND r.created_at < v_now - p_threshold AND r.updated_at < v_now - p_threshold)
    FROM unnest(ARRAY['requested', 'check_pending', 'dispatching', 'running', 'blocked']) WITH ORDINALITY AS s(state, ord)
    ORDER BY s.ord;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_stale_counts(p_threshold interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(status text, stale bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_threshold IS NULL OR p_threshold < interval '1 minute' THEN
        RAISE EXCEPTION 'stale threshold must be at least 1 minute, got %', p_threshold USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT s.state, (SELECT count(*) FROM public.release_runs r WHERE r.status = s.state AND r.created_at < v_now - p_threshold)
    FROM unnest(ARRAY['requested', 'check_pending', 'dispatching', 'running', 'blocked']) WITH ORDINALITY AS s(state, ord)
    ORDER BY s.ord;
END;
$$;
-- +goose StatementEnd
