-- A workflow run's completion finds its attempt and run by keys, whatever the statistics say
-- (issue 25, docs/performance.md "End to end").
--
-- boardreadyops_execution_attempt_finish found the attempt of a workflow_run delivery with one
-- statement: execution_attempts by workflow run id JOINed to release_runs on the run's id AND the
-- delivery's repository, both rows locked. PL/pgSQL keeps that statement's generic plan per
-- connection from its sixth call. Planned while release_runs had few rows or stale statistics
-- (a new installation, the first minutes of a load, a restore not yet analyzed) it read the
-- release runs through their repository index — every run the repository ever had, kept as long
-- as retention keeps them — and filtered the one it wanted by the join. auto_explain of a 4,000-run
-- load: 20–23 runs read per completion, 26–33 buffers for one row; with months of history in one
-- repository, thousands.
--
-- Now the attempt's id and run id come first from the workflow run id's unique index (no lock),
-- and the locking statement names both rows by primary key, keeping the workflow run id and
-- repository tests. The outcomes are the same as before: a workflow run of another repository, or
-- a row locked by another transaction (SKIP LOCKED), is unmatched.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_finish(p_job_id bigint, p_worker text, p_check_run_name text, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(outcome text, release_run_id uuid, execution_attempt_id uuid, outbox_id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    j public.control_plane_jobs;
    i public.webhook_inbox;
    run public.release_runs;
    att public.execution_attempts;
    v_full_name text;
    v_workflow_run_id bigint;
    v_conclusion text;
    v_status text;
    v_check text;
    v_outbox bigint;
    v_run_attempt integer;
    v_known integer;
    v_url text;
    v_current boolean;
    v_attempt_id uuid;
    v_run_id uuid;
BEGIN
    IF p_check_run_name IS NULL OR length(p_check_run_name) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'check run name must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    j := public.boardreadyops_job_lock_leased(p_job_id, p_worker);
    SELECT * INTO i FROM public.webhook_inbox WHERE id = j.inbox_id;
    IF i.event IS DISTINCT FROM 'workflow_run' OR i.repository_id IS NULL THEN
        RAISE EXCEPTION 'job % is not a workflow_run delivery of a repository', p_job_id USING ERRCODE = 'BR005';
    END IF;
    v_workflow_run_id := (i.payload -> 'workflow_run' ->> 'id')::bigint;
    v_conclusion := coalesce(nullif(i.payload -> 'workflow_run' ->> 'conclusion', ''), 'unknown');

    -- The attempt by its workflow run id (unique), then both rows locked by primary key (00037).
    SELECT a.id, a.release_run_id INTO v_attempt_id, v_run_id
    FROM public.execution_attempts a WHERE a.workflow_run_id = v_workflow_run_id;
    SELECT a.* INTO att
    FROM public.execution_attempts a JOIN public.release_runs r ON r.id = a.release_run_id
    WHERE a.id = v_attempt_id AND r.id = v_run_id
      AND a.workflow_run_id = v_workflow_run_id AND r.repository_id = i.repository_id
    FOR UPDATE OF r, a SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'unmatched'::text, NULL::uuid, NULL::uuid, NULL::bigint;
        RETURN;
    END IF;
    SELECT * INTO run FROM public.release_runs r WHERE r.id = att.release_run_id;
    v_current := att.number = run.current_attempt;
    v_run_attempt := greatest(coalesce((i.payload -> 'workflow_run' ->> 'run_attempt')::integer, 1), 1);
    v_url := nullif(left(i.payload -> 'workflow_run' ->> 'html_url', 1024), '');
    SELECT w.workflow_run_attempt INTO v_known FROM public.execution_attempt_workflow_runs w WHERE w.execution_attempt_id = att.id;
    v_known := coalesce(v_known, 1);
    IF v_run_attempt < v_known THEN
        RETURN QUERY SELECT 'ignored'::text, run.id, att.id, NULL::bigint; -- an earlier run attempt's late event
        RETURN;
    END IF;
    INSERT INTO public.execution_attempt_workflow_runs AS w (execution_attempt_id, workflow_run_url, workflow_run_attempt, started_at, updated_at)
    VALUES (att.id, v_url, v_run_attempt, coalesce(att.dispatched_at, v_now), v_now)
    ON CONFLICT ON CONSTRAINT execution_attempt_workflow_runs_pkey DO UPDATE
    SET workflow_run_url = coalesce(EXCLUDED.workflow_run_url, w.workflow_run_url),
        workflow_run_attempt = EXCLUDED.workflow_run_attempt,
        started_at = CASE WHEN EXCLUDED.workflow_run_attempt > w.workflow_run_attempt THEN v_now ELSE w.started_at END,
        updated_at = v_now;
    IF v_run_attempt > v_known AND att.status IN ('succeeded', 'failed', 'cancelled') THEN
        -- Re-run from the Actions UI: the same workflow run, a new run attempt. The attempt (and the
        -- run, when the attempt is its current one) is running again until that run attempt ends.
        UPDATE public.execution_attempts a SET status = 'running', conclusion = NULL, completed_at = NULL, updated_at = v_now
        WHERE a.id = att.id RETURNING * INTO att;
        IF v_current AND run.status IN ('succeeded', 'failed', 'cancelled') THEN
            UPDATE public.release_runs r SET status = 'running', completed_at = NULL, updated_at = v_now
            WHERE r.id = run.id RETURNING * INTO run;
        END IF;
        IF i.action IS DISTINCT FROM 'completed' THEN
            IF v_current AND run.check_run_id IS NOT NULL THEN
                v_outbox := public.boardreadyops_release_run_enqueue_check_run(run.id, 'running',
                    format('The workflow run was re-run from GitHub Actions (run attempt %s); BoardReadyOps follows it.', v_run_attempt),
                    p_traceparent, v_now);
            END IF;
            RETURN QUERY SELECT 'followed'::text, run.id, att.id, v_outbox;
            RETURN;
        END IF;
    END IF;
    IF i.action IS DISTINCT FROM 'completed' OR att.status <> 'running' THEN
        RETURN QUERY SELECT 'ignored'::text, run.id, att.id, NULL::bigint;
        RETURN;
    END IF;

    v_status := CASE v_conclusion WHEN 'success' THEN 'succeeded' WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END;
    v_check := CASE v_conclusion WHEN 'success' THEN 'success' WHEN 'cancelled' THEN 'cancelled' ELSE 'failure' END;
    UPDATE public.execution_attempts a
    SET status = v_status, conclusion = left(v_conclusion, 64), completed_at = v_now, updated_at = v_now
    WHERE a.id = att.id;
    IF v_current AND run.status IN ('running', 'blocked') THEN
        UPDATE public.release_runs r SET status = v_status, completed_at = v_now, updated_at = v_now WHERE r.id = run.id;
    END IF;
    IF run.check_run_id IS NULL THEN
        RETURN QUERY SELECT 'finished'::text, run.id, att.id, NULL::bigint;
        RETURN;
    END IF;
    IF NOT v_current THEN
        RETURN QUERY SELECT 'finished'::text, run.id, att.id, NULL::bigint; -- an earlier attempt: the check run shows the current one
        RETURN;
    END IF;
    v_outbox := public.boardreadyops_release_run_enqueue_check_run(run.id, v_status, NULL, p_traceparent, v_now);
    RETURN QUERY SELECT 'completed'::text, run.id, att.id, v_outbox;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_finish(p_job_id bigint, p_worker text, p_check_run_name text, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(outcome text, release_run_id uuid, execution_attempt_id uuid, outbox_id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    j public.control_plane_jobs;
    i public.webhook_inbox;
    run public.release_runs;
    att public.execution_attempts;
    v_full_name text;
    v_workflow_run_id bigint;
    v_conclusion text;
    v_status text;
    v_check text;
    v_outbox bigint;
    v_run_attempt integer;
    v_known integer;
    v_url text;
    v_current boolean;
BEGIN
    IF p_check_run_name IS NULL OR length(p_check_run_name) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'check run name must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    j := public.boardreadyops_job_lock_leased(p_job_id, p_worker);
    SELECT * INTO i FROM public.webhook_inbox WHERE id = j.inbox_id;
    IF i.event IS DISTINCT FROM 'workflow_run' OR i.repository_id IS NULL THEN
        RAISE EXCEPTION 'job % is not a workflow_run delivery of a repository', p_job_id USING ERRCODE = 'BR005';
    END IF;
    v_workflow_run_id := (i.payload -> 'workflow_run' ->> 'id')::bigint;
    v_conclusion := coalesce(nullif(i.payload -> 'workflow_run' ->> 'conclusion', ''), 'unknown');

    SELECT a.* INTO att
    FROM public.execution_attempts a JOIN public.release_runs r ON r.id = a.release_run_id
    WHERE a.workflow_run_id = v_workflow_run_id AND r.repository_id = i.repository_id
    FOR UPDATE OF r, a SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'unmatched'::text, NULL::uuid, NULL::uuid, NULL::bigint;
        RETURN;
    END IF;
    SELECT * INTO run FROM public.release_runs r WHERE r.id = att.release_run_id;
    v_current := att.number = run.current_attempt;
    v_run_attempt := greatest(coalesce((i.payload -> 'workflow_run' ->> 'run_attempt')::integer, 1), 1);
    v_url := nullif(left(i.payload -> 'workflow_run' ->> 'html_url', 1024), '');
    SELECT w.workflow_run_attempt INTO v_known FROM public.execution_attempt_workflow_runs w WHERE w.execution_attempt_id = att.id;
    v_known := coalesce(v_known, 1);
    IF v_run_attempt < v_known THEN
        RETURN QUERY SELECT 'ignored'::text, run.id, att.id, NULL::bigint; -- an earlier run attempt's late event
        RETURN;
    END IF;
    INSERT INTO public.execution_attempt_workflow_runs AS w (execution_attempt_id, workflow_run_url, workflow_run_attempt, started_at, updated_at)
    VALUES (att.id, v_url, v_run_attempt, coalesce(att.dispatched_at, v_now), v_now)
    ON CONFLICT ON CONSTRAINT execution_attempt_workflow_runs_pkey DO UPDATE
    SET workflow_run_url = coalesce(EXCLUDED.workflow_run_url, w.workflow_run_url),
        workflow_run_attempt = EXCLUDED.workflow_run_attempt,
        started_at = CASE WHEN EXCLUDED.workflow_run_attempt > w.workflow_run_attempt THEN v_now ELSE w.started_at END,
        updated_at = v_now;
    IF v_run_attempt > v_known AND att.status IN ('succeeded', 'failed', 'cancelled') THEN
        -- Re-run from the Actions UI: the same workflow run, a new run attempt. The attempt (and the
        -- run, when the attempt is its current one) is running again until that run attempt ends.
        UPDATE public.execution_attempts a SET status = 'running', conclusion = NULL, completed_at = NULL, updated_at = v_now
        WHERE a.id = att.id RETURNING * INTO att;
        IF v_current AND run.status IN ('succeeded', 'failed', 'cancelled') THEN
            UPDATE public.release_runs r SET status = 'running', completed_at = NULL, updated_at = v_now
            WHERE r.id = run.id RETURNING * INTO run;
        END IF;
        IF i.action IS DISTINCT FROM 'completed' THEN
            IF v_current AND run.check_run_id IS NOT NULL THEN
                v_outbox := public.boardreadyops_release_run_enqueue_check_run(run.id, 'running',
                    format('The workflow run was re-run from GitHub Actions (run attempt %s); BoardReadyOps follows it.', v_run_attempt),
                    p_traceparent, v_now);
            END IF;
            RETURN QUERY SELECT 'followed'::text, run.id, att.id, v_outbox;
            RETURN;
        END IF;
    END IF;
    IF i.action IS DISTINCT FROM 'completed' OR att.status <> 'running' THEN
        RETURN QUERY SELECT 'ignored'::text, run.id, att.id, NULL::bigint;
        RETURN;
    END IF;

    v_status := CASE v_conclusion WHEN 'success' THEN 'succeeded' WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END;
    v_check := CASE v_conclusion WHEN 'success' THEN 'success' WHEN 'cancelled' THEN 'cancelled' ELSE 'failure' END;
    UPDATE public.execution_attempts a
    SET status = v_status, conclusion = left(v_conclusion, 64), completed_at = v_now, updated_at = v_now
    WHERE a.id = att.id;
    IF v_current AND run.status IN ('running', 'blocked') THEN
        UPDATE public.release_runs r SET status = v_status, completed_at = v_now, updated_at = v_now WHERE r.id = run.id;
    END IF;
    IF run.check_run_id IS NULL THEN
        RETURN QUERY SELECT 'finished'::text, run.id, att.id, NULL::bigint;
        RETURN;
    END IF;
    IF NOT v_current THEN
        RETURN QUERY SELECT 'finished'::text, run.id, att.id, NULL::bigint; -- an earlier attempt: the check run shows the current one
        RETURN;
    END IF;
    v_outbox := public.boardreadyops_release_run_enqueue_check_run(run.id, v_status, NULL, p_traceparent, v_now);
    RETURN QUERY SELECT 'completed'::text, run.id, att.id, v_outbox;
END;
$$;
-- +goose StatementEnd
