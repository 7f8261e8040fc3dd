-- Lifecycle enqueues only what a signed delivery asks for (issue 17 §3 c).
--
-- Until now lifecycle held EXECUTE on the generic boardreadyops_outbox_enqueue and INSERT and
-- UPDATE on release_runs and execution_attempts, and boardreadyops_release_run_create took the
-- repository, installation, ref, commit and workflow file as arguments: lifecycle could queue a
-- workflow dispatch (or any effect, with any payload) for any repository, workflow file and
-- installation. Now it writes release state only through two functions that take a job it holds
-- the lease of and build everything from stored state:
--
--   boardreadyops_release_run_create_from_push   the job's inbox row must be a push; repository,
--       installation, ref and commit are the delivery's (stored by ingest after verifying its
--       signature), the repository must be recorded under that installation (else no run is
--       created), and the workflow file
--       is the repository's setting, else the deployment default lifecycle passes;
--   boardreadyops_execution_attempt_finish       the job's inbox row must be a workflow_run; the
--       attempt is the one whose recorded workflow_run_id is the delivery's, in the delivery's
--       repository; the check run's completion is built from the run, the attempt and the
--       delivery's conclusion and URL.
--
-- Lifecycle keeps SELECT on the release tables and loses INSERT and UPDATE on them and on
-- repository_release_settings (it only reads settings), and EXECUTE on the generic enqueue and
-- on the argument-taking release-run creation (brops and the tests keep them through the admin
-- role and the test superuser). During a rolling upgrade, jobs that pods of the previous release
-- take for these two events fail on privileges and are retried; the new pods process them.
--
-- The functions follow docs/operations.md, "Rules for a new function".

-- +goose Up

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_release_run_create_from_push(
    p_job_id bigint, p_worker text, p_default_workflow_file text, p_check_run_name text,
    p_traceparent text DEFAULT NULL, p_now timestamptz DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    j public.control_plane_jobs;
    i public.webhook_inbox;
    repo public.repositories;
    v_workflow_file text;
    v_ref text;
    v_sha text;
    v_run uuid;
BEGIN
    IF p_check_run_name IS NULL OR length(p_check_run_name) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'check run name must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    j := public.boardreadyops_job_lock_leased(p_job_id, p_worker);
    SELECT * INTO i FROM public.webhook_inbox WHERE id = j.inbox_id;
    IF i.event IS DISTINCT FROM 'push' OR i.installation_id IS NULL OR i.repository_id IS NULL THEN
        RAISE EXCEPTION 'job % is not a push delivery of a repository', p_job_id USING ERRCODE = 'BR005';
    END IF;
    v_ref := i.payload -> 'push' ->> 'ref';
    v_sha := i.payload -> 'push' ->> 'after';
    -- A repository recorded under another installation (or not at all) gets no run: its
    -- installation_repositories change has not been applied yet, or the job is not what it seems.
    SELECT * INTO repo FROM public.repositories WHERE id = i.repository_id;
    IF NOT FOUND OR repo.installation_id <> i.installation_id THEN
        RETURN NULL;
    END IF;
    SELECT s.workflow_file INTO v_workflow_file FROM public.repository_release_settings s WHERE s.repository_id = repo.id;
    v_workflow_file := coalesce(v_workflow_file, p_default_workflow_file);

    INSERT INTO public.release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status, created_at, updated_at)
    VALUES (repo.id, i.installation_id, v_ref, v_sha, v_workflow_file, 'check_pending', v_now, v_now)
    ON CONFLICT ON CONSTRAINT release_runs_identity_key DO NOTHING
    RETURNING id INTO v_run;
    IF v_run IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO public.execution_attempts (release_run_id, number, created_at, updated_at) VALUES (v_run, 1, v_now, v_now);
    PERFORM public.boardreadyops_outbox_enqueue(
        'github.check_run.create', v_run, NULL, i.installation_id,
        jsonb_build_object(
            'release_run_id', v_run,
            'installation_id', i.installation_id,
            'repository_id', repo.id,
            'repository_full_name', repo.full_name,
            'head_sha', v_sha,
            'ref', v_ref,
            'tag', substr(v_ref, length('refs/tags/') + 1),
            'name', p_check_run_name,
            'external_id', v_run),
        p_traceparent, 10, v_now);
    RETURN v_run;
END;
$$;
-- +goose StatementEnd

-- Outcomes: 'unmatched' (no dispatched attempt has this workflow run in this repository yet, or
-- its dispatch completion holds it right now: SKIP LOCKED, as waiting could deadlock against that
-- completion's batch), 'ignored' (not a completion, or the attempt already finished), 'finished'
-- (no check run to complete; defensive), 'completed' (the check run's completion is enqueued).
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_execution_attempt_finish(
    p_job_id bigint, p_worker text, p_check_run_name text,
    p_traceparent text DEFAULT NULL, p_now timestamptz DEFAULT NULL)
RETURNS TABLE (outcome text, release_run_id uuid, execution_attempt_id uuid, outbox_id bigint)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
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
    IF i.action IS DISTINCT FROM 'completed' OR att.status <> 'running' THEN
        RETURN QUERY SELECT 'ignored'::text, run.id, att.id, NULL::bigint;
        RETURN;
    END IF;

    v_status := CASE v_conclusion WHEN 'success' THEN 'succeeded' WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END;
    v_check := CASE v_conclusion WHEN 'success' THEN 'success' WHEN 'cancelled' THEN 'cancelled' ELSE 'failure' END;
    UPDATE public.execution_attempts a
    SET status = v_status, conclusion = left(v_conclusion, 64), completed_at = v_now, updated_at = v_now
    WHERE a.id = att.id;
    IF att.number = run.current_attempt AND run.status = 'running' THEN
        UPDATE public.release_runs r SET status = v_status, completed_at = v_now, updated_at = v_now WHERE r.id = run.id;
    END IF;
    IF run.check_run_id IS NULL THEN
        RETURN QUERY SELECT 'finished'::text, run.id, att.id, NULL::bigint;
        RETURN;
    END IF;
    SELECT p.full_name INTO v_full_name FROM public.repositories p WHERE p.id = run.repository_id;
    v_outbox := public.boardreadyops_outbox_enqueue(
        'github.check_run.complete', run.id, att.id, run.installation_id,
        jsonb_build_object(
            'release_run_id', run.id,
            'execution_attempt_id', att.id,
            'attempt_number', att.number,
            'installation_id', run.installation_id,
            'repository_full_name', v_full_name,
            'check_run_id', run.check_run_id,
            'name', p_check_run_name,
            'conclusion', v_check,
            'workflow_run_id', v_workflow_run_id,
            'workflow_run_url', coalesce(i.payload -> 'workflow_run' ->> 'html_url', ''),
            'title', format('Release %s', v_check),
            'summary', format('Attempt %s: workflow %s run %s concluded %s.',
                              att.number, run.workflow_file, v_workflow_run_id, v_conclusion)),
        p_traceparent, 10, v_now);
    RETURN QUERY SELECT 'completed'::text, run.id, att.id, v_outbox;
END;
$$;
-- +goose StatementEnd

ALTER FUNCTION public.boardreadyops_release_run_create_from_push(bigint, text, text, text, text, timestamptz)
    OWNER TO boardreadyops_schema_owner;
ALTER FUNCTION public.boardreadyops_execution_attempt_finish(bigint, text, text, text, timestamptz)
    OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_release_run_create_from_push(bigint, text, text, text, text, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_execution_attempt_finish(bigint, text, text, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    public.boardreadyops_release_run_create_from_push(bigint, text, text, text, text, timestamptz),
    public.boardreadyops_execution_attempt_finish(bigint, text, text, text, timestamptz)
TO boardreadyops_lifecycle, boardreadyops_admin;

REVOKE EXECUTE ON FUNCTION
    public.boardreadyops_outbox_enqueue(text, uuid, uuid, bigint, jsonb, text, integer, timestamptz),
    public.boardreadyops_enqueue_control_plane_outbox(text, uuid, uuid, bigint, jsonb, text, integer, timestamptz),
    public.boardreadyops_release_run_create(bigint, bigint, text, text, text, text, text, timestamptz),
    public.boardreadyops_create_release_run(bigint, bigint, text, text, text, text, text, timestamptz)
FROM boardreadyops_lifecycle;
REVOKE INSERT, UPDATE ON public.release_runs, public.execution_attempts, public.repository_release_settings
FROM boardreadyops_lifecycle;

-- +goose Down
GRANT INSERT, UPDATE ON public.release_runs, public.execution_attempts, public.repository_release_settings
TO boardreadyops_lifecycle;
-- Revoked and granted again in the original order, so that the ACLs read as before.
REVOKE EXECUTE ON FUNCTION
    public.boardreadyops_outbox_enqueue(text, uuid, uuid, bigint, jsonb, text, integer, timestamptz),
    public.boardreadyops_enqueue_control_plane_outbox(text, uuid, uuid, bigint, jsonb, text, integer, timestamptz),
    public.boardreadyops_release_run_create(bigint, bigint, text, text, text, text, text, timestamptz),
    public.boardreadyops_create_release_run(bigint, bigint, text, text, text, text, text, timestamptz)
FROM boardreadyops_admin;
GRANT EXECUTE ON FUNCTION
    public.boardreadyops_outbox_enqueue(text, uuid, uuid, bigint, jsonb, text, integer, timestamptz),
    public.boardreadyops_enqueue_control_plane_outbox(text, uuid, uuid, bigint, jsonb, text, integer, timestamptz),
    public.boardreadyops_release_run_create(bigint, bigint, text, text, text, text, text, timestamptz),
    public.boardreadyops_create_release_run(bigint, bigint, text, text, text, text, text, timestamptz)
TO boardreadyops_lifecycle;
GRANT EXECUTE ON FUNCTION
    public.boardreadyops_outbox_enqueue(text, uuid, uuid, bigint, jsonb, text, integer, timestamptz),
    public.boardreadyops_enqueue_control_plane_outbox(text, uuid, uuid, bigint, jsonb, text, integer, timestamptz),
    public.boardreadyops_release_run_create(bigint, bigint, text, text, text, text, text, timestamptz),
    public.boardreadyops_create_release_run(bigint, bigint, text, text, text, text, text, timestamptz)
TO boardreadyops_admin;
DROP FUNCTION public.boardreadyops_execution_attempt_finish(bigint, text, text, text, timestamptz);
DROP FUNCTION public.boardreadyops_release_run_create_from_push(bigint, text, text, text, text, timestamptz);
