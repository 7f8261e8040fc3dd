-- A workflow dispatch completes in one statement, its run's page included (docs/dispatcher.md).
--
-- The dispatcher recorded the page GitHub returned (boardreadyops_outbox_record_workflow_run) and
-- then completed the dispatch (boardreadyops_outbox_complete_workflow_dispatch): two statements
-- of the same transaction, each locking the effect, and two writes of the attempt's
-- execution_attempt_workflow_runs row (the page, then the start). In a 10,000-run load
-- (hack/bench/e2e.sh, PG_STATEMENTS=1) the first was 17.3 buffers per run and the second upsert
-- hit the row the first had just written.
--
-- boardreadyops_outbox_complete_workflow_dispatch_with_run takes the page with the run id and
-- writes the row once. A page that is not an http(s) address or is longer than 1,024 characters
-- is left out, as record_workflow_run left it out. The two old functions stay for dispatchers of
-- the previous release (a rolling upgrade runs both): complete_workflow_dispatch now calls the
-- new one without a page, and boardreadyops_outbox_advance_dispatched_attempt keeps its
-- three-argument form as a call of the four-argument one. No table lock.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_advance_dispatched_attempt(r public.control_plane_outbox, p_workflow_run_id bigint, p_workflow_run_url text, p_now timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    run public.release_runs;
    att public.execution_attempts;
BEGIN
    IF p_workflow_run_id IS NULL OR p_workflow_run_id <= 0 THEN
        RAISE EXCEPTION 'workflow run id must be positive, got %', p_workflow_run_id USING ERRCODE = '22023';
    END IF;
    SELECT * INTO run FROM public.release_runs WHERE id = r.release_run_id FOR UPDATE;
    SELECT * INTO att FROM public.execution_attempts WHERE id = r.execution_attempt_id FOR UPDATE;
    IF run.status NOT IN ('dispatching', 'blocked') OR att.status <> 'dispatching' OR att.number <> run.current_attempt
       OR att.workflow_run_id IS NOT NULL THEN
        RAISE EXCEPTION 'release run % attempt % cannot advance to running', run.id, att.number
            USING ERRCODE = 'BR005',
                  DETAIL = format('run status %s (current attempt %s), attempt status %s, workflow run %s',
                                  run.status, run.current_attempt, att.status, coalesce(att.workflow_run_id::text, 'none'));
    END IF;
    IF EXISTS (SELECT 1 FROM public.execution_attempts WHERE workflow_run_id = p_workflow_run_id) THEN
        RAISE EXCEPTION 'workflow run % already belongs to another execution attempt', p_workflow_run_id
            USING ERRCODE = 'BR005';
    END IF;
    UPDATE public.execution_attempts
    SET status = 'running', workflow_run_id = p_workflow_run_id, dispatched_at = p_now, updated_at = p_now
    WHERE id = att.id;
    UPDATE public.release_runs SET status = 'running', updated_at = p_now WHERE id = run.id;
    -- The run's page (NULL: none usable) in the same row write as its start.
    INSERT INTO public.execution_attempt_workflow_runs AS w (execution_attempt_id, workflow_run_url, workflow_run_attempt, started_at, updated_at)
    VALUES (att.id, p_workflow_run_url, 1, p_now, p_now)
    ON CONFLICT ON CONSTRAINT execution_attempt_workflow_runs_pkey DO UPDATE
    SET workflow_run_url = coalesce(EXCLUDED.workflow_run_url, w.workflow_run_url),
        started_at = coalesce(w.started_at, p_now), updated_at = p_now;
    PERFORM public.boardreadyops_release_run_enqueue_check_run(run.id, 'running', NULL, r.traceparent, p_now);
END;
$$;

-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_advance_dispatched_attempt(r public.control_plane_outbox, p_workflow_run_id bigint, p_now timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    PERFORM public.boardreadyops_outbox_advance_dispatched_attempt(r, p_workflow_run_id, NULL::text, p_now);
END;
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_complete_workflow_dispatch_with_run(p_id bigint, p_worker text, p_workflow_run_id bigint, p_workflow_run_url text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, 'github.workflow.dispatch');
    IF r.delivery_started_at IS NULL THEN
        RAISE EXCEPTION 'outbox record %: delivery was never started', p_id USING ERRCODE = 'BR003';
    END IF;
    -- A page that is not a web address, or too long to store, is nothing usable to link to.
    PERFORM public.boardreadyops_outbox_advance_dispatched_attempt(r, p_workflow_run_id,
        CASE WHEN p_workflow_run_url ~ '^https?://' AND length(p_workflow_run_url) <= 1024 THEN p_workflow_run_url END, v_now);
    UPDATE public.control_plane_outbox
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
        result = jsonb_build_object('workflow_run_id', p_workflow_run_id), last_error = NULL, updated_at = v_now
    WHERE id = p_id;
END;
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_workflow_dispatch(p_id bigint, p_worker text, p_workflow_run_id bigint, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    PERFORM public.boardreadyops_outbox_complete_workflow_dispatch_with_run(p_id, p_worker, p_workflow_run_id, NULL::text, p_now);
END;
$$;
-- +goose StatementEnd
ALTER FUNCTION public.boardreadyops_outbox_advance_dispatched_attempt(public.control_plane_outbox, bigint, text, timestamptz) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_outbox_advance_dispatched_attempt(public.control_plane_outbox, bigint, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_advance_dispatched_attempt(public.control_plane_outbox, bigint, text, timestamptz) TO boardreadyops_admin;
ALTER FUNCTION public.boardreadyops_outbox_complete_workflow_dispatch_with_run(bigint, text, bigint, text, timestamptz) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_outbox_complete_workflow_dispatch_with_run(bigint, text, bigint, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_complete_workflow_dispatch_with_run(bigint, text, bigint, text, timestamptz) TO boardreadyops_dispatcher, boardreadyops_admin;

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_workflow_dispatch(p_id bigint, p_worker text, p_workflow_run_id bigint, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, 'github.workflow.dispatch');
    IF r.delivery_started_at IS NULL THEN
        RAISE EXCEPTION 'outbox record %: delivery was never started', p_id USING ERRCODE = 'BR003';
    END IF;
    PERFORM public.boardreadyops_outbox_advance_dispatched_attempt(r, p_workflow_run_id, v_now);
    UPDATE public.control_plane_outbox
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
        result = jsonb_build_object('workflow_run_id', p_workflow_run_id), last_error = NULL, updated_at = v_now
    WHERE id = p_id;
END;
$$;

-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_advance_dispatched_attempt(r public.control_plane_outbox, p_workflow_run_id bigint, p_now timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    run public.release_runs;
    att public.execution_attempts;
BEGIN
    IF p_workflow_run_id IS NULL OR p_workflow_run_id <= 0 THEN
        RAISE EXCEPTION 'workflow run id must be positive, got %', p_workflow_run_id USING ERRCODE = '22023';
    END IF;
    SELECT * INTO run FROM public.release_runs WHERE id = r.release_run_id FOR UPDATE;
    SELECT * INTO att FROM public.execution_attempts WHERE id = r.execution_attempt_id FOR UPDATE;
    IF run.status NOT IN ('dispatching', 'blocked') OR att.status <> 'dispatching' OR att.number <> run.current_attempt
       OR att.workflow_run_id IS NOT NULL THEN
        RAISE EXCEPTION 'release run % attempt % cannot advance to running', run.id, att.number
            USING ERRCODE = 'BR005',
                  DETAIL = format('run status %s (current attempt %s), attempt status %s, workflow run %s',
                                  run.status, run.current_attempt, att.status, coalesce(att.workflow_run_id::text, 'none'));
    END IF;
    IF EXISTS (SELECT 1 FROM public.execution_attempts WHERE workflow_run_id = p_workflow_run_id) THEN
        RAISE EXCEPTION 'workflow run % already belongs to another execution attempt', p_workflow_run_id
            USING ERRCODE = 'BR005';
    END IF;
    UPDATE public.execution_attempts
    SET status = 'running', workflow_run_id = p_workflow_run_id, dispatched_at = p_now, updated_at = p_now
    WHERE id = att.id;
    UPDATE public.release_runs SET status = 'running', updated_at = p_now WHERE id = run.id;
    INSERT INTO public.execution_attempt_workflow_runs AS w (execution_attempt_id, workflow_run_attempt, started_at, updated_at)
    VALUES (att.id, 1, p_now, p_now)
    ON CONFLICT ON CONSTRAINT execution_attempt_workflow_runs_pkey DO UPDATE SET started_at = coalesce(w.started_at, p_now), updated_at = p_now;
    PERFORM public.boardreadyops_release_run_enqueue_check_run(run.id, 'running', NULL, r.traceparent, p_now);
END;
$$;

-- +goose StatementEnd
DROP FUNCTION public.boardreadyops_outbox_complete_workflow_dispatch_with_run(bigint, text, bigint, text, timestamptz);
DROP FUNCTION public.boardreadyops_outbox_advance_dispatched_attempt(public.control_plane_outbox, bigint, text, timestamptz);
