-- The check-run completion batch keeps one plan per connection too (issue 25, docs/performance.md
-- "Planned once, pinned to the index").
--
-- 00043 left boardreadyops_outbox_complete_check_run_complete_batch planning at every call: its
-- `effect_type = 'github.check_run.complete'` is an index condition for
-- control_plane_outbox_effect_key (a non-leading column), and the generic plan made on an empty
-- outbox chose that index: 6,122 buffers per call in a 10,000-run load, 25,560 rows in
-- TestOutboxBatchTransitionsPlannedOnce. Written `IS NOT DISTINCT FROM` (the same test on a NOT
-- NULL column) it is a filter no index serves, so with sequential and bitmap scans off the
-- primary key is the only plan, and the function keeps it as the other batch transitions do.
--
-- Only the function's definition changes: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_check_run_complete_batch(p_ids bigint[], p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS SETOF bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 10000 THEN
        RAISE EXCEPTION 'between 0 and 10000 outbox ids per call' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    UPDATE public.control_plane_outbox o
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
        result = jsonb_build_object('check_run_id', o.payload -> 'check_run_id'), last_error = NULL,
        updated_at = v_now
    -- The effect type by IS NOT DISTINCT FROM (effect_type is NOT NULL: the same test), which no
    -- index can serve: as `=` it matched control_plane_outbox_effect_key, and a plan made on an
    -- empty outbox read that whole index at every call.
    WHERE o.id = ANY(p_ids) AND o.lease_owner = p_worker
      AND o.effect_type IS NOT DISTINCT FROM 'github.check_run.complete'
    RETURNING o.id;
END;
$$;

-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_check_run_complete_batch(p_ids bigint[], p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS SETOF bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 10000 THEN
        RAISE EXCEPTION 'between 0 and 10000 outbox ids per call' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    UPDATE public.control_plane_outbox o
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
        result = jsonb_build_object('check_run_id', o.payload -> 'check_run_id'), last_error = NULL,
        updated_at = v_now
    WHERE o.id = ANY(p_ids) AND o.lease_owner = p_worker AND o.effect_type = 'github.check_run.complete'
    RETURNING o.id;
END;
$$;

-- +goose StatementEnd
