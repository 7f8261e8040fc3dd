-- The restore fence (brops restore fence, docs/operations.md "Runbook: backup and restore").
--
-- After a point-in-time restore, the database has forgotten whatever happened after the restore
-- point, GitHub has not: a workflow dispatch the old dispatchers sent after that point is back
-- at 'available' (or 'leased' by a worker that no longer exists) and would be sent a second time.
-- Run before any dispatcher starts, boardreadyops_outbox_fence_restored moves every undelivered
-- workflow dispatch (available or leased) created at or after p_since into
-- reconciliation_required, recording delivery_started_at = p_since when none was recorded (the
-- earliest moment the old system could have sent it: brops reconcile inspect searches GitHub's runs
-- from there) and one audit row each. The caller passes p_since = restore point − safety margin.
-- Check-run effects are left alone: their creation lists before it creates, their completion is
-- an idempotent PATCH.
--
-- The fence also opens a hold (a restore_fences row) until brops restore close: deliveries GitHub
-- sent after the restore point come back by redelivery, and their pushes create release runs the
-- old deployment may already have dispatched under other ids. While a hold is open, a trigger
-- inserts every new first-generation workflow dispatch directly in reconciliation_required
-- (delivery_started_at = the window's start), so brops reconcile inspect can find the earlier
-- incarnation's run for the same tag and the operator adopts it instead of releasing twice. A
-- superseding dispatch (generation > 0, after an operator's --not-dispatched) is not held.
--
-- The audit action list gains 'outbox.restore_fence'. Swapping the CHECK locks control_plane_audit
-- (ACCESS EXCLUSIVE) until the migration commits and reads its rows once: it is written only by
-- operator actions (replay, resolve, fence), never by the services' hot path, so nothing waits
-- (pkg/migrate's lock test allows it by name).
-- New functions follow the function rules (docs/operations.md, "Rules for a new function"): a
-- pinned search path, schema-qualified names, the schema owner role when it exists (migrations
-- 00015-00017), EXECUTE for the admin role only.

-- +goose Up
ALTER TABLE public.control_plane_audit DROP CONSTRAINT control_plane_audit_action_check;
ALTER TABLE public.control_plane_audit ADD CONSTRAINT control_plane_audit_action_check CHECK (action IN (
    'outbox.replay', 'job.replay', 'outbox.reconciliation.repair', 'outbox.reconciliation.supersede',
    'outbox.restore_fence'));

CREATE TABLE public.restore_fences (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    window_start timestamptz NOT NULL,
    fenced_at timestamptz NOT NULL,
    operator text NOT NULL CHECK (length(btrim(operator)) BETWEEN 1 AND 200),
    reason text NOT NULL CHECK (length(btrim(reason)) BETWEEN 1 AND 2000),
    closed_at timestamptz,
    closed_by text CHECK (length(btrim(closed_by)) BETWEEN 1 AND 200),
    CHECK ((closed_at IS NULL) = (closed_by IS NULL))
);
CREATE INDEX restore_fences_open_idx ON public.restore_fences (id) WHERE closed_at IS NULL;
GRANT SELECT ON public.restore_fences TO boardreadyops_admin;

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_hold_fenced_dispatch()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_window timestamptz;
BEGIN
    SELECT f.window_start INTO v_window FROM public.restore_fences f WHERE f.closed_at IS NULL ORDER BY f.id DESC LIMIT 1;
    IF FOUND THEN
        NEW.status := 'reconciliation_required';
        NEW.delivery_started_at := v_window;
        NEW.last_error := 'restore fence open since ' || v_window::text
            || ': this release may have been dispatched before the restore under other ids; inspect and resolve';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER control_plane_outbox_hold_fenced_dispatch BEFORE INSERT ON public.control_plane_outbox
    FOR EACH ROW WHEN (NEW.effect_type = 'github.workflow.dispatch' AND NEW.generation = 0)
    EXECUTE FUNCTION public.boardreadyops_outbox_hold_fenced_dispatch();

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_fence_close(p_operator text)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_n integer;
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'closing the fence needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    UPDATE public.restore_fences SET closed_at = now(), closed_by = p_operator WHERE closed_at IS NULL;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_fence_restored(p_since timestamptz, p_operator text, p_reason text)
RETURNS TABLE (id bigint, release_run_id uuid, execution_attempt_id uuid, created_at timestamptz, from_status text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
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

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'boardreadyops_schema_owner') THEN
        ALTER TABLE public.restore_fences OWNER TO boardreadyops_schema_owner;
        ALTER FUNCTION public.boardreadyops_outbox_hold_fenced_dispatch() OWNER TO boardreadyops_schema_owner;
        ALTER FUNCTION public.boardreadyops_outbox_fence_close(text) OWNER TO boardreadyops_schema_owner;
        ALTER FUNCTION public.boardreadyops_outbox_fence_restored(timestamptz, text, text) OWNER TO boardreadyops_schema_owner;
    END IF;
END;
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION public.boardreadyops_outbox_hold_fenced_dispatch() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_outbox_fence_close(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_fence_close(text) TO boardreadyops_admin;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_outbox_fence_restored(timestamptz, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_fence_restored(timestamptz, text, text) TO boardreadyops_admin;

-- +goose Down
DROP FUNCTION public.boardreadyops_outbox_fence_restored(timestamptz, text, text);
DROP FUNCTION public.boardreadyops_outbox_fence_close(text);
DROP TRIGGER control_plane_outbox_hold_fenced_dispatch ON public.control_plane_outbox;
DROP FUNCTION public.boardreadyops_outbox_hold_fenced_dispatch();
DROP TABLE public.restore_fences;
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM public.control_plane_audit WHERE action = 'outbox.restore_fence') THEN
        RAISE EXCEPTION 'control_plane_audit holds restore-fence rows; the audit trail is never rewritten'
            USING ERRCODE = '55000';
    END IF;
END;
$$;
-- +goose StatementEnd
ALTER TABLE public.control_plane_audit DROP CONSTRAINT control_plane_audit_action_check;
ALTER TABLE public.control_plane_audit ADD CONSTRAINT control_plane_audit_action_check CHECK (action IN (
    'outbox.replay', 'job.replay', 'outbox.reconciliation.repair', 'outbox.reconciliation.supersede'));
