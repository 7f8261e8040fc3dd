-- A quiet run read back from GitHub is not finished by an older run attempt than one already
-- recorded (docs/lifecycle.md, "A quiet run is read back").
--
-- boardreadyops_outbox_complete_workflow_run_read_at finished a running attempt with whatever run
-- attempt GitHub's answer carried. When someone re-ran the workflow run in GitHub Actions between
-- the GET and its commit (or a lagging replica answered it), and lifecycle had meanwhile recorded
-- run attempt 2 as requested, the read finished the attempt with run attempt 1's conclusion; run
-- attempt 2's completion then found the attempt finished and was ignored, so a re-run that
-- succeeded left the release failed for good. A workflow_run webhook of an older run attempt was
-- already ignored (execution_attempt_finish); the read now completes as stale the same way, and
-- the next quiet period reads again.
--
-- Only a function changes: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_workflow_run_read_at(p_id bigint, p_worker text, p_status text, p_conclusion text, p_run_attempt integer, p_html_url text, p_head_sha text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
    att public.execution_attempts;
    run public.release_runs;
    v_conclusion text;
    v_status text;
    v_outcome text := 'not_finished';
    v_head text := lower(p_head_sha);
    v_notice text := 'The conclusion was read back from GitHub: its workflow_run webhook was never received.';
BEGIN
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, 'github.workflow_run.read');
    SELECT * INTO run FROM public.release_runs WHERE id = r.release_run_id FOR UPDATE;
    SELECT * INTO att FROM public.execution_attempts WHERE id = r.execution_attempt_id FOR UPDATE;
    IF att.status <> 'running' OR att.workflow_run_id IS DISTINCT FROM (r.payload ->> 'workflow_run_id')::bigint THEN
        v_outcome := 'stale'; -- finished meanwhile (its webhook came after all), or not this run
    ELSIF p_run_attempt IS NOT NULL AND p_run_attempt < (SELECT w.workflow_run_attempt FROM public.execution_attempt_workflow_runs w
                                                         WHERE w.execution_attempt_id = att.id) THEN
        -- An older run attempt than one already recorded (00087): a re-run of the workflow run
        -- started after GitHub answered the read, or a lagging replica answered it. Finishing the
        -- attempt with it would make the newer run attempt's completion, ignored for a finished
        -- attempt, unable to finish it, as the webhook of an older run attempt is ignored.
        v_outcome := 'stale';
    ELSIF p_status = 'completed' THEN
        v_conclusion := coalesce(nullif(left(p_conclusion, 64), ''), 'unknown');
        v_status := CASE v_conclusion WHEN 'success' THEN 'succeeded' WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END;
        -- Another commit than the run's ran (its tag moved just before the dispatch): failed,
        -- whatever it concluded, as boardreadyops_execution_attempt_finish decides (00079).
        IF v_head ~ '^([0-9a-f]{40}|[0-9a-f]{64})$' AND v_head IS DISTINCT FROM lower(run.head_sha) THEN
            v_status := 'failed';
            v_notice := format('The conclusion was read back from GitHub: its workflow_run webhook was never received. The workflow ran commit %s, not %s, the commit this release run was started for (its tag was moved just before the dispatch; it concluded %s), so this release is failed. Push a new tag to release that commit.',
                               v_head, run.head_sha, v_conclusion);
            v_outcome := 'other_commit';
        END IF;
        INSERT INTO public.execution_attempt_workflow_runs AS w (execution_attempt_id, workflow_run_url, workflow_run_attempt, started_at, updated_at)
        VALUES (att.id, CASE WHEN p_html_url ~ '^https?://' AND length(p_html_url) <= 1024 THEN p_html_url END,
                least(greatest(coalesce(p_run_attempt, 1), 1), 1000), att.dispatched_at, v_now)
        ON CONFLICT ON CONSTRAINT execution_attempt_workflow_runs_pkey DO UPDATE
        SET workflow_run_url = coalesce(EXCLUDED.workflow_run_url, w.workflow_run_url),
            workflow_run_attempt = greatest(w.workflow_run_attempt, EXCLUDED.workflow_run_attempt), updated_at = v_now;
        UPDATE public.execution_attempts
        SET status = v_status, conclusion = v_conclusion, completed_at = v_now, updated_at = v_now
        WHERE id = att.id;
        IF att.number = run.current_attempt THEN
            IF run.status IN ('running', 'blocked') THEN
                UPDATE public.release_runs SET status = v_status, completed_at = v_now, updated_at = v_now WHERE id = run.id;
            END IF;
            PERFORM public.boardreadyops_release_run_enqueue_check_run(run.id, v_status, v_notice, r.traceparent, v_now);
        END IF;
        v_outcome := CASE WHEN v_outcome = 'other_commit' THEN v_outcome ELSE 'finished' END;
    END IF;
    UPDATE public.control_plane_outbox
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL, last_error = NULL,
        result = jsonb_build_object('workflow_run_status', left(p_status, 64), 'conclusion', left(p_conclusion, 64),
                                    'outcome', v_outcome),
        updated_at = v_now
    WHERE id = p_id;
    RETURN v_outcome;
END;
$$;

-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_workflow_run_read_at(p_id bigint, p_worker text, p_status text, p_conclusion text, p_run_attempt integer, p_html_url text, p_head_sha text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
    att public.execution_attempts;
    run public.release_runs;
    v_conclusion text;
    v_status text;
    v_outcome text := 'not_finished';
    v_head text := lower(p_head_sha);
    v_notice text := 'The conclusion was read back from GitHub: its workflow_run webhook was never received.';
BEGIN
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, 'github.workflow_run.read');
    SELECT * INTO run FROM public.release_runs WHERE id = r.release_run_id FOR UPDATE;
    SELECT * INTO att FROM public.execution_attempts WHERE id = r.execution_attempt_id FOR UPDATE;
    IF att.status <> 'running' OR att.workflow_run_id IS DISTINCT FROM (r.payload ->> 'workflow_run_id')::bigint THEN
        v_outcome := 'stale'; -- finished meanwhile (its webhook came after all), or not this run
    ELSIF p_status = 'completed' THEN
        v_conclusion := coalesce(nullif(left(p_conclusion, 64), ''), 'unknown');
        v_status := CASE v_conclusion WHEN 'success' THEN 'succeeded' WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END;
        -- Another commit than the run's ran (its tag moved just before the dispatch): failed,
        -- whatever it concluded, as boardreadyops_execution_attempt_finish decides (00079).
        IF v_head ~ '^([0-9a-f]{40}|[0-9a-f]{64})$' AND v_head IS DISTINCT FROM lower(run.head_sha) THEN
            v_status := 'failed';
            v_notice := format('The conclusion was read back from GitHub: its workflow_run webhook was never received. The workflow ran commit %s, not %s, the commit this release run was started for (its tag was moved just before the dispatch; it concluded %s), so this release is failed. Push a new tag to release that commit.',
                               v_head, run.head_sha, v_conclusion);
            v_outcome := 'other_commit';
        END IF;
        INSERT INTO public.execution_attempt_workflow_runs AS w (execution_attempt_id, workflow_run_url, workflow_run_attempt, started_at, updated_at)
        VALUES (att.id, CASE WHEN p_html_url ~ '^https?://' AND length(p_html_url) <= 1024 THEN p_html_url END,
                least(greatest(coalesce(p_run_attempt, 1), 1), 1000), att.dispatched_at, v_now)
        ON CONFLICT ON CONSTRAINT execution_attempt_workflow_runs_pkey DO UPDATE
        SET workflow_run_url = coalesce(EXCLUDED.workflow_run_url, w.workflow_run_url),
            workflow_run_attempt = greatest(w.workflow_run_attempt, EXCLUDED.workflow_run_attempt), updated_at = v_now;
        UPDATE public.execution_attempts
        SET status = v_status, conclusion = v_conclusion, completed_at = v_now, updated_at = v_now
        WHERE id = att.id;
        IF att.number = run.current_attempt THEN
            IF run.status IN ('running', 'blocked') THEN
                UPDATE public.release_runs SET status = v_status, completed_at = v_now, updated_at = v_now WHERE id = run.id;
            END IF;
            PERFORM public.boardreadyops_release_run_enqueue_check_run(run.id, v_status, v_notice, r.traceparent, v_now);
        END IF;
        v_outcome := CASE WHEN v_outcome = 'other_commit' THEN v_outcome ELSE 'finished' END;
    END IF;
    UPDATE public.control_plane_outbox
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL, last_error = NULL,
        result = jsonb_build_object('workflow_run_status', left(p_status, 64), 'conclusion', left(p_conclusion, 64),
                                    'outcome', v_outcome),
        updated_at = v_now
    WHERE id = p_id;
    RETURN v_outcome;
END;
$$;

-- +goose StatementEnd
