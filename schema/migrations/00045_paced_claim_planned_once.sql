-- The paced claim keeps one plan per connection, pinned to its indexes, as 00043 did for the
-- unpaced claim (issue 25, docs/performance.md "Planned once, pinned to the index").
--
-- boardreadyops_outbox_claim_paced is the dispatcher's claim at its default settings (one request
-- in flight per installation, docs/dispatcher.md). 00040 planned it at every call; its four
-- statements cost a claim of one effect about as much planning as the unpaced claim's one
-- (docs/performance.md). Here it keeps its generic plan (plan_cache_mode =
-- force_generic_plan) with sequential scans, bitmap scans and optional sorts disabled, so that the
-- candidates are read in the claim index's order and stop at the batch's limit, and every row it
-- locks or writes is found by primary key: the installation rows through `installation_id = ANY
-- (ARRAY(SELECT …))` and the effects through `id = ANY (ARRAY(SELECT …))` instead of joins to the
-- CTEs, which a generic plan, not knowing they are small, may answer by hashing a whole table.
-- Same rows locked and written; the effects are locked in key order.
--
-- The paced claim sorts what no index can order (its candidate installations, the window that
-- ranks their effects), and a disabled sort still runs, costed 10^10 higher: enough for the JIT
-- (jit_above_cost, 100,000) to compile the statements at every execution: 66 and 349 ms for its
-- two sorting statements, about 370 ms per claim in a pgbench loop on
-- this machine. jit is off for it, and for 00043's four functions, whose plans need no disabled
-- node today but would meet the same if an index went missing. JIT is for long analytical
-- queries; these are short ones.
--
-- Only function definitions change: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_claim_paced(p_worker text, p_limit integer, p_lease interval, p_per_installation integer, p_mutation_interval interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS SETOF public.control_plane_outbox
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET enable_sort TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    -- Workflow dispatches paused (brops dispatch pause): everywhere, or of these installations.
    v_paused_all    boolean;
    v_paused        bigint[];
    v_now           timestamptz := public.boardreadyops_clock_now(p_now);
    v_ids           bigint[];
    v_installations bigint[];
    v_distinct      bigint[];
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
    IF p_per_installation IS NULL OR p_per_installation NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'per-installation limit must be between 1 and 1000, got %', p_per_installation USING ERRCODE = '22023';
    END IF;
    IF p_mutation_interval IS NULL OR p_mutation_interval < interval '0' OR p_mutation_interval > interval '1 minute' THEN
        RAISE EXCEPTION 'mutation interval must be between 0 and 1 minute, got %', p_mutation_interval USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(bool_or(p.installation_id = 0), false), coalesce(array_agg(p.installation_id), '{}')
    INTO v_paused_all, v_paused FROM public.dispatch_pauses p;

    SELECT array_agg(c.id ORDER BY c.available_at, c.id), array_agg(c.installation_id ORDER BY c.available_at, c.id)
    INTO v_ids, v_installations
    FROM (
        SELECT o.id, o.installation_id, o.available_at FROM public.control_plane_outbox o
        WHERE o.status = 'available' AND o.available_at <= v_now
          AND NOT (o.effect_type = 'github.workflow.dispatch' AND (v_paused_all OR o.installation_id = ANY (v_paused)))
          AND NOT EXISTS (
              SELECT 1 FROM public.github_installation_limits l
              WHERE l.installation_id = o.installation_id
                AND (l.blocked_until > v_now OR l.next_allowed_at > v_now
                     OR (l.in_flight >= p_per_installation AND l.in_flight_expires_at > v_now)))
        ORDER BY o.available_at, o.id
        LIMIT least(4 * p_limit, 4000)
    ) c;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    v_distinct := ARRAY(SELECT DISTINCT i FROM unnest(v_installations) i ORDER BY i);
    -- An installation's first claim creates its row (in key order: concurrent claims creating
    -- the same rows wait for each other instead of deadlocking); for a known one the conflict
    -- check is one index probe and nothing is written.
    INSERT INTO public.github_installation_limits (installation_id, updated_at)
    SELECT i, v_now FROM unnest(v_distinct) i
    ON CONFLICT (installation_id) DO NOTHING;

    RETURN QUERY
    WITH firsts AS (
        -- Each candidate installation once, in the order of its oldest candidate: a claim takes
        -- at most p_limit effects, and every installation that passes the gate gives at least
        -- one, so only the first p_limit installations' rows are locked (00034).
        SELECT c.installation_id FROM unnest(v_ids, v_installations) WITH ORDINALITY AS c(id, installation_id, ord)
        GROUP BY c.installation_id
        ORDER BY min(c.ord)
        LIMIT p_limit
    ), gate AS (
        SELECT l.installation_id,
               p_per_installation - CASE WHEN l.in_flight_expires_at > v_now THEN l.in_flight ELSE 0 END AS room
        FROM public.github_installation_limits l
        -- Rows found by primary key, here and below: a generic plan cannot know these sets are
        -- small, and may hash what it joins them to.
        WHERE l.installation_id = ANY (ARRAY(SELECT f.installation_id FROM firsts f))
          AND (l.blocked_until IS NULL OR l.blocked_until <= v_now)
          AND (l.next_allowed_at IS NULL OR l.next_allowed_at <= v_now)
          AND (l.in_flight < p_per_installation OR l.in_flight_expires_at IS NULL OR l.in_flight_expires_at <= v_now)
        FOR UPDATE OF l SKIP LOCKED
    ), ranked AS (
        SELECT c.id, c.ord, g.room, row_number() OVER (PARTITION BY c.installation_id ORDER BY c.ord) AS rn
        FROM unnest(v_ids, v_installations) WITH ORDINALITY AS c(id, installation_id, ord)
        JOIN gate g ON g.installation_id = c.installation_id
    ), picked AS (
        SELECT r.id FROM ranked r
        WHERE r.rn <= CASE WHEN p_mutation_interval > interval '0' THEN least(r.room, 1) ELSE r.room END
        ORDER BY r.ord
        LIMIT p_limit
    ), chosen AS (
        SELECT o.id, o.installation_id FROM public.control_plane_outbox o
        WHERE o.id = ANY (ARRAY(SELECT p.id FROM picked p))
          AND o.status = 'available' AND o.available_at <= v_now
        -- In key order: the primary key gives it, while the claim index, which the two
        -- conditions above also match and a plan made on a small table preferred, would need
        -- a sort.
        ORDER BY o.id
        FOR UPDATE OF o SKIP LOCKED
    ), paced AS (
        UPDATE public.github_installation_limits l
        SET in_flight = CASE WHEN l.in_flight_expires_at > v_now THEN l.in_flight ELSE 0 END + n.n,
            in_flight_expires_at = v_now + p_lease,
            next_allowed_at = CASE WHEN p_mutation_interval > interval '0' THEN v_now + p_mutation_interval ELSE l.next_allowed_at END,
            updated_at = v_now
        FROM (SELECT installation_id, count(*)::integer AS n FROM chosen GROUP BY installation_id) n
        WHERE l.installation_id = ANY (ARRAY(SELECT c.installation_id FROM chosen c))
          AND l.installation_id = n.installation_id
    )
    UPDATE public.control_plane_outbox o
    SET status = 'leased', lease_owner = p_worker, lease_expires_at = v_now + p_lease,
        attempts = o.attempts + 1, updated_at = v_now,
        delivery_started_at = CASE WHEN o.effect_type = 'github.workflow.dispatch' THEN o.delivery_started_at ELSE v_now END
    WHERE o.id = ANY (ARRAY(SELECT chosen.id FROM chosen))
    RETURNING o.*;
END;
$$;

-- +goose StatementEnd

ALTER FUNCTION public.boardreadyops_outbox_claim(text, integer, interval, timestamptz) SET jit = off;
ALTER FUNCTION public.boardreadyops_job_claim(text, integer, interval, timestamptz) SET jit = off;
ALTER FUNCTION public.boardreadyops_job_complete_batch(bigint[], text, timestamptz) SET jit = off;
ALTER FUNCTION public.boardreadyops_outbox_start_delivery_batch(bigint[], text, timestamptz) SET jit = off;

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_claim_paced(p_worker text, p_limit integer, p_lease interval, p_per_installation integer, p_mutation_interval interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS SETOF public.control_plane_outbox
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
DECLARE
    -- Workflow dispatches paused (brops dispatch pause): everywhere, or of these installations.
    v_paused_all    boolean;
    v_paused        bigint[];
    v_now           timestamptz := public.boardreadyops_clock_now(p_now);
    v_ids           bigint[];
    v_installations bigint[];
    v_distinct      bigint[];
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
    IF p_per_installation IS NULL OR p_per_installation NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'per-installation limit must be between 1 and 1000, got %', p_per_installation USING ERRCODE = '22023';
    END IF;
    IF p_mutation_interval IS NULL OR p_mutation_interval < interval '0' OR p_mutation_interval > interval '1 minute' THEN
        RAISE EXCEPTION 'mutation interval must be between 0 and 1 minute, got %', p_mutation_interval USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(bool_or(p.installation_id = 0), false), coalesce(array_agg(p.installation_id), '{}')
    INTO v_paused_all, v_paused FROM public.dispatch_pauses p;

    SELECT array_agg(c.id ORDER BY c.available_at, c.id), array_agg(c.installation_id ORDER BY c.available_at, c.id)
    INTO v_ids, v_installations
    FROM (
        SELECT o.id, o.installation_id, o.available_at FROM public.control_plane_outbox o
        WHERE o.status = 'available' AND o.available_at <= v_now
          AND NOT (o.effect_type = 'github.workflow.dispatch' AND (v_paused_all OR o.installation_id = ANY (v_paused)))
          AND NOT EXISTS (
              SELECT 1 FROM public.github_installation_limits l
              WHERE l.installation_id = o.installation_id
                AND (l.blocked_until > v_now OR l.next_allowed_at > v_now
                     OR (l.in_flight >= p_per_installation AND l.in_flight_expires_at > v_now)))
        ORDER BY o.available_at, o.id
        LIMIT least(4 * p_limit, 4000)
    ) c;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    v_distinct := ARRAY(SELECT DISTINCT i FROM unnest(v_installations) i ORDER BY i);
    -- An installation's first claim creates its row (in key order: concurrent claims creating
    -- the same rows wait for each other instead of deadlocking); for a known one the conflict
    -- check is one index probe and nothing is written.
    INSERT INTO public.github_installation_limits (installation_id, updated_at)
    SELECT i, v_now FROM unnest(v_distinct) i
    ON CONFLICT (installation_id) DO NOTHING;

    RETURN QUERY
    WITH firsts AS (
        -- Each candidate installation once, in the order of its oldest candidate: a claim takes
        -- at most p_limit effects, and every installation that passes the gate gives at least
        -- one, so only the first p_limit installations' rows are locked (00034).
        SELECT c.installation_id FROM unnest(v_ids, v_installations) WITH ORDINALITY AS c(id, installation_id, ord)
        GROUP BY c.installation_id
        ORDER BY min(c.ord)
        LIMIT p_limit
    ), gate AS (
        SELECT l.installation_id,
               p_per_installation - CASE WHEN l.in_flight_expires_at > v_now THEN l.in_flight ELSE 0 END AS room
        FROM public.github_installation_limits l
        JOIN firsts f ON f.installation_id = l.installation_id
        WHERE (l.blocked_until IS NULL OR l.blocked_until <= v_now)
          AND (l.next_allowed_at IS NULL OR l.next_allowed_at <= v_now)
          AND (l.in_flight < p_per_installation OR l.in_flight_expires_at IS NULL OR l.in_flight_expires_at <= v_now)
        FOR UPDATE OF l SKIP LOCKED
    ), ranked AS (
        SELECT c.id, c.ord, g.room, row_number() OVER (PARTITION BY c.installation_id ORDER BY c.ord) AS rn
        FROM unnest(v_ids, v_installations) WITH ORDINALITY AS c(id, installation_id, ord)
        JOIN gate g ON g.installation_id = c.installation_id
    ), picked AS (
        SELECT r.id FROM ranked r
        WHERE r.rn <= CASE WHEN p_mutation_interval > interval '0' THEN least(r.room, 1) ELSE r.room END
        ORDER BY r.ord
        LIMIT p_limit
    ), chosen AS (
        SELECT o.id, o.installation_id FROM public.control_plane_outbox o
        JOIN picked p ON p.id = o.id
        WHERE o.status = 'available' AND o.available_at <= v_now
        FOR UPDATE OF o SKIP LOCKED
    ), paced AS (
        UPDATE public.github_installation_limits l
        SET in_flight = CASE WHEN l.in_flight_expires_at > v_now THEN l.in_flight ELSE 0 END + n.n,
            in_flight_expires_at = v_now + p_lease,
            next_allowed_at = CASE WHEN p_mutation_interval > interval '0' THEN v_now + p_mutation_interval ELSE l.next_allowed_at END,
            updated_at = v_now
        FROM (SELECT installation_id, count(*)::integer AS n FROM chosen GROUP BY installation_id) n
        WHERE l.installation_id = n.installation_id
    )
    UPDATE public.control_plane_outbox o
    SET status = 'leased', lease_owner = p_worker, lease_expires_at = v_now + p_lease,
        attempts = o.attempts + 1, updated_at = v_now,
        delivery_started_at = CASE WHEN o.effect_type = 'github.workflow.dispatch' THEN o.delivery_started_at ELSE v_now END
    FROM chosen
    WHERE o.id = chosen.id
    RETURNING o.*;
END;
$$;

-- +goose StatementEnd

ALTER FUNCTION public.boardreadyops_outbox_claim(text, integer, interval, timestamptz) RESET jit;
ALTER FUNCTION public.boardreadyops_job_claim(text, integer, interval, timestamptz) RESET jit;
ALTER FUNCTION public.boardreadyops_job_complete_batch(bigint[], text, timestamptz) RESET jit;
ALTER FUNCTION public.boardreadyops_outbox_start_delivery_batch(bigint[], text, timestamptz) RESET jit;
