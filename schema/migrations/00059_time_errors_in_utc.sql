-- Errors that name a time give it in UTC, the same on every server and session (as 00058 did for
-- recovered leases' last_error).
--
-- Five errors rendered a time with RAISE's '%' or format('%s'), that is with the calling
-- session's DateStyle and TimeZone:
--   * boardreadyops_outbox_start_delivery: "outbox record 7: lease of worker w expired at <time>"
--     (BR001), which a dispatcher logs when its lease ran out before the request;
--   * boardreadyops_job_defer and boardreadyops_outbox_defer: "defer time must be set and at most
--     1 hour (2 hours) ahead, got <time>" (22023);
--   * boardreadyops_outbox_block_installation: "a rate-limit block ends within a day, got <time>"
--     (22023);
--   * boardreadyops_outbox_replay, refusing a dispatch that requires reconciliation (BR004): its
--     detail, "… (delivery started at <time>)", which brops outbox replay prints.
-- A time is now ISO 8601 in UTC with microseconds, "2026-12-06T05:56:04.120000Z", whatever the
-- session's DateStyle and TimeZone (intervals in other messages still follow its IntervalStyle).
-- The error codes, the conditions and everything else are unchanged.
--
-- Only functions replaced: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_defer(p_id bigint, p_worker text, p_until timestamp with time zone, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_jobs;
BEGIN
    IF p_until IS NULL OR p_until > v_now + interval '1 hour' THEN
        RAISE EXCEPTION 'defer time must be set and at most 1 hour ahead, got %', to_char(p_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') USING ERRCODE = '22023';
    END IF;
    r := public.boardreadyops_job_lock_leased(p_id, p_worker);
    UPDATE public.control_plane_jobs
    SET status = 'available', available_at = greatest(p_until, v_now), attempts = greatest(r.attempts - 1, 0),
        lease_owner = NULL, lease_expires_at = NULL, last_error = left(coalesce(p_reason, 'deferred'), 4096),
        updated_at = v_now
    WHERE id = p_id;
END;
$$;
-- +goose StatementEnd

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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_defer(p_id bigint, p_worker text, p_until timestamp with time zone, p_reason text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    IF p_until IS NULL OR p_until > v_now + interval '2 hours' THEN
        RAISE EXCEPTION 'defer time must be set and at most 2 hours ahead, got %', to_char(p_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') USING ERRCODE = '22023';
    END IF;
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    IF public.boardreadyops_outbox_supersede_check_run_update(r, coalesce(p_reason, 'deferred'), v_now) THEN
        RETURN;
    END IF;
    UPDATE public.control_plane_outbox
    SET status = 'available', available_at = greatest(p_until, v_now),
        attempts = greatest(r.attempts - 1, 0),
        lease_owner = NULL, lease_expires_at = NULL, delivery_started_at = NULL,
        last_error = left(coalesce(p_reason, 'deferred'), 4096), updated_at = v_now
    WHERE id = p_id;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_start_delivery(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    IF r.lease_expires_at <= v_now THEN
        RAISE EXCEPTION 'outbox record %: lease of worker % expired at %', p_id, p_worker, to_char(r.lease_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
            USING ERRCODE = 'BR001';
    END IF;
    UPDATE public.control_plane_outbox
    SET delivery_started_at = coalesce(delivery_started_at, v_now), updated_at = v_now
    WHERE id = p_id
    RETURNING delivery_started_at INTO r.delivery_started_at;
    RETURN r.delivery_started_at;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_replay(p_id bigint, p_operator text, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS public.control_plane_outbox
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'replay needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'replay needs a reason' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO r FROM public.control_plane_outbox WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'outbox record % does not exist', p_id USING ERRCODE = 'BR006';
    END IF;
    IF r.status = 'reconciliation_required' THEN
        RAISE EXCEPTION 'outbox record % requires reconciliation and cannot be replayed', p_id
            USING ERRCODE = 'BR004',
                  DETAIL = format('GitHub may already have created a workflow run for this dispatch (delivery started at %s)',
                                  to_char(r.delivery_started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')),
                  HINT = 'find out whether the run exists (brops reconcile inspect), then resolve the record '
                         '(brops reconcile resolve) with the evidence';
    END IF;
    IF r.status <> 'dead_letter' THEN
        RAISE EXCEPTION 'outbox record % is %, only dead letters can be replayed', p_id, r.status
            USING ERRCODE = 'BR003';
    END IF;
    INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'outbox.replay', 'outbox', p_id, p_reason,
            jsonb_build_object('last_error', r.last_error, 'attempts', r.attempts), r.status, 'available');
    UPDATE public.control_plane_outbox
    SET status = 'available', available_at = v_now, attempts = 0, delivery_started_at = NULL, updated_at = v_now
    WHERE public.control_plane_outbox.id = p_id
    RETURNING * INTO r;
    PERFORM public.boardreadyops_release_run_unblock(r, p_operator, v_now);
    PERFORM pg_notify('boardreadyops_outbox', '');
    RETURN r;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_defer(p_id bigint, p_worker text, p_until timestamp with time zone, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_jobs;
BEGIN
    IF p_until IS NULL OR p_until > v_now + interval '1 hour' THEN
        RAISE EXCEPTION 'defer time must be set and at most 1 hour ahead, got %', p_until USING ERRCODE = '22023';
    END IF;
    r := public.boardreadyops_job_lock_leased(p_id, p_worker);
    UPDATE public.control_plane_jobs
    SET status = 'available', available_at = greatest(p_until, v_now), attempts = greatest(r.attempts - 1, 0),
        lease_owner = NULL, lease_expires_at = NULL, last_error = left(coalesce(p_reason, 'deferred'), 4096),
        updated_at = v_now
    WHERE id = p_id;
END;
$$;
-- +goose StatementEnd

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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_defer(p_id bigint, p_worker text, p_until timestamp with time zone, p_reason text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    IF p_until IS NULL OR p_until > v_now + interval '2 hours' THEN
        RAISE EXCEPTION 'defer time must be set and at most 2 hours ahead, got %', p_until USING ERRCODE = '22023';
    END IF;
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    IF public.boardreadyops_outbox_supersede_check_run_update(r, coalesce(p_reason, 'deferred'), v_now) THEN
        RETURN;
    END IF;
    UPDATE public.control_plane_outbox
    SET status = 'available', available_at = greatest(p_until, v_now),
        attempts = greatest(r.attempts - 1, 0),
        lease_owner = NULL, lease_expires_at = NULL, delivery_started_at = NULL,
        last_error = left(coalesce(p_reason, 'deferred'), 4096), updated_at = v_now
    WHERE id = p_id;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_start_delivery(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    IF r.lease_expires_at <= v_now THEN
        RAISE EXCEPTION 'outbox record %: lease of worker % expired at %', p_id, p_worker, r.lease_expires_at
            USING ERRCODE = 'BR001';
    END IF;
    UPDATE public.control_plane_outbox
    SET delivery_started_at = coalesce(delivery_started_at, v_now), updated_at = v_now
    WHERE id = p_id
    RETURNING delivery_started_at INTO r.delivery_started_at;
    RETURN r.delivery_started_at;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_replay(p_id bigint, p_operator text, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS public.control_plane_outbox
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'replay needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'replay needs a reason' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO r FROM public.control_plane_outbox WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'outbox record % does not exist', p_id USING ERRCODE = 'BR006';
    END IF;
    IF r.status = 'reconciliation_required' THEN
        RAISE EXCEPTION 'outbox record % requires reconciliation and cannot be replayed', p_id
            USING ERRCODE = 'BR004',
                  DETAIL = format('GitHub may already have created a workflow run for this dispatch (delivery started at %s)',
                                  r.delivery_started_at),
                  HINT = 'find out whether the run exists (brops reconcile inspect), then resolve the record '
                         '(brops reconcile resolve) with the evidence';
    END IF;
    IF r.status <> 'dead_letter' THEN
        RAISE EXCEPTION 'outbox record % is %, only dead letters can be replayed', p_id, r.status
            USING ERRCODE = 'BR003';
    END IF;
    INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'outbox.replay', 'outbox', p_id, p_reason,
            jsonb_build_object('last_error', r.last_error, 'attempts', r.attempts), r.status, 'available');
    UPDATE public.control_plane_outbox
    SET status = 'available', available_at = v_now, attempts = 0, delivery_started_at = NULL, updated_at = v_now
    WHERE public.control_plane_outbox.id = p_id
    RETURNING * INTO r;
    PERFORM public.boardreadyops_release_run_unblock(r, p_operator, v_now);
    PERFORM pg_notify('boardreadyops_outbox', '');
    RETURN r;
END;
$$;
-- +goose StatementEnd
