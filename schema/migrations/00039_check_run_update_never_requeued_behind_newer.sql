-- A check-run update that a newer one replaced never goes back to the queue (docs/dispatcher.md,
-- "Order is what matters").
--
-- Each github.check_run.complete sets the whole state of the run's check run, so the newest must
-- be the last one GitHub sees. A new update supersedes the run's updates not sent yet
-- (`available`), and a retry of an update that a newer one replaced completes it as superseded
-- (00021). Three other ways back to the queue kept the older update and sent it after the newer:
--
--   * lease recovery: a dispatcher dies (or a restore brings back a lease of the old deployment)
--     while it holds an update; the run moves on and its newer update is delivered; the expired
--     lease is recovered to `available` and the older state is sent last. The check run goes back
--     to "in progress" on a finished release for good (TestPointInTimeRestore caught one);
--   * defer: an update deferred by a rate limit after a newer one was enqueued;
--   * release: an update handed back after a newer one was enqueued.
--
-- Each now completes the older update as superseded (`superseded_by` the newest, `result`
-- {"resolution": "superseded"}), as the retry does. boardreadyops_outbox_newer_check_run_update
-- finds the newest update of the run after a given one through control_plane_outbox_effect_key
-- (release_run_id, effect_type, …): the run's few updates, never a scan.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_newer_check_run_update(p_id bigint, p_release_run_id uuid) RETURNS bigint
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT max(n.id) FROM public.control_plane_outbox n
    WHERE n.release_run_id = p_release_run_id AND n.effect_type = 'github.check_run.complete' AND n.id > p_id
$$;
-- +goose StatementEnd
ALTER FUNCTION public.boardreadyops_outbox_newer_check_run_update(bigint, uuid) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_outbox_newer_check_run_update(bigint, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_newer_check_run_update(bigint, uuid) TO boardreadyops_admin;

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_supersede_check_run_update(r public.control_plane_outbox, p_reason text, p_now timestamp with time zone) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_newer bigint;
BEGIN
    IF r.effect_type <> 'github.check_run.complete' THEN
        RETURN false;
    END IF;
    v_newer := public.boardreadyops_outbox_newer_check_run_update(r.id, r.release_run_id);
    IF v_newer IS NULL THEN
        RETURN false;
    END IF;
    UPDATE public.control_plane_outbox o
    SET status = 'completed', completed_at = p_now, lease_owner = NULL, lease_expires_at = NULL,
        superseded_by = v_newer, result = jsonb_build_object('resolution', 'superseded', 'superseded_by', v_newer),
        last_error = left(format('%s; superseded by the newer check-run update %s, not sent again', p_reason, v_newer), 4096),
        updated_at = p_now
    WHERE o.id = r.id;
    RETURN true;
END;
$$;
-- +goose StatementEnd
ALTER FUNCTION public.boardreadyops_outbox_supersede_check_run_update(public.control_plane_outbox, text, timestamptz) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_outbox_supersede_check_run_update(public.control_plane_outbox, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_supersede_check_run_update(public.control_plane_outbox, text, timestamptz) TO boardreadyops_admin;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_recover_leases(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, p_limit integer DEFAULT 1000) RETURNS TABLE(id bigint, effect_type text, previous_owner text, status text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    rec record;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'recovery limit must be between 1 and 10000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    FOR rec IN
    WITH locked AS (
        SELECT o.id, o.lease_owner,
               CASE WHEN o.effect_type = 'github.check_run.complete'
                    THEN public.boardreadyops_outbox_newer_check_run_update(o.id, o.release_run_id) END AS newer
        FROM public.control_plane_outbox o
        WHERE o.status = 'leased' AND o.lease_expires_at <= v_now
        ORDER BY o.lease_expires_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ), expired AS (
        SELECT l.id, l.lease_owner, l.newer,
               CASE
                   WHEN o.effect_type = 'github.workflow.dispatch' AND o.delivery_started_at IS NOT NULL
                       THEN 'reconciliation_required'
                   -- A newer update of the run's check run exists: sending this one would undo it.
                   WHEN l.newer IS NOT NULL THEN 'completed'
                   WHEN o.attempts >= o.max_attempts THEN 'dead_letter'
                   ELSE 'available'
               END AS next_status
        FROM locked l JOIN public.control_plane_outbox o ON o.id = l.id
    )
    UPDATE public.control_plane_outbox o
    SET status = e.next_status,
        available_at = CASE WHEN e.next_status = 'available' THEN v_now ELSE o.available_at END,
        delivery_started_at = CASE WHEN e.next_status IN ('reconciliation_required', 'completed') THEN o.delivery_started_at END,
        completed_at = CASE WHEN e.next_status = 'completed' THEN v_now ELSE o.completed_at END,
        superseded_by = CASE WHEN e.next_status = 'completed' THEN e.newer ELSE o.superseded_by END,
        result = CASE WHEN e.next_status = 'completed'
                      THEN jsonb_build_object('resolution', 'superseded', 'superseded_by', e.newer) ELSE o.result END,
        lease_owner = NULL, lease_expires_at = NULL,
        last_error = left(format('lease of worker %s expired at %s%s; %s',
                                 e.lease_owner, o.lease_expires_at,
                                 CASE WHEN o.delivery_started_at IS NOT NULL
                                      THEN format(' after delivery started at %s', o.delivery_started_at) ELSE '' END,
                                 CASE e.next_status
                                      WHEN 'reconciliation_required' THEN 'the dispatch may have reached GitHub'
                                      WHEN 'completed' THEN format('superseded by the newer check-run update %s, not sent again', e.newer)
                                      WHEN 'dead_letter' THEN format('attempts exhausted (%s of %s)', o.attempts, o.max_attempts)
                                      ELSE 'returned to the queue' END), 4096),
        updated_at = v_now
    FROM expired e
    WHERE o.id = e.id
    RETURNING o.id, o.effect_type, e.lease_owner AS previous_owner, o.status
    LOOP
        IF rec.status IN ('dead_letter', 'reconciliation_required') THEN
            PERFORM public.boardreadyops_release_run_block(rec.id, v_now);
        END IF;
        id := rec.id; effect_type := rec.effect_type; previous_owner := rec.previous_owner; status := rec.status;
        RETURN NEXT;
    END LOOP;
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
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_release(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    IF r.effect_type = 'github.workflow.dispatch' AND r.delivery_started_at IS NOT NULL THEN
        RAISE EXCEPTION 'outbox record %: a workflow dispatch whose delivery started cannot be released', p_id
            USING ERRCODE = 'BR003', HINT = 'complete it, or require reconciliation';
    END IF;
    IF public.boardreadyops_outbox_supersede_check_run_update(r, 'released by worker ' || p_worker, v_now) THEN
        RETURN;
    END IF;
    UPDATE public.control_plane_outbox
    SET status = 'available', available_at = v_now, attempts = greatest(r.attempts - 1, 0),
        lease_owner = NULL, lease_expires_at = NULL, delivery_started_at = NULL, updated_at = v_now
    WHERE id = p_id;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_recover_leases(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, p_limit integer DEFAULT 1000) RETURNS TABLE(id bigint, effect_type text, previous_owner text, status text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    rec record;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'recovery limit must be between 1 and 10000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    FOR rec IN
    WITH expired AS (
        SELECT o.id, o.lease_owner,
               CASE
                   WHEN o.effect_type = 'github.workflow.dispatch' AND o.delivery_started_at IS NOT NULL
                       THEN 'reconciliation_required'
                   WHEN o.attempts >= o.max_attempts THEN 'dead_letter'
                   ELSE 'available'
               END AS next_status
        FROM public.control_plane_outbox o
        WHERE o.status = 'leased' AND o.lease_expires_at <= v_now
        ORDER BY o.lease_expires_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE public.control_plane_outbox o
    SET status = e.next_status,
        available_at = CASE WHEN e.next_status = 'available' THEN v_now ELSE o.available_at END,
        delivery_started_at = CASE WHEN e.next_status = 'reconciliation_required' THEN o.delivery_started_at END,
        lease_owner = NULL, lease_expires_at = NULL,
        last_error = left(format('lease of worker %s expired at %s%s; %s',
                                 e.lease_owner, o.lease_expires_at,
                                 CASE WHEN o.delivery_started_at IS NOT NULL
                                      THEN format(' after delivery started at %s', o.delivery_started_at) ELSE '' END,
                                 CASE e.next_status
                                      WHEN 'reconciliation_required' THEN 'the dispatch may have reached GitHub'
                                      WHEN 'dead_letter' THEN format('attempts exhausted (%s of %s)', o.attempts, o.max_attempts)
                                      ELSE 'returned to the queue' END), 4096),
        updated_at = v_now
    FROM expired e
    WHERE o.id = e.id
    RETURNING o.id, o.effect_type, e.lease_owner AS previous_owner, o.status
    LOOP
        IF rec.status IN ('dead_letter', 'reconciliation_required') THEN
            PERFORM public.boardreadyops_release_run_block(rec.id, v_now);
        END IF;
        id := rec.id; effect_type := rec.effect_type; previous_owner := rec.previous_owner; status := rec.status;
        RETURN NEXT;
    END LOOP;
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
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_release(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    IF r.effect_type = 'github.workflow.dispatch' AND r.delivery_started_at IS NOT NULL THEN
        RAISE EXCEPTION 'outbox record %: a workflow dispatch whose delivery started cannot be released', p_id
            USING ERRCODE = 'BR003', HINT = 'complete it, or require reconciliation';
    END IF;
    UPDATE public.control_plane_outbox
    SET status = 'available', available_at = v_now, attempts = greatest(r.attempts - 1, 0),
        lease_owner = NULL, lease_expires_at = NULL, delivery_started_at = NULL, updated_at = v_now
    WHERE id = p_id;
END;
$$;
-- +goose StatementEnd

DROP FUNCTION public.boardreadyops_outbox_supersede_check_run_update(public.control_plane_outbox, text, timestamptz);
DROP FUNCTION public.boardreadyops_outbox_newer_check_run_update(bigint, uuid);
