-- A quiet workflow run read back from GitHub that ran another commit than its release run's fails
-- the run, as its workflow_run completion does since 00079.
--
-- boardreadyops_outbox_complete_workflow_run_read_at is the read's completion with the run's
-- head_sha as GitHub answered it (docs/dispatcher.md, "A tag moved or deleted"): a commit other
-- than the release run's fails the attempt and the run whatever the workflow concluded, with a
-- check-run update naming the commit that ran, and returns other_commit. The previous name calls it
-- without a commit, so a previous release's dispatcher works unchanged (and compares nothing). A
-- new name rather than an overload: an eighth parameter beside the old signature's defaulted
-- p_now would make the previous release's seven-argument call ambiguous.
--
-- Only functions change: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_complete_workflow_run_read_at(p_id bigint, p_worker text, p_status text, p_conclusion text, p_run_attempt integer, p_html_url text, p_head_sha text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS text
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
ALTER FUNCTION public.boardreadyops_outbox_complete_workflow_run_read_at(bigint, text, text, text, integer, text, text, timestamptz) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_outbox_complete_workflow_run_read_at(bigint, text, text, text, integer, text, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_complete_workflow_run_read_at(bigint, text, text, text, integer, text, text, timestamptz) TO boardreadyops_dispatcher, boardreadyops_admin;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_workflow_run_read(p_id bigint, p_worker text, p_status text, p_conclusion text, p_run_attempt integer, p_html_url text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    -- A previous release's dispatcher: no commit to compare.
    RETURN public.boardreadyops_outbox_complete_workflow_run_read_at(p_id, p_worker, p_status, p_conclusion, p_run_attempt, p_html_url, NULL, p_now);
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_workflow_run_read(p_id bigint, p_worker text, p_status text, p_conclusion text, p_run_attempt integer, p_html_url text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS text
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
BEGIN
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, 'github.workflow_run.read');
    SELECT * INTO run FROM public.release_runs WHERE id = r.release_run_id FOR UPDATE;
    SELECT * INTO att FROM public.execution_attempts WHERE id = r.execution_attempt_id FOR UPDATE;
    IF att.status <> 'running' OR att.workflow_run_id IS DISTINCT FROM (r.payload ->> 'workflow_run_id')::bigint THEN
        v_outcome := 'stale'; -- finished meanwhile (its webhook came after all), or not this run
    ELSIF p_status = 'completed' THEN
        v_conclusion := coalesce(nullif(left(p_conclusion, 64), ''), 'unknown');
        v_status := CASE v_conclusion WHEN 'success' THEN 'succeeded' WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END;
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
            PERFORM public.boardreadyops_release_run_enqueue_check_run(run.id, v_status,
                'The conclusion was read back from GitHub: its workflow_run webhook was never received.', r.traceparent, v_now);
        END IF;
        v_outcome := 'finished';
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
DROP FUNCTION public.boardreadyops_outbox_complete_workflow_run_read_at(bigint, text, text, text, integer, text, text, timestamptz);
