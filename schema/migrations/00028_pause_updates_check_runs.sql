-- A dispatch pause is told on the check runs that already exist (issue 20).
--
-- 00024 recorded the pause only in the creation payload of check runs created while it is in
-- force, so a release waiting for its dispatch when an operator paused kept saying
-- "dispatching" on GitHub. Pausing (a new pause or a new reason) and resuming now enqueue, for
-- every release run of the scope that is dispatching and has a check run, the run's check-run
-- update (boardreadyops_release_run_enqueue_check_run, 00021: state dispatching, the pause or the
-- resumption as its notice, the newest update superseding any not sent yet). A resume tells only
-- the runs no other pause still holds. The updates are ordinary github.check_run.complete effects:
-- check runs keep flowing during a pause, only workflow dispatches wait.
--
-- A run created before the pause whose check run is created during it is not told: its creation
-- payload predates the pause (docs/operations.md, "Runbook: pause dispatches").
-- New functions follow docs/operations.md, "Rules for a new function".

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_release_run_tell_pause(p_scope bigint, p_resumed boolean, p_now timestamptz DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now    timestamptz := public.boardreadyops_clock_now(p_now);
    v_count  integer := 0;
    v_reason text;
    r        record;
BEGIN
    -- The runs waiting for their workflow dispatch in the pause's scope that already have a
    -- check run (one range of release_runs_status_created_idx), in id order so that two pauses
    -- lock them in the same order.
    FOR r IN
        SELECT x.id, x.installation_id FROM public.release_runs x
        WHERE x.status = 'dispatching' AND x.check_run_id IS NOT NULL
          AND (p_scope = 0 OR x.installation_id = p_scope)
        ORDER BY x.id
    LOOP
        v_reason := public.boardreadyops_outbox_dispatch_pause_reason(r.installation_id);
        IF p_resumed AND v_reason IS NOT NULL THEN
            CONTINUE; -- another pause (the global one, or the installation's) still holds it
        END IF;
        PERFORM public.boardreadyops_release_run_enqueue_check_run(r.id, 'dispatching',
            CASE WHEN v_reason IS NULL
                 THEN 'Workflow dispatches resumed: the release workflow is being started.'
                 ELSE format('The release is paused: an operator paused workflow dispatches (%s). The release workflow starts when they resume.', v_reason)
            END, NULL, v_now);
        v_count := v_count + 1;
    END LOOP;
    IF v_count > 0 THEN
        PERFORM pg_notify('boardreadyops_outbox', '');
    END IF;
    RETURN v_count;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_pause_dispatches(p_installation_id bigint, p_operator text, p_reason text, p_now timestamptz DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now   timestamptz := public.boardreadyops_clock_now(p_now);
    v_scope bigint := coalesce(p_installation_id, 0);
    v_new   boolean;
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'pausing needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'pausing needs a reason' USING ERRCODE = '22023';
    END IF;
    IF v_scope < 0 OR (v_scope > 0 AND NOT EXISTS (SELECT 1 FROM public.installations i WHERE i.id = v_scope)) THEN
        RAISE EXCEPTION 'installation % is not recorded', v_scope USING ERRCODE = 'BR006';
    END IF;
    INSERT INTO public.dispatch_pauses (installation_id, operator, reason, paused_at) VALUES (v_scope, p_operator, p_reason, v_now)
    ON CONFLICT (installation_id) DO UPDATE SET operator = EXCLUDED.operator, reason = EXCLUDED.reason
    RETURNING xmax = 0 INTO v_new;
    INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'dispatch.pause', 'dispatch_pause', v_scope, p_reason, jsonb_build_object('scope', CASE WHEN v_scope = 0 THEN 'global' ELSE 'installation' END),
            CASE WHEN v_new THEN 'running' ELSE 'paused' END, 'paused');
    PERFORM public.boardreadyops_release_run_tell_pause(v_scope, false, v_now);
    RETURN v_new;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_resume_dispatches(p_installation_id bigint, p_operator text, p_reason text, p_now timestamptz DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now   timestamptz := public.boardreadyops_clock_now(p_now);
    v_scope bigint := coalesce(p_installation_id, 0);
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'resuming needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'resuming needs a reason' USING ERRCODE = '22023';
    END IF;
    DELETE FROM public.dispatch_pauses p WHERE p.installation_id = v_scope;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'dispatch.resume', 'dispatch_pause', v_scope, p_reason, NULL, 'paused', 'running');
    PERFORM public.boardreadyops_release_run_tell_pause(v_scope, true, v_now);
    PERFORM pg_notify('boardreadyops_outbox', '');
    RETURN true;
END;
$$;
-- +goose StatementEnd

ALTER FUNCTION public.boardreadyops_release_run_tell_pause(bigint, boolean, timestamptz) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_release_run_tell_pause(bigint, boolean, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_release_run_tell_pause(bigint, boolean, timestamptz) TO boardreadyops_admin;

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_pause_dispatches(p_installation_id bigint, p_operator text, p_reason text, p_now timestamptz DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now   timestamptz := public.boardreadyops_clock_now(p_now);
    v_scope bigint := coalesce(p_installation_id, 0);
    v_new   boolean;
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'pausing needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'pausing needs a reason' USING ERRCODE = '22023';
    END IF;
    IF v_scope < 0 OR (v_scope > 0 AND NOT EXISTS (SELECT 1 FROM public.installations i WHERE i.id = v_scope)) THEN
        RAISE EXCEPTION 'installation % is not recorded', v_scope USING ERRCODE = 'BR006';
    END IF;
    INSERT INTO public.dispatch_pauses (installation_id, operator, reason, paused_at) VALUES (v_scope, p_operator, p_reason, v_now)
    ON CONFLICT (installation_id) DO UPDATE SET operator = EXCLUDED.operator, reason = EXCLUDED.reason
    RETURNING xmax = 0 INTO v_new;
    INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'dispatch.pause', 'dispatch_pause', v_scope, p_reason, jsonb_build_object('scope', CASE WHEN v_scope = 0 THEN 'global' ELSE 'installation' END),
            CASE WHEN v_new THEN 'running' ELSE 'paused' END, 'paused');
    RETURN v_new;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_resume_dispatches(p_installation_id bigint, p_operator text, p_reason text, p_now timestamptz DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now   timestamptz := public.boardreadyops_clock_now(p_now);
    v_scope bigint := coalesce(p_installation_id, 0);
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'resuming needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'resuming needs a reason' USING ERRCODE = '22023';
    END IF;
    DELETE FROM public.dispatch_pauses p WHERE p.installation_id = v_scope;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'dispatch.resume', 'dispatch_pause', v_scope, p_reason, NULL, 'paused', 'running');
    PERFORM pg_notify('boardreadyops_outbox', '');
    RETURN true;
END;
$$;
-- +goose StatementEnd

DROP FUNCTION public.boardreadyops_release_run_tell_pause(bigint, boolean, timestamptz);
