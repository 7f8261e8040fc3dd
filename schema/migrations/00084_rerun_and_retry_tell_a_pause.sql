-- A re-run or a Retry while workflow dispatches are paused says so on the check run
-- (docs/operations.md, "Runbook: pause dispatches during a GitHub incident").
--
-- A pause tells the runs then waiting for their dispatch, a run created during it is told by its
-- check run's creation, and a resume tells every waiting run. But a re-run (a check run's Re-run,
-- "Re-run all checks", an operator's brops release-runs start) or a Retry (a replayed dispatch)
-- during the pause enqueued a dispatch the pause held while its check run said "Re-run: attempt N
-- is starting." or "…: the release workflow is dispatched again.", until the resume. Both now add
-- the pause and its reason (boardreadyops_outbox_dispatch_pause_reason), as the other notices do.
--
-- Only functions change: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_start_next(p_run_id uuid, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(attempt_id uuid, attempt_number integer, outbox_id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    run public.release_runs;
    att public.execution_attempts;
    v_paused text;
BEGIN
    SELECT * INTO run FROM public.release_runs WHERE id = p_run_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'release run % does not exist', p_run_id USING ERRCODE = 'BR006';
    END IF;
    IF run.status NOT IN ('succeeded', 'failed', 'cancelled') OR run.check_run_id IS NULL THEN
        RAISE EXCEPTION 'release run % is %, only a finished run is re-run', p_run_id, run.status
            USING ERRCODE = 'BR005';
    END IF;
    INSERT INTO public.execution_attempts (release_run_id, number, status, created_at, updated_at)
    VALUES (run.id, run.current_attempt + 1, 'dispatching', v_now, v_now)
    RETURNING * INTO att;
    UPDATE public.release_runs
    SET current_attempt = att.number, status = 'dispatching', completed_at = NULL, updated_at = v_now
    WHERE id = run.id;
    RETURN QUERY SELECT att.id, att.number,
        public.boardreadyops_outbox_enqueue_attempt_dispatch(run.id, att.id, p_traceparent, v_now);
    -- The check run shows the new attempt at once, not the previous one's conclusion, and a
    -- dispatch pause in force that holds it (00084).
    v_paused := public.boardreadyops_outbox_dispatch_pause_reason(run.installation_id);
    PERFORM public.boardreadyops_release_run_enqueue_check_run(run.id, 'dispatching',
        CASE WHEN v_paused IS NULL THEN format('Re-run: attempt %s is starting.', att.number)
             ELSE format('Re-run: attempt %s is waiting. The release is paused: an operator paused workflow dispatches (%s). The release workflow starts when they resume.', att.number, v_paused)
        END, p_traceparent, v_now);
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_unblock(r public.control_plane_outbox, p_operator text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    run public.release_runs;
    v_who text;
    v_paused text;
BEGIN
    SELECT * INTO run FROM public.release_runs WHERE id = r.release_run_id FOR UPDATE;
    IF NOT FOUND OR run.status <> 'blocked' OR r.effect_type = 'github.collaborator_permission.read' THEN
        RETURN; -- a permission read replayed by an operator unblocks nothing by itself
    END IF;
    IF EXISTS (SELECT 1 FROM public.control_plane_outbox o
               WHERE o.release_run_id = run.id AND o.status IN ('dead_letter', 'reconciliation_required')
                 AND o.effect_type <> 'github.collaborator_permission.read') THEN
        RETURN; -- something else still blocks it
    END IF;
    UPDATE public.release_runs
    SET status = CASE WHEN run.check_run_id IS NULL THEN 'check_pending' ELSE 'dispatching' END, updated_at = v_now
    WHERE id = run.id;
    v_who := CASE WHEN p_operator LIKE 'github:%' THEN 'Retry requested by @' || substr(p_operator, length('github:') + 1)
                  ELSE 'Operator ' || p_operator || ' resolved it' END;
    -- A dispatch pause in force holds the dispatch: the check run says so (00084).
    v_paused := public.boardreadyops_outbox_dispatch_pause_reason(run.installation_id);
    PERFORM public.boardreadyops_release_run_enqueue_check_run(run.id, 'retrying',
        CASE WHEN v_paused IS NULL THEN v_who || ': the release workflow is dispatched again.'
             ELSE format('%s: the release is paused: an operator paused workflow dispatches (%s). The release workflow is dispatched again when they resume.', v_who, v_paused)
        END, r.traceparent, v_now);
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_start_next(p_run_id uuid, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(attempt_id uuid, attempt_number integer, outbox_id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    run public.release_runs;
    att public.execution_attempts;
BEGIN
    SELECT * INTO run FROM public.release_runs WHERE id = p_run_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'release run % does not exist', p_run_id USING ERRCODE = 'BR006';
    END IF;
    IF run.status NOT IN ('succeeded', 'failed', 'cancelled') OR run.check_run_id IS NULL THEN
        RAISE EXCEPTION 'release run % is %, only a finished run is re-run', p_run_id, run.status
            USING ERRCODE = 'BR005';
    END IF;
    INSERT INTO public.execution_attempts (release_run_id, number, status, created_at, updated_at)
    VALUES (run.id, run.current_attempt + 1, 'dispatching', v_now, v_now)
    RETURNING * INTO att;
    UPDATE public.release_runs
    SET current_attempt = att.number, status = 'dispatching', completed_at = NULL, updated_at = v_now
    WHERE id = run.id;
    RETURN QUERY SELECT att.id, att.number,
        public.boardreadyops_outbox_enqueue_attempt_dispatch(run.id, att.id, p_traceparent, v_now);
    -- The check run shows the new attempt at once, not the previous one's conclusion.
    PERFORM public.boardreadyops_release_run_enqueue_check_run(run.id, 'dispatching',
        format('Re-run: attempt %s is starting.', att.number), p_traceparent, v_now);
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_unblock(r public.control_plane_outbox, p_operator text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    run public.release_runs;
    v_who text;
BEGIN
    SELECT * INTO run FROM public.release_runs WHERE id = r.release_run_id FOR UPDATE;
    IF NOT FOUND OR run.status <> 'blocked' OR r.effect_type = 'github.collaborator_permission.read' THEN
        RETURN; -- a permission read replayed by an operator unblocks nothing by itself
    END IF;
    IF EXISTS (SELECT 1 FROM public.control_plane_outbox o
               WHERE o.release_run_id = run.id AND o.status IN ('dead_letter', 'reconciliation_required')
                 AND o.effect_type <> 'github.collaborator_permission.read') THEN
        RETURN; -- something else still blocks it
    END IF;
    UPDATE public.release_runs
    SET status = CASE WHEN run.check_run_id IS NULL THEN 'check_pending' ELSE 'dispatching' END, updated_at = v_now
    WHERE id = run.id;
    v_who := CASE WHEN p_operator LIKE 'github:%' THEN 'Retry requested by @' || substr(p_operator, length('github:') + 1)
                  ELSE 'Operator ' || p_operator || ' resolved it' END;
    PERFORM public.boardreadyops_release_run_enqueue_check_run(run.id, 'retrying',
        v_who || ': the release workflow is dispatched again.', r.traceparent, v_now);
END;
$$;
-- +goose StatementEnd
