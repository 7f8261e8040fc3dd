-- A rate-limit block that GitHub named no wait for lasts at least its backoff: the jitter only
-- lengthens it (docs/dispatcher.md, "Rate limits and pacing").
--
-- boardreadyops_outbox_block_installation multiplied the backoff (1 minute × 2^level, at most the
-- cap) by 0.9 to 1.1. GitHub asks an integration that meets a secondary rate limit with no
-- retry-after to wait at least a minute; the first block could end after 54 seconds, and the next
-- request, sent early, risked a longer ban. The factor is now 1.0 to 1.2: never shorter than the
-- backoff, up to a fifth longer, which keeps the replicas' and installations' retries spread.
-- Blocks with a time from GitHub (retry-after, x-ratelimit-reset) are unchanged.
--
-- Only a function changes: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_block_installation(p_installation_id bigint, p_until timestamp with time zone, p_backoff interval, p_max_backoff interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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
        RAISE EXCEPTION 'a rate-limit block ends within a day, got %', to_char(p_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') USING ERRCODE = '22023';
    END IF;
    INSERT INTO public.github_installation_limits (installation_id, updated_at) VALUES (p_installation_id, v_now)
    ON CONFLICT (installation_id) DO NOTHING;
    SELECT * INTO r FROM public.github_installation_limits WHERE installation_id = p_installation_id FOR UPDATE;
    v_level := CASE WHEN r.blocked_until IS NULL OR r.blocked_until < v_now - p_max_backoff THEN 0 ELSE r.backoff_level END;
    -- The jitter only lengthens a block (00070): GitHub asks for at least a minute after a
    -- secondary limit that names no wait, so the backoff is a floor, never a mean.
    v_until := coalesce(p_until,
        v_now + least(p_backoff * power(2, v_level), p_max_backoff) * (1.0 + 0.2 * random()));
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_block_installation(p_installation_id bigint, p_until timestamp with time zone, p_backoff interval, p_max_backoff interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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
        RAISE EXCEPTION 'a rate-limit block ends within a day, got %', to_char(p_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') USING ERRCODE = '22023';
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
