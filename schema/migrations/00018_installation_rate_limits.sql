-- GitHub's rate limits, shared by every dispatcher replica (issue 21, docs/dispatcher.md "Rate
-- limits and pacing"). One row per installation holds:
--   * the block: blocked_until, set when GitHub rate-limited a request of the installation (its
--     retry-after, its reset when no budget is left, else an exponential backoff from a minute
--     whose level is backoff_level); every replica's claim skips a blocked installation's effects;
--   * the pace: in_flight (deliveries claimed and not yet released, counted only until
--     in_flight_expires_at, the lease of the claim that last raised it, so a replica that died
--     cannot hold an installation forever) and next_allowed_at (no claim before it: the claim and
--     the release after each delivery advance it by the mutation interval), so that one
--     installation gets at most p_per_installation requests at once and its mutations at least
--     the interval apart, across replicas;
--   * the last primary budget GitHub reported (x-ratelimit-limit, -remaining, -reset), for the
--     aggregate gauges.
-- The row is written by the paced claim (when it takes one of the installation's effects) and by
-- the functions below; nothing else. Updates touch no indexed column, so they are HOT.
--
-- boardreadyops_outbox_claim keeps its signature (the deprecated name of 00014 wraps it, and pods
-- of the previous release call it during a roll) and now skips blocked installations; the paced
-- claim is boardreadyops_outbox_claim_paced, which the dispatcher calls, always followed by a
-- release of each effect it returned.

-- +goose Up
CREATE TABLE public.github_installation_limits (
    installation_id      bigint PRIMARY KEY CHECK (installation_id > 0),
    blocked_until        timestamptz,
    backoff_level        integer NOT NULL DEFAULT 0 CHECK (backoff_level BETWEEN 0 AND 20),
    in_flight            integer NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
    in_flight_expires_at timestamptz,
    next_allowed_at      timestamptz,
    budget_limit         integer CHECK (budget_limit >= 0),
    budget_remaining     integer CHECK (budget_remaining >= 0),
    budget_reset_at      timestamptz,
    updated_at           timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 70);
ALTER TABLE public.github_installation_limits OWNER TO boardreadyops_schema_owner;

-- Claim up to p_limit due effects for p_worker; each claim spends one attempt. Effects of an
-- installation blocked by a rate limit are never returned: they stay where they are, no attempt
-- spent (00016's body otherwise).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_claim(
    p_worker text, p_limit integer, p_lease interval, p_now timestamptz DEFAULT NULL)
RETURNS SETOF public.control_plane_outbox
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
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
        SELECT o.id FROM public.control_plane_outbox o
        WHERE o.status = 'available' AND o.available_at <= v_now
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

-- The claim, paced per installation: as boardreadyops_outbox_claim (blocked installations
-- skipped), and an installation is also skipped while it has p_per_installation deliveries in
-- flight or its next_allowed_at is ahead; from one that is free,
-- the claim takes as many as it has room for — one when p_mutation_interval is set, since the
-- next one may not be sent before the interval — and counts them in flight. The installation's
-- row is locked FOR UPDATE SKIP LOCKED, so concurrent claims never both take the same
-- installation's last free slot: a claim finding it locked skips the installation.
--
-- Candidates are the oldest due effects (at most 4 × p_limit, at most 4,000) whose installation
-- was not held back when the statement began; an installation with a long backlog yields one
-- effect per claim and is skipped by the next claims until it is released, so it delays others
-- by at most one claim.
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_claim_paced(
    p_worker text, p_limit integer, p_lease interval, p_per_installation integer, p_mutation_interval interval,
    p_now timestamptz DEFAULT NULL)
RETURNS SETOF public.control_plane_outbox
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
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

    SELECT array_agg(c.id ORDER BY c.available_at, c.id), array_agg(c.installation_id ORDER BY c.available_at, c.id)
    INTO v_ids, v_installations
    FROM (
        SELECT o.id, o.installation_id, o.available_at FROM public.control_plane_outbox o
        WHERE o.status = 'available' AND o.available_at <= v_now
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
    WITH gate AS (
        SELECT l.installation_id,
               p_per_installation - CASE WHEN l.in_flight_expires_at > v_now THEN l.in_flight ELSE 0 END AS room
        FROM public.github_installation_limits l
        WHERE l.installation_id = ANY (v_distinct)
          AND (l.blocked_until IS NULL OR l.blocked_until <= v_now)
          AND (l.next_allowed_at IS NULL OR l.next_allowed_at <= v_now)
          AND (l.in_flight < p_per_installation OR l.in_flight_expires_at IS NULL OR l.in_flight_expires_at <= v_now)
        FOR UPDATE SKIP LOCKED
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

-- Deliveries of the given installations ended (one id per delivery, repeated for several): each
-- frees its in-flight slot, and the installation's next claim waits p_mutation_interval from
-- now — from the end of the request, so across replicas two mutations are never closer than
-- the interval, however long the first took or however late it was sent. An installation's
-- deliveries are in flight on one replica at a time, so two releases hardly ever share rows (if
-- they do and deadlock, PostgreSQL fails one and the group commit runs it alone). Returns the
-- installations released.
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_release_installation_batch(
    p_installation_ids bigint[], p_mutation_interval interval, p_now timestamptz DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    v_id  bigint;
    v_n   integer;
BEGIN
    IF p_installation_ids IS NULL OR cardinality(p_installation_ids) > 10000 THEN
        RAISE EXCEPTION 'between 0 and 10000 installation ids per call' USING ERRCODE = '22023';
    END IF;
    IF p_mutation_interval IS NULL OR p_mutation_interval < interval '0' OR p_mutation_interval > interval '1 minute' THEN
        RAISE EXCEPTION 'mutation interval must be between 0 and 1 minute, got %', p_mutation_interval USING ERRCODE = '22023';
    END IF;
    -- One keyed update per installation, in key order: a set-based join was planned as a scan
    -- of the whole table once it held a few thousand installations.
    FOR v_id, v_n IN SELECT i, count(*)::integer FROM unnest(p_installation_ids) i GROUP BY i ORDER BY i LOOP
        UPDATE public.github_installation_limits l
        SET in_flight = greatest(CASE WHEN l.in_flight_expires_at > v_now THEN l.in_flight ELSE 0 END - v_n, 0),
            next_allowed_at = CASE WHEN p_mutation_interval > interval '0'
                                   THEN greatest(l.next_allowed_at, v_now + p_mutation_interval) ELSE l.next_allowed_at END,
            updated_at = v_now
        WHERE l.installation_id = v_id;
        IF FOUND THEN
            RETURN NEXT v_id;
        END IF;
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- GitHub rate-limited a request of the installation: block it, for every replica, until
-- p_until (retry-after, or the reset when no budget is left) or, when GitHub named no time
-- (p_until NULL), for an exponential backoff: p_backoff × 2^level, at most p_max_backoff, with
-- ±10 % jitter; the level grows with each limit and starts again from 0 once the installation
-- went p_max_backoff without one. A block never shortens an existing one. The installation's
-- available effects are moved to the block's end, so that claims do not even read them while
-- it lasts (effects enqueued meanwhile are skipped by the claim). Returns the block's end.
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_block_installation(
    p_installation_id bigint, p_until timestamptz, p_backoff interval, p_max_backoff interval,
    p_now timestamptz DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now   timestamptz := public.boardreadyops_clock_now(p_now);
    r       public.github_installation_limits;
    v_level integer;
    v_until timestamptz;
BEGIN
    IF p_installation_id IS NULL OR p_installation_id <= 0 THEN
        RAISE EXCEPTION 'installation id must be positive' USING ERRCODE = '22023';
    END IF;
    IF p_backoff IS NULL OR p_max_backoff IS NULL OR p_backoff < interval '1 millisecond' OR p_max_backoff < p_backoff
       OR p_max_backoff > interval '1 day' THEN
        RAISE EXCEPTION 'backoff must be positive and at most its cap (at most a day), got % and %', p_backoff, p_max_backoff
            USING ERRCODE = '22023';
    END IF;
    IF p_until IS NOT NULL AND p_until > v_now + interval '1 day' THEN
        RAISE EXCEPTION 'a rate-limit block ends within a day, got %', p_until USING ERRCODE = '22023';
    END IF;
    INSERT INTO public.github_installation_limits (installation_id, updated_at) VALUES (p_installation_id, v_now)
    ON CONFLICT (installation_id) DO NOTHING;
    SELECT * INTO r FROM public.github_installation_limits WHERE installation_id = p_installation_id FOR UPDATE;
    v_level := CASE WHEN r.blocked_until IS NULL OR r.blocked_until < v_now - p_max_backoff THEN 0 ELSE r.backoff_level END;
    v_until := coalesce(p_until,
        v_now + least(p_backoff * power(2, v_level), p_max_backoff) * (0.9 + 0.2 * random()));
    v_until := greatest(v_until, r.blocked_until);
    UPDATE public.github_installation_limits
    SET blocked_until = v_until, backoff_level = least(v_level + 1, 20), updated_at = v_now
    WHERE installation_id = p_installation_id;
    UPDATE public.control_plane_outbox
    SET available_at = v_until, updated_at = v_now
    WHERE status = 'available' AND installation_id = p_installation_id AND available_at < v_until;
    RETURN v_until;
END;
$$;
-- +goose StatementEnd

-- The primary budgets GitHub last reported, one per installation (arrays of equal length). An
-- installation with no budget left is blocked until its reset, for every replica, before a
-- request is refused. Rows are locked in key order. Returns the installations recorded.
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_record_budget_batch(
    p_installation_ids bigint[], p_limits integer[], p_remaining integer[], p_resets timestamptz[],
    p_now timestamptz DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_installation_ids IS NULL OR cardinality(p_installation_ids) > 10000
       OR cardinality(p_limits) IS DISTINCT FROM cardinality(p_installation_ids)
       OR cardinality(p_remaining) IS DISTINCT FROM cardinality(p_installation_ids)
       OR cardinality(p_resets) IS DISTINCT FROM cardinality(p_installation_ids) THEN
        RAISE EXCEPTION 'up to 10000 budgets per call, one limit, remaining and reset each' USING ERRCODE = '22023';
    END IF;
    INSERT INTO public.github_installation_limits (installation_id, updated_at)
    SELECT DISTINCT i, v_now FROM unnest(p_installation_ids) i
    WHERE i > 0 AND NOT EXISTS (SELECT 1 FROM public.github_installation_limits l WHERE l.installation_id = i)
    ORDER BY i
    ON CONFLICT (installation_id) DO NOTHING;
    RETURN QUERY
    WITH b AS (
        SELECT DISTINCT ON (x.id) x.id, x.lim, x.rem, x.reset
        FROM unnest(p_installation_ids, p_limits, p_remaining, p_resets) AS x(id, lim, rem, reset)
        WHERE x.id > 0 AND x.lim >= 0 AND x.rem >= 0
        ORDER BY x.id, x.reset DESC NULLS LAST, x.rem
    ), locked AS (
        SELECT l.installation_id FROM public.github_installation_limits l
        WHERE l.installation_id IN (SELECT id FROM b)
        ORDER BY l.installation_id
        FOR UPDATE
    )
    UPDATE public.github_installation_limits l
    SET budget_limit = b.lim, budget_remaining = b.rem, budget_reset_at = b.reset,
        blocked_until = CASE WHEN b.rem = 0 AND b.reset > v_now AND b.reset <= v_now + interval '2 hours'
                             THEN greatest(l.blocked_until, b.reset) ELSE l.blocked_until END,
        updated_at = v_now
    FROM b, locked
    WHERE l.installation_id = b.id AND locked.installation_id = b.id
    RETURNING l.installation_id;
END;
$$;
-- +goose StatementEnd

-- Aggregate rate-limit figures for the gauges (no installation is named): the lowest remaining
-- fraction of a primary budget whose window has not reset yet (NULL when none is known), the
-- installations blocked now, and those held back by pacing now (deliveries in flight at the
-- limit, or next_allowed_at ahead).
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_limit_stats(
    p_per_installation integer, p_now timestamptz DEFAULT NULL)
RETURNS TABLE (lowest_remaining_fraction double precision, blocked bigint, paced bigint)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT min(l.budget_remaining::double precision / nullif(l.budget_limit, 0))
               FILTER (WHERE l.budget_reset_at > public.boardreadyops_clock_now(p_now)),
           count(*) FILTER (WHERE l.blocked_until > public.boardreadyops_clock_now(p_now)),
           count(*) FILTER (WHERE (l.blocked_until IS NULL OR l.blocked_until <= public.boardreadyops_clock_now(p_now))
                              AND (l.next_allowed_at > public.boardreadyops_clock_now(p_now)
                                   OR (l.in_flight >= coalesce(p_per_installation, 1)
                                       AND l.in_flight_expires_at > public.boardreadyops_clock_now(p_now))))
    FROM public.github_installation_limits l;
$$;
-- +goose StatementEnd

ALTER FUNCTION public.boardreadyops_outbox_claim_paced(text, integer, interval, integer, interval, timestamptz) OWNER TO boardreadyops_schema_owner;
ALTER FUNCTION public.boardreadyops_outbox_release_installation_batch(bigint[], interval, timestamptz) OWNER TO boardreadyops_schema_owner;
ALTER FUNCTION public.boardreadyops_outbox_block_installation(bigint, timestamptz, interval, interval, timestamptz) OWNER TO boardreadyops_schema_owner;
ALTER FUNCTION public.boardreadyops_outbox_record_budget_batch(bigint[], integer[], integer[], timestamptz[], timestamptz) OWNER TO boardreadyops_schema_owner;
ALTER FUNCTION public.boardreadyops_outbox_limit_stats(integer, timestamptz) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION
    public.boardreadyops_outbox_claim_paced(text, integer, interval, integer, interval, timestamptz),
    public.boardreadyops_outbox_release_installation_batch(bigint[], interval, timestamptz),
    public.boardreadyops_outbox_block_installation(bigint, timestamptz, interval, interval, timestamptz),
    public.boardreadyops_outbox_record_budget_batch(bigint[], integer[], integer[], timestamptz[], timestamptz),
    public.boardreadyops_outbox_limit_stats(integer, timestamptz)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    public.boardreadyops_outbox_claim_paced(text, integer, interval, integer, interval, timestamptz),
    public.boardreadyops_outbox_release_installation_batch(bigint[], interval, timestamptz),
    public.boardreadyops_outbox_block_installation(bigint, timestamptz, interval, interval, timestamptz),
    public.boardreadyops_outbox_record_budget_batch(bigint[], integer[], integer[], timestamptz[], timestamptz),
    public.boardreadyops_outbox_limit_stats(integer, timestamptz)
TO boardreadyops_dispatcher, boardreadyops_admin;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_limit_stats(integer, timestamptz) TO boardreadyops_operator;
GRANT SELECT, INSERT, UPDATE, DELETE ON public.github_installation_limits TO boardreadyops_admin;

-- +goose Down
DROP FUNCTION public.boardreadyops_outbox_limit_stats(integer, timestamptz);
DROP FUNCTION public.boardreadyops_outbox_record_budget_batch(bigint[], integer[], integer[], timestamptz[], timestamptz);
DROP FUNCTION public.boardreadyops_outbox_block_installation(bigint, timestamptz, interval, interval, timestamptz);
DROP FUNCTION public.boardreadyops_outbox_release_installation_batch(bigint[], interval, timestamptz);
DROP FUNCTION public.boardreadyops_outbox_claim_paced(text, integer, interval, integer, interval, timestamptz);
-- 00016's claim, verbatim.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_claim(p_worker text, p_limit integer, p_lease interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF control_plane_outbox
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
        SELECT o.id FROM public.control_plane_outbox o
        WHERE o.status = 'available' AND o.available_at <= v_now
        ORDER BY o.available_at, o.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE public.control_plane_outbox o
    SET status = 'leased', lease_owner = p_worker, lease_expires_at = v_now + p_lease,
        attempts = o.attempts + 1, updated_at = v_now,
        delivery_started_at = CASE WHEN o.effect_type = 'github.workflow.dispatch' THEN o.delivery_started_at ELSE v_now END
    FROM due
    WHERE o.id = due.id
    RETURNING o.*;
END;
$function$;
-- +goose StatementEnd
DROP TABLE public.github_installation_limits;
