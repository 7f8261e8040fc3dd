-- A release run's commit is the tagged commit, not an annotated tag's object (docs/lifecycle.md,
-- "Releases").
--
-- For a tag created with `git tag -a`, a push delivery's `after` is the SHA of the tag object; the
-- commit it points to is `head_commit.id`, which GitHub sends on every tag creation. The run
-- creation functions took `after` as the run's head_sha, so the check run was created on a tag
-- object: GitHub answers 422 ("No commit found for SHA"), the creation was dead-lettered, and the
-- run stayed blocked with no check run for anyone to retry; re-creating the tag (`git tag -a -f`)
-- made a new object and a second release of the same commit. Ingest now stores head_commit.id as
-- the document's push.head_sha (pkg/eventdoc), and both functions take it, else `after` (the
-- lightweight tags' commit, and documents stored before this release).
--
-- Only functions change: no table lock; a previous release's lifecycle calls them unchanged.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_create_from_push(p_job_id bigint, p_worker text, p_default_workflow_file text, p_check_run_name text, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS uuid
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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
    -- The tagged commit: head_commit.id (stored as head_sha since 00075), which for an annotated
    -- tag differs from after, the tag object; a document stored before has after only.
    v_sha := coalesce(i.payload -> 'push' ->> 'head_sha', i.payload -> 'push' ->> 'after');
    -- A repository recorded under another installation (or not at all) gets no run: its
    -- installation_repositories change has not been applied yet, or the job is not what it seems.
    SELECT * INTO repo FROM public.repositories WHERE id = i.repository_id;
    IF NOT FOUND OR repo.installation_id <> i.installation_id THEN
        RETURN NULL;
    END IF;
    -- The repository's setting, else its installation's default (00024), else the deployment's.
    SELECT coalesce(s.workflow_file, d.workflow_file, p_default_workflow_file) INTO v_workflow_file
    FROM (SELECT 1) one
    LEFT JOIN public.repository_release_settings s ON s.repository_id = repo.id
    LEFT JOIN public.installation_release_settings d ON d.installation_id = repo.installation_id;

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
            'external_id', v_run,
            'dispatch_paused', public.boardreadyops_outbox_dispatch_pause_reason(i.installation_id)),
        p_traceparent, 10, v_now);
    RETURN v_run;
END;
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_create_from_push_batch(p_job_ids bigint[], p_worker text, p_default_workflow_file text, p_check_run_name text, p_traceparents text[], p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(job_id bigint, release_run_id uuid)
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
               i.payload -> 'push' ->> 'ref' AS ref,
               -- The tagged commit, not an annotated tag's object (00075).
               coalesce(i.payload -> 'push' ->> 'head_sha', i.payload -> 'push' ->> 'after') AS sha
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_create_from_push(p_job_id bigint, p_worker text, p_default_workflow_file text, p_check_run_name text, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS uuid
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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
    -- The repository's setting, else its installation's default (00024), else the deployment's.
    SELECT coalesce(s.workflow_file, d.workflow_file, p_default_workflow_file) INTO v_workflow_file
    FROM (SELECT 1) one
    LEFT JOIN public.repository_release_settings s ON s.repository_id = repo.id
    LEFT JOIN public.installation_release_settings d ON d.installation_id = repo.installation_id;

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
            'external_id', v_run,
            'dispatch_paused', public.boardreadyops_outbox_dispatch_pause_reason(i.installation_id)),
        p_traceparent, 10, v_now);
    RETURN v_run;
END;
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_create_from_push_batch(p_job_ids bigint[], p_worker text, p_default_workflow_file text, p_check_run_name text, p_traceparents text[], p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(job_id bigint, release_run_id uuid)
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
