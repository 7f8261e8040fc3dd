-- A release's workflow run that ran another commit than its release run's fails the run.
--
-- The dispatcher reads a release tag's commit before each dispatch (docs/dispatcher.md, "A tag
-- moved or deleted"), but the read and the dispatch are two requests: a tag moved between them is
-- dispatched, and GitHub runs the workflow at the new commit. Its workflow_run carries that commit
-- as head_sha. boardreadyops_execution_attempt_finish now compares it with the run's commit: when
-- they differ, the attempt and the run are failed whatever the workflow concluded, and the check
-- run says which commit ran (outcome other_commit, which lifecycle logs as a warning). The batch
-- form leaves such a delivery to the single function. A delivery without a SHA-shaped head_sha is
-- finished as before.
--
-- Only functions change: no table lock; a previous release's lifecycle calls them unchanged (and
-- logs the new outcome as a finished attempt).

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
    v_head text;
    v_notice text;
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
    -- The workflow ran another commit than the run's (its tag moved between the dispatcher's
    -- tag read and the dispatch): whatever it concluded, it did not release this run's commit.
    v_head := lower(i.payload -> 'workflow_run' ->> 'head_sha');
    IF v_head ~ '^([0-9a-f]{40}|[0-9a-f]{64})$' AND v_head IS DISTINCT FROM lower(run.head_sha) THEN
        v_status := 'failed';
        v_check := 'failure';
        v_notice := format('The workflow ran commit %s, not %s, the commit this release run was started for (its tag was moved just before the dispatch; it concluded %s), so this release is failed. Push a new tag to release that commit.',
                           v_head, run.head_sha, v_conclusion);
    END IF;
    UPDATE public.execution_attempts a
    SET status = v_status, conclusion = left(v_conclusion, 64), completed_at = v_now, updated_at = v_now
    WHERE a.id = att.id;
    IF v_current AND run.status IN ('running', 'blocked') THEN
        UPDATE public.release_runs r SET status = v_status, completed_at = v_now, updated_at = v_now WHERE r.id = run.id;
    END IF;
    IF run.check_run_id IS NULL THEN
        RETURN QUERY SELECT CASE WHEN v_notice IS NULL THEN 'finished' ELSE 'other_commit' END, run.id, att.id, NULL::bigint;
        RETURN;
    END IF;
    IF NOT v_current THEN
        -- An earlier attempt: the check run shows the current one.
        RETURN QUERY SELECT CASE WHEN v_notice IS NULL THEN 'finished' ELSE 'other_commit' END, run.id, att.id, NULL::bigint;
        RETURN;
    END IF;
    v_outbox := public.boardreadyops_release_run_enqueue_check_run(run.id, v_status, v_notice, p_traceparent, v_now);
    RETURN QUERY SELECT CASE WHEN v_notice IS NULL THEN 'completed' ELSE 'other_commit' END, run.id, att.id, v_outbox;
END;
$$;

-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_finish_batch(p_job_ids bigint[], p_worker text, p_check_run_name text, p_traceparents text[], p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(job_id bigint, outcome text, release_run_id uuid, execution_attempt_id uuid, outbox_id bigint)
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
               nullif(left(i.payload -> 'workflow_run' ->> 'html_url', 1024), '') AS url,
               lower(i.payload -> 'workflow_run' ->> 'head_sha') AS head_sha
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
          -- A workflow run of another commit is the single function's (00079).
          AND (f.head_sha IS NULL OR f.head_sha = lower(r.head_sha))
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
    -- The check runs' final updates: built by the one function that builds them, which returns
    -- one row per run (the runs are distinct: jobs naming one run twice were left out).
    RETURN QUERY
    SELECT x.job_id, 'completed'::text, x.run_id, x.attempt_id, e.update_id
    FROM unnest(v_jobs, v_runs, v_attempts) WITH ORDINALITY AS x(job_id, run_id, attempt_id, n)
    JOIN public.boardreadyops_release_run_enqueue_check_runs(v_runs, v_status, array_fill(NULL::text, ARRAY[cardinality(v_runs)]), v_trace, v_now)
         AS e(run_id, update_id) ON e.run_id = x.run_id
    ORDER BY x.n;
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
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_finish_batch(p_job_ids bigint[], p_worker text, p_check_run_name text, p_traceparents text[], p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(job_id bigint, outcome text, release_run_id uuid, execution_attempt_id uuid, outbox_id bigint)
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
    -- The check runs' final updates: built by the one function that builds them, which returns
    -- one row per run (the runs are distinct: jobs naming one run twice were left out).
    RETURN QUERY
    SELECT x.job_id, 'completed'::text, x.run_id, x.attempt_id, e.update_id
    FROM unnest(v_jobs, v_runs, v_attempts) WITH ORDINALITY AS x(job_id, run_id, attempt_id, n)
    JOIN public.boardreadyops_release_run_enqueue_check_runs(v_runs, v_status, array_fill(NULL::text, ARRAY[cardinality(v_runs)]), v_trace, v_now)
         AS e(run_id, update_id) ON e.run_id = x.run_id
    ORDER BY x.n;
END;
$$;

-- +goose StatementEnd
