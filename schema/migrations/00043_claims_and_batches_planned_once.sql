-- The claims and two batch transitions keep one plan per connection, pinned to their indexes
-- (issue 25, docs/performance.md "Planned once, pinned to the index").
--
-- 00038 and 00040 set plan_cache_mode = force_custom_plan on the claims and the batch
-- transitions: PL/pgSQL's generic plan, cached from a statement's sixth call, depended on the
-- table's size at that moment (a sequential scan, or a bitmap scan and sort of every due row, kept
-- as the table grew). A custom plan is made at every call, and that planning is most of a small
-- call's cost: a claim of one effect cost PostgreSQL 415 µs with its planning and 283 µs without
-- (pgbench, one client, claims rolled back), a batch start of one effect 209 and 170 µs. At a
-- steady 150 release runs/s the claims come with two or three rows each, and planning took 925 µs
-- of PostgreSQL's CPU per run (perf), against 99 µs in a burst.
--
-- Here boardreadyops_outbox_claim, boardreadyops_job_claim, boardreadyops_job_complete_batch and
-- boardreadyops_outbox_start_delivery_batch keep their generic plan (plan_cache_mode =
-- force_generic_plan: planned once per connection) and may not choose the plans that made it a
-- lottery: enable_seqscan, enable_bitmapscan and, in the claims, enable_sort are off, so the only
-- plan left without a penalty is the one a backlog gets. A claim reads the claim index in order and
-- stops after its batch; a batch transition probes the primary key, the only index its conditions
-- can use. The claims' UPDATE now finds the claimed rows through `id = ANY (ARRAY(SELECT id FROM
-- due))`: a join with the CTE let the generic plan, which cannot know the batch is small, hash the
-- whole table. The settings hold for the duration of a call (SET clauses): for what the functions
-- call too, which is the row-check functions, with no queries of their own.
--
-- Not here: boardreadyops_outbox_complete_check_run_complete_batch names an effect type, which
-- control_plane_outbox_effect_key can match as a non-leading column: planned on an empty outbox,
-- its generic plan scanned that whole index (6,122 buffers per call at 5,000 runs). It and the
-- paced claim (whose joins the rewrite above must reach first) keep planning per call.
--
-- Only function definitions change: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_claim(p_worker text, p_limit integer, p_lease interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS SETOF public.control_plane_outbox
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_sort TO 'off'
    AS $$
DECLARE
    -- Workflow dispatches paused (brops dispatch pause): everywhere, or of these installations.
    v_paused_all    boolean;
    v_paused        bigint[];
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_worker IS NULL OR length(p_worker) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'worker must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'claim limit must be between 1 and 1000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'lease must be between 1 second and 1 hour, got %', p_lease USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(bool_or(p.installation_id = 0), false), coalesce(array_agg(p.installation_id), '{}')
    INTO v_paused_all, v_paused FROM public.dispatch_pauses p;
    RETURN QUERY
    WITH due AS (
        SELECT o.id FROM public.control_plane_outbox o
        WHERE o.status = 'available' AND o.available_at <= v_now
          AND NOT (o.effect_type = 'github.workflow.dispatch' AND (v_paused_all OR o.installation_id = ANY (v_paused)))
          AND NOT EXISTS (SELECT 1 FROM public.github_installation_limits l
                          WHERE l.installation_id = o.installation_id AND l.blocked_until > v_now)
        ORDER BY o.available_at, o.id
        LIMIT p_limit
        FOR UPDATE OF o SKIP LOCKED
    )
    UPDATE public.control_plane_outbox o
    SET status = 'leased', lease_owner = p_worker, lease_expires_at = v_now + p_lease,
        attempts = o.attempts + 1, updated_at = v_now,
        delivery_started_at = CASE WHEN o.effect_type = 'github.workflow.dispatch' THEN o.delivery_started_at ELSE v_now END
    -- The claimed rows by primary key, whatever the generic plan thinks the batch holds.
    WHERE o.id = ANY (ARRAY(SELECT due.id FROM due))
    RETURNING o.*;
END;
$$;

-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_claim(p_worker text, p_limit integer, p_lease interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS SETOF public.control_plane_jobs
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_sort TO 'off'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_worker IS NULL OR length(p_worker) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'worker must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'claim limit must be between 1 and 1000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'lease must be between 1 second and 1 hour, got %', p_lease USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH due AS (
        SELECT j.id FROM public.control_plane_jobs j
        WHERE j.status = 'available' AND j.available_at <= v_now
        ORDER BY j.available_at, j.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE public.control_plane_jobs j
    SET status = 'leased', lease_owner = p_worker, lease_expires_at = v_now + p_lease,
        attempts = j.attempts + 1, updated_at = v_now
    -- The claimed rows by primary key, whatever the generic plan thinks the batch holds.
    WHERE j.id = ANY (ARRAY(SELECT due.id FROM due))
    RETURNING j.*;
END;
$$;

-- +goose StatementEnd

ALTER FUNCTION public.boardreadyops_job_complete_batch(bigint[], text, timestamptz) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION public.boardreadyops_job_complete_batch(bigint[], text, timestamptz) SET enable_seqscan = off;
ALTER FUNCTION public.boardreadyops_job_complete_batch(bigint[], text, timestamptz) SET enable_bitmapscan = off;
ALTER FUNCTION public.boardreadyops_outbox_start_delivery_batch(bigint[], text, timestamptz) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION public.boardreadyops_outbox_start_delivery_batch(bigint[], text, timestamptz) SET enable_seqscan = off;
ALTER FUNCTION public.boardreadyops_outbox_start_delivery_batch(bigint[], text, timestamptz) SET enable_bitmapscan = off;

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_claim(p_worker text, p_limit integer, p_lease interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS SETOF public.control_plane_outbox
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
DECLARE
    -- Workflow dispatches paused (brops dispatch pause): everywhere, or of these installations.
    v_paused_all    boolean;
    v_paused        bigint[];
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_worker IS NULL OR length(p_worker) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'worker must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'claim limit must be between 1 and 1000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'lease must be between 1 second and 1 hour, got %', p_lease USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(bool_or(p.installation_id = 0), false), coalesce(array_agg(p.installation_id), '{}')
    INTO v_paused_all, v_paused FROM public.dispatch_pauses p;
    RETURN QUERY
    WITH due AS (
        SELECT o.id FROM public.control_plane_outbox o
        WHERE o.status = 'available' AND o.available_at <= v_now
          AND NOT (o.effect_type = 'github.workflow.dispatch' AND (v_paused_all OR o.installation_id = ANY (v_paused)))
          AND NOT EXISTS (SELECT 1 FROM public.github_installation_limits l
                          WHERE l.installation_id = o.installation_id AND l.blocked_until > v_now)
        ORDER BY o.available_at, o.id
        LIMIT p_limit
        FOR UPDATE OF o SKIP LOCKED
    )
    UPDATE public.control_plane_outbox o
    SET status = 'leased', lease_owner = p_worker, lease_expires_at = v_now + p_lease,
        attempts = o.attempts + 1, updated_at = v_now,
        delivery_started_at = CASE WHEN o.effect_type = 'github.workflow.dispatch' THEN o.delivery_started_at ELSE v_now END
    FROM due
    WHERE o.id = due.id
    RETURNING o.*;
END;
$$;

-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_claim(p_worker text, p_limit integer, p_lease interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS SETOF public.control_plane_jobs
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_worker IS NULL OR length(p_worker) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'worker must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'claim limit must be between 1 and 1000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'lease must be between 1 second and 1 hour, got %', p_lease USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH due AS (
        SELECT j.id FROM public.control_plane_jobs j
        WHERE j.status = 'available' AND j.available_at <= v_now
        ORDER BY j.available_at, j.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE public.control_plane_jobs j
    SET status = 'leased', lease_owner = p_worker, lease_expires_at = v_now + p_lease,
        attempts = j.attempts + 1, updated_at = v_now
    FROM due
    WHERE j.id = due.id
    RETURNING j.*;
END;
$$;

-- +goose StatementEnd

ALTER FUNCTION public.boardreadyops_job_complete_batch(bigint[], text, timestamptz) RESET enable_seqscan;
ALTER FUNCTION public.boardreadyops_job_complete_batch(bigint[], text, timestamptz) RESET enable_bitmapscan;
ALTER FUNCTION public.boardreadyops_job_complete_batch(bigint[], text, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION public.boardreadyops_outbox_start_delivery_batch(bigint[], text, timestamptz) RESET enable_seqscan;
ALTER FUNCTION public.boardreadyops_outbox_start_delivery_batch(bigint[], text, timestamptz) RESET enable_bitmapscan;
ALTER FUNCTION public.boardreadyops_outbox_start_delivery_batch(bigint[], text, timestamptz) SET plan_cache_mode = force_custom_plan;
