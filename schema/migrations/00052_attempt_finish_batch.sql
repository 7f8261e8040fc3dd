-- Completed workflow runs of one lifecycle batch finish their attempts together (issue 25,
-- docs/performance.md "Runs advanced in sets").
--
-- boardreadyops_execution_attempt_finish ran once per workflow_run job: the job locked, its
-- delivery read, the attempt matched and locked with its run, the run's page stored, the attempt
-- and the run finished and the check run's final update enqueued, about twenty statements per
-- run. The batch makes the same writes for every job of a lifecycle batch with one statement
-- each; only the check-run update is still enqueued per run, by
-- boardreadyops_release_run_enqueue_check_run itself, so that its payload is built in one place.
-- It returns (job_id, 'completed', run, attempt, check-run update) for each job it carried out,
-- as the single function returns for that job.
--
-- It carries out only the common case: a job leased by p_worker whose delivery is a
-- 'completed' workflow_run of a repository, matched by its workflow run id to the current,
-- 'running' attempt of a 'running' or 'blocked' run of that repository with a check run, at the
-- run attempt already known (no re-run). Runs or attempts another transaction holds are skipped
-- (SKIP LOCKED, as alone). A job it leaves out is handled alone by the single-row function, in
-- the same transaction, whose outcome ('unmatched', 'ignored', 'followed', 'finished') or error
-- is its exact one. Jobs of one call that name the same release run (a redelivery, run attempts
-- out of order, two attempts) are all left out: alone, in their order, each sees what the one
-- before it did. The caller passes only jobs it may finish ahead of the jobs between them
-- (services/lifecycle: completed workflow runs, with only pushes in between).
--
-- Only a new function: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_execution_attempt_finish_batch(p_job_ids bigint[], p_worker text, p_check_run_name text, p_traceparents text[], p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
    RETURNS TABLE (job_id bigint, outcome text, release_run_id uuid, execution_attempt_id uuid, outbox_id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_now        timestamptz := public.boardreadyops_clock_now(p_now);
    v_jobs       bigint[];
    v_runs       uuid[];
    v_attempts   uuid[];
    v_status     text[];
    v_conclusion text[];
    v_urls       text[];
    v_run_att    integer[];
    v_started    timestamptz[];
    v_trace      text[];
BEGIN
    IF p_check_run_name IS NULL OR length(p_check_run_name) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'check run name must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    IF p_job_ids IS NULL OR p_traceparents IS NULL OR cardinality(p_job_ids) <> cardinality(p_traceparents)
       OR cardinality(p_job_ids) > 10000 THEN
        RAISE EXCEPTION 'between 0 and 10000 job ids per call, each with its traceparent' USING ERRCODE = '22023';
    END IF;
    IF (SELECT count(DISTINCT x) FROM unnest(p_job_ids) AS x) <> cardinality(p_job_ids) THEN
        RAISE EXCEPTION 'a job id more than once in one call' USING ERRCODE = '22023';
    END IF;
    WITH job AS (
        SELECT j.id, j.inbox_id, t.traceparent
        FROM unnest(p_job_ids, p_traceparents) AS t(id, traceparent)
        JOIN public.control_plane_jobs j ON j.id = t.id
        -- No `status = 'leased'`: it would match control_plane_jobs_lease_idx and read every
        -- worker's leased jobs (the row rules make a lease owner mean 'leased').
        WHERE j.lease_owner = p_worker
        ORDER BY j.id
        FOR UPDATE OF j
    ), delivery AS (
        SELECT job.id AS job_id, job.traceparent, i.repository_id,
               (i.payload -> 'workflow_run' ->> 'id')::bigint AS workflow_run_id,
               coalesce(nullif(i.payload -> 'workflow_run' ->> 'conclusion', ''), 'unknown') AS conclusion,
               greatest(coalesce((i.payload -> 'workflow_run' ->> 'run_attempt')::integer, 1), 1) AS run_attempt,
               nullif(left(i.payload -> 'workflow_run' ->> 'html_url', 1024), '') AS url
        FROM job
        JOIN public.webhook_inbox i ON i.id = job.inbox_id
        WHERE i.event IS NOT DISTINCT FROM 'workflow_run' AND i.action IS NOT DISTINCT FROM 'completed'
          AND i.repository_id IS NOT NULL
    ), found AS MATERIALIZED (
        -- The attempt by its workflow run id (unique), then both rows locked by primary key, as
        -- the single function finds them (00037). Materialized, and the repository compared with
        -- IS NOT DISTINCT FROM, which no index serves: a generic plan may not reach the runs
        -- through the repository's index (every run of the repository, per delivery).
        SELECT d.*, x.id AS attempt_id, x.release_run_id AS run_id,
               count(*) OVER (PARTITION BY x.release_run_id) AS named
        FROM delivery d
        JOIN public.execution_attempts x ON x.workflow_run_id = d.workflow_run_id
    ), matched AS (
        SELECT f.*, a.dispatched_at, coalesce(w.workflow_run_attempt, 1) AS known
        FROM found f
        JOIN public.execution_attempts a ON a.id = f.attempt_id
        JOIN public.release_runs r ON r.id = f.run_id
        LEFT JOIN public.execution_attempt_workflow_runs w ON w.execution_attempt_id = a.id
        WHERE f.named = 1 AND r.repository_id IS NOT DISTINCT FROM f.repository_id AND a.workflow_run_id = f.workflow_run_id
          AND a.status = 'running' AND a.number = r.current_attempt
          AND r.status IN ('running', 'blocked') AND r.check_run_id IS NOT NULL
        ORDER BY r.id
        FOR UPDATE OF r, a SKIP LOCKED
    ), one AS (
        -- A run attempt newer than the known one is a re-run that the single function follows.
        SELECT m.* FROM matched m WHERE m.run_attempt = m.known
    )
    SELECT array_agg(o.job_id ORDER BY o.job_id), array_agg(o.run_id ORDER BY o.job_id), array_agg(o.attempt_id ORDER BY o.job_id),
           array_agg(CASE o.conclusion WHEN 'success' THEN 'succeeded' WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END ORDER BY o.job_id),
           array_agg(left(o.conclusion, 64) ORDER BY o.job_id), array_agg(o.url ORDER BY o.job_id),
           array_agg(o.run_attempt ORDER BY o.job_id), array_agg(coalesce(o.dispatched_at, v_now) ORDER BY o.job_id),
           array_agg(o.traceparent ORDER BY o.job_id)
    INTO v_jobs, v_runs, v_attempts, v_status, v_conclusion, v_urls, v_run_att, v_started, v_trace
    FROM one o;
    IF v_jobs IS NULL THEN
        RETURN;
    END IF;

    INSERT INTO public.execution_attempt_workflow_runs AS w (execution_attempt_id, workflow_run_url, workflow_run_attempt, started_at, updated_at)
    SELECT x.id, x.url, x.run_attempt, x.started_at, v_now
    FROM unnest(v_attempts, v_urls, v_run_att, v_started) AS x(id, url, run_attempt, started_at)
    ON CONFLICT ON CONSTRAINT execution_attempt_workflow_runs_pkey DO UPDATE
    SET workflow_run_url = coalesce(EXCLUDED.workflow_run_url, w.workflow_run_url),
        workflow_run_attempt = EXCLUDED.workflow_run_attempt,
        started_at = CASE WHEN EXCLUDED.workflow_run_attempt > w.workflow_run_attempt THEN v_now ELSE w.started_at END,
        updated_at = v_now;
    UPDATE public.execution_attempts a
    SET status = x.status, conclusion = x.conclusion, completed_at = v_now, updated_at = v_now
    FROM unnest(v_attempts, v_status, v_conclusion) AS x(id, status, conclusion)
    WHERE a.id = x.id;
    UPDATE public.release_runs r SET status = x.status, completed_at = v_now, updated_at = v_now
    FROM unnest(v_runs, v_status) AS x(id, status)
    WHERE r.id = x.id;
    -- The check run's final update: its payload is built by the one function that builds it.
    RETURN QUERY
    SELECT x.job_id, 'completed'::text, x.run_id, x.attempt_id,
           public.boardreadyops_release_run_enqueue_check_run(x.run_id, x.status, NULL, x.traceparent, v_now)
    FROM unnest(v_jobs, v_runs, v_attempts, v_status, v_trace) WITH ORDINALITY AS x(job_id, run_id, attempt_id, status, traceparent, n)
    ORDER BY x.n;
END;
$$;
-- +goose StatementEnd
ALTER FUNCTION public.boardreadyops_execution_attempt_finish_batch(bigint[], text, text, text[], timestamptz) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_execution_attempt_finish_batch(bigint[], text, text, text[], timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_execution_attempt_finish_batch(bigint[], text, text, text[], timestamptz) TO boardreadyops_lifecycle, boardreadyops_admin;

-- +goose Down
DROP FUNCTION public.boardreadyops_execution_attempt_finish_batch(bigint[], text, text, text[], timestamptz);
