-- brops restore fence moves every workflow dispatch still available or leased in the restored
-- database to reconciliation_required, whenever it was created (docs/operations.md, "Runbook:
-- backup and restore").
--
-- Until now it moved only those created since the restore point less --margin, and the runbook
-- said to make the margin longer than the oldest available effect's age. But that gauge counts
-- from available_at, and only effects already due: a dispatch created hours before the restore
-- point and still waiting at it (retried with backoff, behind a rate-limit block, paused) showed a
-- small age or none. The old deployment may have sent it after the restore point; the restored
-- dispatchers would then have sent it a second time. Such a dispatch is now fenced too, and
-- reconciliation finds the run it started, if any. --margin still starts the redelivery window
-- and is still the earliest send time recorded on a fenced dispatch that had none.
--
-- Only a function changes: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_fence_restored(p_since timestamp with time zone, p_operator text, p_reason text) RETURNS TABLE(id bigint, release_run_id uuid, execution_attempt_id uuid, created_at timestamp with time zone, from_status text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := now();
BEGIN
    IF p_since IS NULL THEN
        RAISE EXCEPTION 'the fence needs the start of its window' USING ERRCODE = '22023';
    END IF;
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'the fence needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'the fence needs a reason' USING ERRCODE = '22023';
    END IF;
    INSERT INTO public.restore_fences (window_start, fenced_at, operator, reason) VALUES (p_since, v_now, p_operator, p_reason);
    RETURN QUERY
    WITH fenced AS (
        SELECT o.id, o.status FROM public.control_plane_outbox o
        -- Every undelivered dispatch, however old: one still waiting at the restore point (a
        -- retry's backoff, a rate-limit block, a pause) may have been sent after it (00066).
        WHERE o.effect_type = 'github.workflow.dispatch' AND o.status IN ('available', 'leased')
        ORDER BY o.id
        FOR UPDATE
    ), moved AS (
        UPDATE public.control_plane_outbox o
        SET status = 'reconciliation_required', lease_owner = NULL, lease_expires_at = NULL,
            delivery_started_at = coalesce(o.delivery_started_at, p_since),
            last_error = left('restore fence: may have been sent after the restore point (' || p_reason || ')', 4096),
            updated_at = v_now
        FROM fenced f WHERE o.id = f.id
        RETURNING o.id, o.release_run_id, o.execution_attempt_id, o.created_at, f.status AS from_status
    ), audited AS (
        INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
        SELECT v_now, p_operator, 'outbox.restore_fence', 'outbox', m.id, p_reason,
               jsonb_build_object('since', p_since, 'created_at', m.created_at), m.from_status, 'reconciliation_required'
        FROM moved m
    )
    SELECT m.id, m.release_run_id, m.execution_attempt_id, m.created_at, m.from_status FROM moved m ORDER BY m.id;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_fence_restored(p_since timestamp with time zone, p_operator text, p_reason text) RETURNS TABLE(id bigint, release_run_id uuid, execution_attempt_id uuid, created_at timestamp with time zone, from_status text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := now();
BEGIN
    IF p_since IS NULL THEN
        RAISE EXCEPTION 'the fence needs the start of its window' USING ERRCODE = '22023';
    END IF;
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'the fence needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'the fence needs a reason' USING ERRCODE = '22023';
    END IF;
    INSERT INTO public.restore_fences (window_start, fenced_at, operator, reason) VALUES (p_since, v_now, p_operator, p_reason);
    RETURN QUERY
    WITH fenced AS (
        SELECT o.id, o.status FROM public.control_plane_outbox o
        WHERE o.effect_type = 'github.workflow.dispatch' AND o.status IN ('available', 'leased')
          AND o.created_at >= p_since
        ORDER BY o.id
        FOR UPDATE
    ), moved AS (
        UPDATE public.control_plane_outbox o
        SET status = 'reconciliation_required', lease_owner = NULL, lease_expires_at = NULL,
            delivery_started_at = coalesce(o.delivery_started_at, p_since),
            last_error = left('restore fence: may have been sent after the restore point (' || p_reason || ')', 4096),
            updated_at = v_now
        FROM fenced f WHERE o.id = f.id
        RETURNING o.id, o.release_run_id, o.execution_attempt_id, o.created_at, f.status AS from_status
    ), audited AS (
        INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
        SELECT v_now, p_operator, 'outbox.restore_fence', 'outbox', m.id, p_reason,
               jsonb_build_object('since', p_since, 'created_at', m.created_at), m.from_status, 'reconciliation_required'
        FROM moved m
    )
    SELECT m.id, m.release_run_id, m.execution_attempt_id, m.created_at, m.from_status FROM moved m ORDER BY m.id;
END;
$$;
-- +goose StatementEnd
