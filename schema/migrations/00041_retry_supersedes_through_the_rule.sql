-- A retry's supersession goes through the one rule of 00039 (docs/dispatcher.md, "Order is what
-- matters").
--
-- boardreadyops_outbox_retry completed a check-run update that a newer one replaced with its own
-- copy of the rule (00021); 00039 wrote the rule once, boardreadyops_outbox_supersede_check_run_update,
-- for lease recovery, defer and release. The retry now calls it too: the same test of "newer",
-- and the same record — `result` names the update that superseded it, as the others' do, and
-- `last_error` keeps the failure with the supersession after it. No table lock.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_retry(p_id bigint, p_worker text, p_error text, p_retry_at timestamp with time zone, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
    v_status text;
BEGIN
    IF p_error IS NULL OR btrim(p_error) = '' THEN
        RAISE EXCEPTION 'retry needs an error description' USING ERRCODE = '22023';
    END IF;
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    v_status := CASE WHEN r.attempts >= r.max_attempts THEN 'dead_letter' ELSE 'available' END;
    -- A check-run update that a newer one replaced is not sent again: it would undo the newer.
    IF public.boardreadyops_outbox_supersede_check_run_update(r, p_error, v_now) THEN
        RETURN 'completed';
    END IF;
    UPDATE public.control_plane_outbox
    SET status = v_status,
        available_at = CASE WHEN v_status = 'available' THEN greatest(coalesce(p_retry_at, v_now), v_now) ELSE available_at END,
        lease_owner = NULL, lease_expires_at = NULL, delivery_started_at = NULL,
        last_error = left(CASE WHEN v_status = 'dead_letter'
                               THEN format('attempts exhausted (%s of %s): %s', r.attempts, r.max_attempts, p_error)
                               ELSE p_error END, 4096),
        updated_at = v_now
    WHERE id = p_id;
    IF v_status = 'dead_letter' THEN
        PERFORM public.boardreadyops_release_run_block(p_id, v_now);
    END IF;
    RETURN v_status;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_retry(p_id bigint, p_worker text, p_error text, p_retry_at timestamp with time zone, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
    v_status text;
BEGIN
    IF p_error IS NULL OR btrim(p_error) = '' THEN
        RAISE EXCEPTION 'retry needs an error description' USING ERRCODE = '22023';
    END IF;
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    v_status := CASE WHEN r.attempts >= r.max_attempts THEN 'dead_letter' ELSE 'available' END;
    -- A check-run update that a newer one replaced is not sent again: it would undo the newer.
    IF r.effect_type = 'github.check_run.complete' AND EXISTS (
        SELECT 1 FROM public.control_plane_outbox o
        WHERE o.release_run_id = r.release_run_id AND o.effect_type = 'github.check_run.complete' AND o.id > r.id) THEN
        UPDATE public.control_plane_outbox o
        SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
            superseded_by = (SELECT max(n.id) FROM public.control_plane_outbox n
                             WHERE n.release_run_id = r.release_run_id AND n.effect_type = 'github.check_run.complete'),
            result = jsonb_build_object('resolution', 'superseded'), last_error = left(p_error, 4096), updated_at = v_now
        WHERE o.id = p_id;
        RETURN 'completed';
    END IF;
    UPDATE public.control_plane_outbox
    SET status = v_status,
        available_at = CASE WHEN v_status = 'available' THEN greatest(coalesce(p_retry_at, v_now), v_now) ELSE available_at END,
        lease_owner = NULL, lease_expires_at = NULL, delivery_started_at = NULL,
        last_error = left(CASE WHEN v_status = 'dead_letter'
                               THEN format('attempts exhausted (%s of %s): %s', r.attempts, r.max_attempts, p_error)
                               ELSE p_error END, 4096),
        updated_at = v_now
    WHERE id = p_id;
    IF v_status = 'dead_letter' THEN
        PERFORM public.boardreadyops_release_run_block(p_id, v_now);
    END IF;
    RETURN v_status;
END;
$$;
-- +goose StatementEnd
