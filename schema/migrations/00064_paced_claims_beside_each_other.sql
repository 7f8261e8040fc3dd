-- Paced claims of several replicas no longer wait for each other, nor come back empty beside one
-- another (docs/dispatcher.md, "Rate limits and pacing").
--
-- boardreadyops_outbox_claim_paced is the dispatcher's claim at its default settings. Two things
-- made the claims of replicas that share a backlog serialize or miss:
--
-- 1. It creates the pacing row of an installation it has not seen with INSERT … ON CONFLICT DO
--    NOTHING over every candidate installation. ON CONFLICT's arbiter check reads the conflicting
--    row with a dirty snapshot and, when an open transaction has updated it, waits for that
--    transaction to end, though it then does nothing. Every claim updates the rows of the
--    installations it claims, every release batch those it releases, every budget record those
--    it records; so a claim waited for another replica's claim to commit (its WAL flush
--    included), or for a whole release batch, whenever one of their installations had another
--    effect among its candidates. Now it first reads which of them have a row (a primary-key probe
--    each, as the insertion's check was) and inserts only the others, when there are any: a known
--    installation waits for nothing. A row another claim is creating at the same moment is still
--    waited for, in key order.
-- 2. Its gate locked, with SKIP LOCKED, the rows of the first p_limit candidate installations
--    (00034). Replicas read the same oldest candidates, so a claim beside another found those rows
--    locked and came back with nothing while the queue was full (hack/bench/pacedclaims.sh: four
--    clients claiming 8 at a time, back to back, at the default pace: 1,608 to 1,624 of 2,400
--    claims empty in three rounds). Now the limit counts the rows that pass the gate: it locks the
--    rows in the order of their oldest candidate, skips those another claim holds, and stops when
--    p_limit have passed (99 to 108 of 2,400 empty, nearly all the rest full). The plan probes the
--    primary key in that order and stops there. A row that another replica's claim changed and
--    committed after this statement's snapshot is locked at its newest version, rechecked, and,
--    when it no longer passes, skipped but left locked until this claim commits: in that race more
--    than p_limit rows can be held for the length of the claim (before, at most p_limit); nothing
--    waits on them but a release, budget record or block of that installation, for that long.
--
-- The pacing is unchanged: a row is claimed from only under its lock, rechecked against its latest
-- version. The missing rows are inserted in key order whatever the plan. Only a function
-- definition changes: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_claim_paced(p_worker text, p_limit integer, p_lease interval, p_per_installation integer, p_mutation_interval interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF public.control_plane_outbox
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET enable_sort TO 'off'
 SET jit TO 'off'
 SET enable_material TO 'off'
 SET max_parallel_workers_per_gather TO '0'
AS $$
DECLARE
    -- Workflow dispatches paused (brops dispatch pause): everywhere, or of these installations.
    v_paused_all    boolean;
    v_paused        bigint[];
    v_now           timestamptz := public.boardreadyops_clock_now(p_now);
    v_ids           bigint[];
    v_installations bigint[];
    v_distinct      bigint[];
    v_order         bigint[];
    v_missing       bigint[];
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
    -- the same rows wait for each other instead of deadlocking). Only the installations found
    -- without one are inserted, and they are found by primary key (a generic plan of an anti-join
    -- could hash the whole table): ON CONFLICT's check waits for any open transaction that updated
    -- the conflicting row, so inserting every candidate installation made a claim wait for
    -- another replica's claim or a release batch to commit (00064).
    v_missing := ARRAY(
        SELECT d.i FROM unnest(v_distinct) AS d(i)
        EXCEPT
        SELECT l.installation_id FROM public.github_installation_limits l WHERE l.installation_id = ANY (v_distinct)
        ORDER BY 1);
    IF cardinality(v_missing) > 0 THEN
        INSERT INTO public.github_installation_limits (installation_id, updated_at)
        SELECT m.i, v_now FROM unnest(v_missing) WITH ORDINALITY AS m(i, ord)
        ORDER BY m.ord
        ON CONFLICT (installation_id) DO NOTHING;
    END IF;
    -- Each candidate installation once, in the order of its oldest candidate.
    v_order := ARRAY(
        SELECT c.installation_id FROM unnest(v_installations) WITH ORDINALITY AS c(installation_id, ord)
        GROUP BY c.installation_id
        ORDER BY min(c.ord));

    RETURN QUERY
    WITH gate AS (
        -- The first p_limit candidate installations, in the order of their oldest candidate, whose
        -- rows pass the gate and are not locked by another claim: a claim takes at most p_limit
        -- effects, and every installation that passes gives at least one, so no more are needed
        -- (00034). The limit counts rows that passed, so a claim running beside another passes
        -- over the installations that one holds to the next ones (00064), instead of coming back
        -- with nothing while the queue is full. (A row that fails its recheck against a version
        -- committed since the snapshot stays locked, uncounted, until the claim commits.)
        SELECT l.installation_id,
               p_per_installation - CASE WHEN l.in_flight_expires_at > v_now THEN l.in_flight ELSE 0 END AS room
        FROM unnest(v_order) WITH ORDINALITY AS f(installation_id, ord)
        -- Rows found by primary key, here and below: a generic plan cannot know these sets are
        -- small, and may hash what it joins them to.
        JOIN public.github_installation_limits l ON l.installation_id = f.installation_id
        WHERE (l.blocked_until IS NULL OR l.blocked_until <= v_now)
          AND (l.next_allowed_at IS NULL OR l.next_allowed_at <= v_now)
          AND (l.in_flight < p_per_installation OR l.in_flight_expires_at IS NULL OR l.in_flight_expires_at <= v_now)
        ORDER BY f.ord
        LIMIT p_limit
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_claim_paced(p_worker text, p_limit integer, p_lease interval, p_per_installation integer, p_mutation_interval interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF public.control_plane_outbox
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET enable_sort TO 'off'
 SET jit TO 'off'
 SET enable_material TO 'off'
 SET max_parallel_workers_per_gather TO '0'
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
