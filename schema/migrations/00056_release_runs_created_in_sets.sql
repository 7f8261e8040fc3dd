-- Release runs of one lifecycle batch's tag pushes are created by one call (issue 25,
-- docs/performance.md "Check-run updates and release runs in sets").
--
-- boardreadyops_release_run_create_from_push ran once per push job: the job locked, its delivery
-- read, the repository and its settings read, the run, its first attempt and its check-run
-- creation inserted, about ten statements per run (in a 50,000-run burst, a fifth of
-- PostgreSQL's statement time). The batch makes the same writes for every push job of a
-- lifecycle batch with one statement each, and returns (job, run) for every job it was given, in
-- order: no run when the tag at that commit has its run already (another job of the call
-- included: the first job in the given order creates it, as alone), or when the repository is
-- recorded under another installation.
--
-- Every job must be leased by p_worker and be a push delivery of a repository, else the call
-- raises and writes nothing: lifecycle calls it under a savepoint after its own checks (the tag,
-- the repository's settings) and then handles each job alone, for its exact error.
--
-- Only a new function: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_release_run_create_from_push_batch(p_job_ids bigint[], p_worker text, p_default_workflow_file text, p_check_run_name text, p_traceparents text[], p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
    RETURNS TABLE (job_id bigint, release_run_id uuid)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET jit TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
    v_now   timestamptz := public.boardreadyops_clock_now(p_now);
    v_bad   bigint;
    v_jobs  bigint[];
    v_runs  uuid[];
    v_trace text[];
BEGIN
    IF p_check_run_name IS NULL OR length(p_check_run_name) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'check run name must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    IF p_job_ids IS NULL OR p_traceparents IS NULL OR cardinality(p_job_ids) <> cardinality(p_traceparents)
       OR cardinality(p_job_ids) > 10000 OR array_position(p_job_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'between 0 and 10000 job ids per call, each with its traceparent' USING ERRCODE = '22023';
    END IF;
    IF (SELECT count(DISTINCT x) <> count(x) FROM unnest(p_job_ids) AS x) THEN
        RAISE EXCEPTION 'a job id more than once in one call' USING ERRCODE = '22023';
    END IF;
    -- The jobs locked in id order, as alone each is locked first; the first that is not a leased
    -- push delivery of a repository fails the call. No `status = 'leased'` in the scan: it would
    -- match control_plane_jobs_lease_idx and read every worker's leased jobs.
    WITH job AS (
        SELECT j.id, j.inbox_id, j.status, j.lease_owner
        FROM unnest(p_job_ids) AS t(id)
        JOIN public.control_plane_jobs j ON j.id = t.id
        ORDER BY j.id
        FOR UPDATE OF j
    ), checked AS (
        SELECT job.id
        FROM job
        LEFT JOIN public.webhook_inbox i ON i.id = job.inbox_id
        WHERE job.status IS NOT DISTINCT FROM 'leased' AND job.lease_owner IS NOT DISTINCT FROM p_worker
          AND i.event IS NOT DISTINCT FROM 'push' AND i.installation_id IS NOT NULL AND i.repository_id IS NOT NULL
    )
    SELECT t.id INTO v_bad
    FROM unnest(p_job_ids) WITH ORDINALITY AS t(id, n)
    WHERE t.id NOT IN (SELECT c.id FROM checked c)
    ORDER BY t.n
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'job % is not a push delivery of a repository leased by worker %', v_bad, p_worker USING ERRCODE = 'BR005';
    END IF;

    -- The runs, in the order given. A repository recorded under another installation (or not at
    -- all) gets none; of two jobs naming one tag at one commit only the first may create it.
    WITH push AS (
        SELECT t.n, t.job_id, t.traceparent, i.installation_id, i.repository_id,
               i.payload -> 'push' ->> 'ref' AS ref, i.payload -> 'push' ->> 'after' AS sha
        FROM unnest(p_job_ids, p_traceparents) WITH ORDINALITY AS t(job_id, traceparent, n)
        JOIN public.control_plane_jobs j ON j.id = t.job_id
        JOIN public.webhook_inbox i ON i.id = j.inbox_id
    ), target AS (
        -- Primary-key probes throughout (a LATERAL subquery with a LIMIT is never flattened into a
        -- join, so a generic plan made on small tables cannot scan them whole).
        SELECT p.*,
               -- The repository's setting, else its installation's default (00024), else the deployment's.
               coalesce(s.workflow_file, d.workflow_file, p_default_workflow_file) AS workflow_file,
               row_number() OVER (PARTITION BY p.repository_id, p.ref, p.sha ORDER BY p.n) AS nth
        FROM push p
        JOIN LATERAL (
            SELECT r.id FROM public.repositories r WHERE r.id = p.repository_id AND r.installation_id = p.installation_id LIMIT 1
        ) r ON true
        LEFT JOIN LATERAL (
            SELECT x.workflow_file FROM public.repository_release_settings x WHERE x.repository_id = p.repository_id LIMIT 1
        ) s ON true
        LEFT JOIN LATERAL (
            SELECT x.workflow_file FROM public.installation_release_settings x WHERE x.installation_id = p.installation_id LIMIT 1
        ) d ON true
    ), created AS (
        INSERT INTO public.release_runs AS r (repository_id, installation_id, ref, head_sha, workflow_file, status, created_at, updated_at)
        SELECT t.repository_id, t.installation_id, t.ref, t.sha, t.workflow_file, 'check_pending', v_now, v_now
        FROM target t
        WHERE t.nth = 1
        ORDER BY t.n
        ON CONFLICT ON CONSTRAINT release_runs_identity_key DO NOTHING
        RETURNING r.id, r.repository_id, r.ref, r.head_sha
    )
    SELECT array_agg(t.job_id ORDER BY t.n), array_agg(c.id ORDER BY t.n), array_agg(t.traceparent ORDER BY t.n)
    INTO v_jobs, v_runs, v_trace
    FROM created c
    JOIN target t ON t.nth = 1 AND t.repository_id = c.repository_id AND t.ref = c.ref AND t.sha = c.head_sha;

    IF v_runs IS NOT NULL THEN
        INSERT INTO public.execution_attempts (release_run_id, number, created_at, updated_at)
        SELECT x.id, 1, v_now, v_now FROM unnest(v_runs) WITH ORDINALITY AS x(id, n) ORDER BY x.n;
        -- The check run's creation, with boardreadyops_outbox_enqueue's key and conflict rule.
        INSERT INTO public.control_plane_outbox (
            effect_type, idempotency_key, payload, max_attempts, available_at,
            release_run_id, execution_attempt_id, installation_id, traceparent, created_at, updated_at)
        SELECT 'github.check_run.create', 'github.check_run.create:' || r.id::text,
               jsonb_build_object(
                   'release_run_id', r.id,
                   'installation_id', r.installation_id,
                   'repository_id', p.id,
                   'repository_full_name', p.full_name,
                   'head_sha', r.head_sha,
                   'ref', r.ref,
                   'tag', substr(r.ref, length('refs/tags/') + 1),
                   'name', p_check_run_name,
                   'external_id', r.id,
                   'dispatch_paused', public.boardreadyops_outbox_dispatch_pause_reason(r.installation_id)),
               10, v_now, r.id, NULL, r.installation_id, x.traceparent, v_now, v_now
        FROM unnest(v_runs, v_trace) WITH ORDINALITY AS x(id, traceparent, n)
        CROSS JOIN LATERAL (SELECT r.* FROM public.release_runs r WHERE r.id = x.id LIMIT 1) r
        CROSS JOIN LATERAL (SELECT p.id, p.full_name FROM public.repositories p WHERE p.id = r.repository_id LIMIT 1) p
        ORDER BY x.n
        ON CONFLICT (release_run_id, effect_type, execution_attempt_id, generation) DO NOTHING;
    END IF;

    RETURN QUERY
    SELECT t.id, x.run
    FROM unnest(p_job_ids) WITH ORDINALITY AS t(id, n)
    LEFT JOIN unnest(v_jobs, v_runs) AS x(job, run) ON x.job = t.id
    ORDER BY t.n;
END;
$$;
-- +goose StatementEnd
ALTER FUNCTION public.boardreadyops_release_run_create_from_push_batch(bigint[], text, text, text, text[], timestamptz) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_release_run_create_from_push_batch(bigint[], text, text, text, text[], timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_release_run_create_from_push_batch(bigint[], text, text, text, text[], timestamptz) TO boardreadyops_lifecycle, boardreadyops_admin;

-- +goose Down
DROP FUNCTION public.boardreadyops_release_run_create_from_push_batch(bigint[], text, text, text, text[], timestamptz);
