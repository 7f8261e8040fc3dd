-- A check run's creation is not made twice when its worker's lease expires while GitHub is still
-- making it (docs/dispatcher.md, "Leases").
--
-- Lease recovery returned an expired check-run creation to the queue at once, and the next worker
-- searched the commit's check runs, found none (the first request was still being made, or was
-- given up by its worker but not by GitHub), and created a second: two check runs for one release,
-- the first never updated. A creation whose delivery started is now available again 15 seconds
-- after its recovery, so the search finds what the first request made. The dispatcher also ends
-- each delivery's requests before its lease can expire, counted from before the claim. Other effects are
-- returned at once, as before: an update is an idempotent PATCH, a read a read, and a dispatch
-- goes to reconciliation.
--
-- Only a function changes: no table lock.

-- +goose Up
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
        -- A check run's creation that may have reached GitHub is searched for again only after
        -- it has had time to land (00089): GitHub can still make a request the worker gave up on.
        available_at = CASE WHEN e.next_status <> 'available' THEN o.available_at
                            WHEN o.effect_type = 'github.check_run.create' AND o.delivery_started_at IS NOT NULL
                                THEN v_now + interval '15 seconds'
                            ELSE v_now END,
        delivery_started_at = CASE WHEN e.next_status IN ('reconciliation_required', 'completed') THEN o.delivery_started_at END,
        completed_at = CASE WHEN e.next_status = 'completed' THEN v_now ELSE o.completed_at END,
        superseded_by = CASE WHEN e.next_status = 'completed' THEN e.newer ELSE o.superseded_by END,
        result = CASE WHEN e.next_status = 'completed'
                      THEN jsonb_build_object('resolution', 'superseded', 'superseded_by', e.newer) ELSE o.result END,
        lease_owner = NULL, lease_expires_at = NULL,
        last_error = left(format('lease of worker %s expired at %s%s; %s',
                                 e.lease_owner, to_char(o.lease_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                                 CASE WHEN o.delivery_started_at IS NOT NULL
                                      THEN format(' after delivery started at %s', to_char(o.delivery_started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')) ELSE '' END,
                                 CASE e.next_status
                                      WHEN 'reconciliation_required' THEN 'the dispatch may have reached GitHub'
                                      WHEN 'completed' THEN format('superseded by the newer check-run update %s, not sent again', e.newer)
                                      WHEN 'dead_letter' THEN format('attempts exhausted (%s of %s)', o.attempts, o.max_attempts)
                                      WHEN 'available' THEN CASE WHEN o.effect_type = 'github.check_run.create' AND o.delivery_started_at IS NOT NULL
                                                                 THEN 'returned to the queue, searched for in 15 s' ELSE 'returned to the queue' END
                                      END), 4096),
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
                                 e.lease_owner, to_char(o.lease_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                                 CASE WHEN o.delivery_started_at IS NOT NULL
                                      THEN format(' after delivery started at %s', to_char(o.delivery_started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')) ELSE '' END,
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
