-- brops restore fence reads only the outbox's undelivered effects (docs/operations.md, "Runbook:
-- backup and restore").
--
-- boardreadyops_outbox_fence_restored selected `status IN ('available', 'leased')`, which no
-- index's predicate implies: the plan read the whole outbox, every completed effect retention
-- keeps, during the restore's downtime. Written as `status = 'available' OR status = 'leased'`,
-- each arm is the predicate of a partial index (control_plane_outbox_claim_idx,
-- control_plane_outbox_lease_idx), and the plan can read those two and nothing else. What it
-- fences is unchanged.
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
        -- Two arms of an OR, each the predicate of a partial index (claim_idx, lease_idx), so
        -- that the plan reads those indexes and not the whole outbox (00082).
        WHERE o.effect_type = 'github.workflow.dispatch' AND (o.status = 'available' OR o.status = 'leased')
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

