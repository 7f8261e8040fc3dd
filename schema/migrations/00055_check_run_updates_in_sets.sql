-- Check-run updates of a set of release runs are enqueued by one call (issue 25,
-- docs/performance.md "Check-run updates and release runs in sets").
--
-- boardreadyops_release_run_enqueue_check_run built one update per call: the run locked, its
-- attempt, blocker, repository, page, attempt count, attempt list and generation read, the update
-- inserted and the older one superseded, about ten statements per run. The set-based workflow
-- dispatch completion (00051) and attempt finish (00052) called it once per run: in a 50,000-run
-- burst it was 28 % of PostgreSQL's statement time, more than the rest of both batches.
--
-- boardreadyops_release_run_enqueue_check_runs builds the same updates for up to 10,000 runs with
-- one statement per step and returns (release run, update) for each run it was given, in order,
-- with no update for a run without a check run, as the single function returns NULL. The single
-- function now calls it with one run, so every check-run update is still built in one place, and
-- both batches call it once. A run named twice is an error: its second update would have to see
-- the first.
--
-- Functions only: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_release_run_enqueue_check_runs(p_run_ids uuid[], p_states text[], p_notices text[], p_traceparents text[], p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
    RETURNS TABLE (release_run_id uuid, outbox_id bigint)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_now   timestamptz := public.boardreadyops_clock_now(p_now);
    v_state text;
    v_runs  uuid[];
    v_ids   bigint[];
    v_older bigint[];
    v_newer bigint[];
BEGIN
    IF p_run_ids IS NULL OR p_states IS NULL OR p_notices IS NULL OR p_traceparents IS NULL
       OR cardinality(p_states) <> cardinality(p_run_ids) OR cardinality(p_notices) <> cardinality(p_run_ids)
       OR cardinality(p_traceparents) <> cardinality(p_run_ids) OR cardinality(p_run_ids) > 10000 THEN
        RAISE EXCEPTION 'between 0 and 10000 release runs per call, each with its state, notice and traceparent' USING ERRCODE = '22023';
    END IF;
    -- Plain expressions first: a single run (boardreadyops_release_run_enqueue_check_run) runs no
    -- query to be checked.
    IF NOT array_remove(p_states, NULL) <@ ARRAY['dispatching', 'running', 'succeeded', 'failed', 'cancelled',
                                                  'dispatch_failed', 'dispatch_unknown', 'retrying'] THEN
        SELECT s INTO v_state FROM unnest(p_states) AS s
        WHERE s NOT IN ('dispatching', 'running', 'succeeded', 'failed', 'cancelled', 'dispatch_failed', 'dispatch_unknown', 'retrying')
        LIMIT 1;
        RAISE EXCEPTION 'unknown check run state %', v_state USING ERRCODE = '22023';
    END IF;
    IF cardinality(p_run_ids) > 1 AND (SELECT count(DISTINCT x) <> count(x) FROM unnest(p_run_ids) AS x) THEN
        RAISE EXCEPTION 'a release run more than once in one call' USING ERRCODE = '22023';
    END IF;
    -- Each run is locked, in key order, before anything of it is read.
    PERFORM FROM public.release_runs r WHERE r.id = ANY (p_run_ids) ORDER BY r.id FOR UPDATE;

    WITH run AS (
        SELECT i.n, i.notice, i.traceparent, r.id, r.installation_id, r.repository_id, r.check_run_id, r.ref,
               r.head_sha, r.workflow_file, a.id AS attempt_id, a.number AS attempt_number, a.workflow_run_id,
               coalesce(i.state, CASE r.status WHEN 'running' THEN 'running' WHEN 'succeeded' THEN 'succeeded'
                                               WHEN 'failed' THEN 'failed' WHEN 'cancelled' THEN 'cancelled'
                                               WHEN 'blocked' THEN NULL ELSE 'dispatching' END) AS state
        FROM unnest(p_run_ids, p_states, p_notices, p_traceparents) WITH ORDINALITY AS i(run_id, state, notice, traceparent, n)
        JOIN public.release_runs r ON r.id = i.run_id
        LEFT JOIN public.execution_attempts a ON a.release_run_id = r.id AND a.number = r.current_attempt
        WHERE r.check_run_id IS NOT NULL -- no check run to update (yet)
    ), told AS (
        -- What blocks a run told as blocked or failed: a dispatch awaiting reconciliation outranks
        -- a dead letter (it is never retried blindly).
        SELECT run.*, coalesce(run.state, CASE b.status WHEN 'reconciliation_required' THEN 'dispatch_unknown' ELSE 'dispatch_failed' END) AS told,
               b.last_error AS reason
        FROM run
        LEFT JOIN LATERAL (
            SELECT o.status, o.last_error
            FROM public.control_plane_outbox o
            WHERE (run.state IS NULL OR run.state IN ('dispatch_failed', 'dispatch_unknown'))
              -- By the effect key, never control_plane_outbox_attention_idx (every dead letter):
              -- the statuses by IS NOT DISTINCT FROM, which that index's predicate does not match.
              AND o.release_run_id = run.id
              AND (o.status IS NOT DISTINCT FROM 'dead_letter' OR o.status IS NOT DISTINCT FROM 'reconciliation_required')
              AND o.effect_type <> 'github.collaborator_permission.read' -- a failed check of a Retry blocks nothing
            ORDER BY o.status = 'reconciliation_required' DESC, o.id DESC
            LIMIT 1
        ) b ON true
    ), built AS (
        SELECT t.*, p.full_name, w.workflow_run_url AS url, total.n AS total, list.attempts, gen.generation
        FROM told t
        -- Primary-key probes (a LATERAL subquery with a LIMIT is never flattened into a join).
        LEFT JOIN LATERAL (SELECT r.full_name FROM public.repositories r WHERE r.id = t.repository_id LIMIT 1) p ON true
        LEFT JOIN LATERAL (
            SELECT r.workflow_run_url FROM public.execution_attempt_workflow_runs r WHERE r.execution_attempt_id = t.attempt_id LIMIT 1
        ) w ON true
        CROSS JOIN LATERAL (SELECT count(*) AS n FROM public.execution_attempts x WHERE x.release_run_id = t.id) total
        -- The newest 8 attempts, oldest first: the payload stays far below its 8 KiB bound.
        CROSS JOIN LATERAL (
            SELECT coalesce(jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
                       'number', a.number, 'status', a.status, 'workflow_run_id', a.workflow_run_id,
                       'workflow_run_url', aw.workflow_run_url, 'run_attempt', aw.workflow_run_attempt,
                       'conclusion', a.conclusion, 'started_at', coalesce(aw.started_at, a.dispatched_at),
                       'completed_at', a.completed_at)) ORDER BY a.number), '[]'::jsonb) AS attempts
            FROM (SELECT * FROM public.execution_attempts x WHERE x.release_run_id = t.id ORDER BY x.number DESC LIMIT 8) a
            -- One primary-key probe per attempt (migration 00036): never a join that reads the table whole.
            LEFT JOIN LATERAL (
                SELECT r.workflow_run_url, r.workflow_run_attempt, r.started_at
                FROM public.execution_attempt_workflow_runs r WHERE r.execution_attempt_id = a.id
                LIMIT 1
            ) aw ON true
        ) list
        CROSS JOIN LATERAL (
            SELECT coalesce(max(o.generation) + 1, 0) AS generation
            FROM public.control_plane_outbox o
            WHERE o.release_run_id = t.id AND o.effect_type = 'github.check_run.complete' AND o.execution_attempt_id = t.attempt_id
        ) gen
    ), inserted AS (
        INSERT INTO public.control_plane_outbox AS o (
            effect_type, idempotency_key, generation, payload, max_attempts, available_at,
            release_run_id, execution_attempt_id, installation_id, traceparent, created_at, updated_at)
        SELECT
            'github.check_run.complete',
            'github.check_run.complete:' || b.id::text || ':' || b.attempt_id::text
                || CASE WHEN b.generation > 0 THEN ':g' || b.generation::text ELSE '' END,
            b.generation,
            jsonb_strip_nulls(jsonb_build_object(
                'release_run_id', b.id, 'execution_attempt_id', b.attempt_id, 'attempt_number', b.attempt_number,
                'installation_id', b.installation_id, 'repository_full_name', b.full_name,
                'check_run_id', b.check_run_id, 'state', b.told,
                'tag', substr(b.ref, length('refs/tags/') + 1), 'head_sha', b.head_sha,
                'workflow_file', b.workflow_file,
                'reason', CASE WHEN b.told IN ('dispatch_failed', 'dispatch_unknown') THEN left(b.reason, 800) END,
                'notice', left(b.notice, 500),
                'retry', CASE WHEN b.told = 'dispatch_failed' THEN true END,
                'details_url', b.url, 'attempts', b.attempts, 'attempts_total', b.total,
                -- what a dispatcher of the previous release reads
                'conclusion', CASE b.told WHEN 'succeeded' THEN 'success' WHEN 'cancelled' THEN 'cancelled'
                                          WHEN 'failed' THEN 'failure' WHEN 'dispatch_failed' THEN 'failure' END,
                'workflow_run_id', b.workflow_run_id, 'workflow_run_url', b.url)),
            10, v_now, b.id, b.attempt_id, b.installation_id, b.traceparent, v_now, v_now
        FROM built b
        ORDER BY b.n
        RETURNING o.id, o.release_run_id
    )
    SELECT array_agg(x.release_run_id ORDER BY x.id), array_agg(x.id ORDER BY x.id) INTO v_runs, v_ids FROM inserted x;

    -- The newest state wins: an older update not sent yet is superseded, never sent after it. The
    -- older updates are found run by run through the effect key (the LATERAL subquery with OFFSET
    -- 0 is never flattened, so a generic plan made on a small outbox cannot turn it into a scan
    -- of every check-run update), then written by primary key. The status is tested with IS NOT
    -- DISTINCT FROM, which control_plane_outbox_claim_idx's predicate does not match, and again
    -- when written: an update claimed in between is left to its dispatcher (00039's rule).
    SELECT array_agg(s.id ORDER BY s.id), array_agg(x.id ORDER BY s.id) INTO v_older, v_newer
    FROM unnest(v_runs, v_ids) AS x(run_id, id)
    CROSS JOIN LATERAL (
        SELECT o.id FROM public.control_plane_outbox o
        WHERE o.release_run_id = x.run_id AND o.effect_type = 'github.check_run.complete'
          AND o.status IS NOT DISTINCT FROM 'available' AND o.id <> x.id
        OFFSET 0
    ) s;
    UPDATE public.control_plane_outbox o
    SET status = 'completed', completed_at = v_now, superseded_by = x.newer,
        result = jsonb_build_object('resolution', 'superseded', 'superseded_by', x.newer), updated_at = v_now
    FROM unnest(v_older, v_newer) AS x(id, newer)
    WHERE o.id = x.id AND o.status IS NOT DISTINCT FROM 'available';

    RETURN QUERY
    SELECT i.run_id, x.id
    FROM unnest(p_run_ids) WITH ORDINALITY AS i(run_id, n)
    LEFT JOIN unnest(v_runs, v_ids) AS x(run_id, id) ON x.run_id = i.run_id
    ORDER BY i.n;
END;
$$;
-- +goose StatementEnd
ALTER FUNCTION public.boardreadyops_release_run_enqueue_check_runs(uuid[], text[], text[], text[], timestamptz) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_release_run_enqueue_check_runs(uuid[], text[], text[], text[], timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_release_run_enqueue_check_runs(uuid[], text[], text[], text[], timestamptz) TO boardreadyops_admin;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_enqueue_check_run(p_run_id uuid, p_state text, p_notice text, p_traceparent text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    -- One run of the set-based function (00055), which builds every check-run update.
    RETURN (SELECT e.outbox_id
            FROM public.boardreadyops_release_run_enqueue_check_runs(ARRAY[p_run_id], ARRAY[p_state], ARRAY[p_notice], ARRAY[p_traceparent], p_now) e);
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_workflow_dispatch_batch(p_ids bigint[], p_workflow_run_ids bigint[], p_workflow_run_urls text[], p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
    RETURNS SETOF bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_now      timestamptz := public.boardreadyops_clock_now(p_now);
    v_ids      bigint[];
    v_runs     uuid[];
    v_attempts uuid[];
    v_workflow bigint[];
    v_urls     text[];
    v_trace    text[];
BEGIN
    IF p_ids IS NULL OR p_workflow_run_ids IS NULL OR p_workflow_run_urls IS NULL
       OR cardinality(p_ids) <> cardinality(p_workflow_run_ids) OR cardinality(p_ids) <> cardinality(p_workflow_run_urls)
       OR cardinality(p_ids) > 10000 THEN
        RAISE EXCEPTION 'between 0 and 10000 outbox ids per call, each with its workflow run id and page' USING ERRCODE = '22023';
    END IF;
    IF (SELECT count(DISTINCT x) FROM unnest(p_ids) AS x) <> cardinality(p_ids) THEN
        RAISE EXCEPTION 'an outbox id more than once in one call' USING ERRCODE = '22023';
    END IF;
    -- The completions this call records, locked effect, run, attempt, each in id order, as the
    -- single function locks them. Only the primary key may serve the effects: the effect type by
    -- IS NOT DISTINCT FROM (migration 00047), and no `status = 'leased'`, which would match
    -- control_plane_outbox_lease_idx and read every worker's leased effects (the row rules make
    -- a lease owner mean 'leased').
    WITH effect AS (
        SELECT o.id, o.release_run_id, o.execution_attempt_id, o.traceparent, i.workflow_run_id,
               -- A page that is not a web address, or too long to store, is nothing to link to.
               CASE WHEN i.url ~ '^https?://' AND length(i.url) <= 1024 THEN i.url END AS url
        FROM unnest(p_ids, p_workflow_run_ids, p_workflow_run_urls) AS i(id, workflow_run_id, url)
        JOIN public.control_plane_outbox o ON o.id = i.id
        WHERE i.workflow_run_id > 0 AND o.lease_owner = p_worker
          AND o.effect_type IS NOT DISTINCT FROM 'github.workflow.dispatch' AND o.delivery_started_at IS NOT NULL
        ORDER BY o.id
        FOR UPDATE OF o
    ), run AS (
        SELECT e.*, r.current_attempt
        FROM effect e
        JOIN public.release_runs r ON r.id = e.release_run_id
        WHERE r.status IN ('dispatching', 'blocked')
        ORDER BY r.id
        FOR UPDATE OF r
    ), attempt AS (
        SELECT r.*
        FROM run r
        JOIN public.execution_attempts a ON a.id = r.execution_attempt_id
        WHERE a.status = 'dispatching' AND a.number = r.current_attempt AND a.workflow_run_id IS NULL
          AND NOT EXISTS (SELECT 1 FROM public.execution_attempts x WHERE x.workflow_run_id = r.workflow_run_id)
        ORDER BY a.id
        FOR UPDATE OF a
    )
    SELECT array_agg(a.id ORDER BY a.id), array_agg(a.release_run_id ORDER BY a.id), array_agg(a.execution_attempt_id ORDER BY a.id),
           array_agg(a.workflow_run_id ORDER BY a.id), array_agg(a.url ORDER BY a.id), array_agg(a.traceparent ORDER BY a.id)
    INTO v_ids, v_runs, v_attempts, v_workflow, v_urls, v_trace
    FROM attempt a;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;

    UPDATE public.execution_attempts a
    SET status = 'running', workflow_run_id = x.workflow_run_id, dispatched_at = v_now, updated_at = v_now
    FROM unnest(v_attempts, v_workflow) AS x(id, workflow_run_id)
    WHERE a.id = x.id;
    UPDATE public.release_runs r SET status = 'running', updated_at = v_now
    FROM unnest(v_runs) AS x(id)
    WHERE r.id = x.id;
    -- The run's page (NULL: none usable) in the same row write as its start.
    INSERT INTO public.execution_attempt_workflow_runs AS w (execution_attempt_id, workflow_run_url, workflow_run_attempt, started_at, updated_at)
    SELECT x.id, x.url, 1, v_now, v_now FROM unnest(v_attempts, v_urls) AS x(id, url)
    ON CONFLICT ON CONSTRAINT execution_attempt_workflow_runs_pkey DO UPDATE
    SET workflow_run_url = coalesce(EXCLUDED.workflow_run_url, w.workflow_run_url),
        started_at = coalesce(w.started_at, v_now), updated_at = v_now;
    -- The check runs say 'running': their updates are built by the one function that builds them.
    PERFORM FROM public.boardreadyops_release_run_enqueue_check_runs(v_runs, array_fill('running'::text, ARRAY[cardinality(v_runs)]),
        array_fill(NULL::text, ARRAY[cardinality(v_runs)]), v_trace, v_now);
    RETURN QUERY
    UPDATE public.control_plane_outbox o
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
        result = jsonb_build_object('workflow_run_id', x.workflow_run_id), last_error = NULL, updated_at = v_now
    FROM unnest(v_ids, v_workflow) AS x(id, workflow_run_id)
    WHERE o.id = x.id
    RETURNING o.id;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_finish_batch(p_job_ids bigint[], p_worker text, p_check_run_name text, p_traceparents text[], p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
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
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_workflow_dispatch_batch(p_ids bigint[], p_workflow_run_ids bigint[], p_workflow_run_urls text[], p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
    RETURNS SETOF bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_now      timestamptz := public.boardreadyops_clock_now(p_now);
    v_ids      bigint[];
    v_runs     uuid[];
    v_attempts uuid[];
    v_workflow bigint[];
    v_urls     text[];
    v_trace    text[];
BEGIN
    IF p_ids IS NULL OR p_workflow_run_ids IS NULL OR p_workflow_run_urls IS NULL
       OR cardinality(p_ids) <> cardinality(p_workflow_run_ids) OR cardinality(p_ids) <> cardinality(p_workflow_run_urls)
       OR cardinality(p_ids) > 10000 THEN
        RAISE EXCEPTION 'between 0 and 10000 outbox ids per call, each with its workflow run id and page' USING ERRCODE = '22023';
    END IF;
    IF (SELECT count(DISTINCT x) FROM unnest(p_ids) AS x) <> cardinality(p_ids) THEN
        RAISE EXCEPTION 'an outbox id more than once in one call' USING ERRCODE = '22023';
    END IF;
    -- The completions this call records, locked effect, run, attempt, each in id order, as the
    -- single function locks them. Only the primary key may serve the effects: the effect type by
    -- IS NOT DISTINCT FROM (migration 00047), and no `status = 'leased'`, which would match
    -- control_plane_outbox_lease_idx and read every worker's leased effects (the row rules make
    -- a lease owner mean 'leased').
    WITH effect AS (
        SELECT o.id, o.release_run_id, o.execution_attempt_id, o.traceparent, i.workflow_run_id,
               -- A page that is not a web address, or too long to store, is nothing to link to.
               CASE WHEN i.url ~ '^https?://' AND length(i.url) <= 1024 THEN i.url END AS url
        FROM unnest(p_ids, p_workflow_run_ids, p_workflow_run_urls) AS i(id, workflow_run_id, url)
        JOIN public.control_plane_outbox o ON o.id = i.id
        WHERE i.workflow_run_id > 0 AND o.lease_owner = p_worker
          AND o.effect_type IS NOT DISTINCT FROM 'github.workflow.dispatch' AND o.delivery_started_at IS NOT NULL
        ORDER BY o.id
        FOR UPDATE OF o
    ), run AS (
        SELECT e.*, r.current_attempt
        FROM effect e
        JOIN public.release_runs r ON r.id = e.release_run_id
        WHERE r.status IN ('dispatching', 'blocked')
        ORDER BY r.id
        FOR UPDATE OF r
    ), attempt AS (
        SELECT r.*
        FROM run r
        JOIN public.execution_attempts a ON a.id = r.execution_attempt_id
        WHERE a.status = 'dispatching' AND a.number = r.current_attempt AND a.workflow_run_id IS NULL
          AND NOT EXISTS (SELECT 1 FROM public.execution_attempts x WHERE x.workflow_run_id = r.workflow_run_id)
        ORDER BY a.id
        FOR UPDATE OF a
    )
    SELECT array_agg(a.id ORDER BY a.id), array_agg(a.release_run_id ORDER BY a.id), array_agg(a.execution_attempt_id ORDER BY a.id),
           array_agg(a.workflow_run_id ORDER BY a.id), array_agg(a.url ORDER BY a.id), array_agg(a.traceparent ORDER BY a.id)
    INTO v_ids, v_runs, v_attempts, v_workflow, v_urls, v_trace
    FROM attempt a;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;

    UPDATE public.execution_attempts a
    SET status = 'running', workflow_run_id = x.workflow_run_id, dispatched_at = v_now, updated_at = v_now
    FROM unnest(v_attempts, v_workflow) AS x(id, workflow_run_id)
    WHERE a.id = x.id;
    UPDATE public.release_runs r SET status = 'running', updated_at = v_now
    FROM unnest(v_runs) AS x(id)
    WHERE r.id = x.id;
    -- The run's page (NULL: none usable) in the same row write as its start.
    INSERT INTO public.execution_attempt_workflow_runs AS w (execution_attempt_id, workflow_run_url, workflow_run_attempt, started_at, updated_at)
    SELECT x.id, x.url, 1, v_now, v_now FROM unnest(v_attempts, v_urls) AS x(id, url)
    ON CONFLICT ON CONSTRAINT execution_attempt_workflow_runs_pkey DO UPDATE
    SET workflow_run_url = coalesce(EXCLUDED.workflow_run_url, w.workflow_run_url),
        started_at = coalesce(w.started_at, v_now), updated_at = v_now;
    -- The check run says 'running': its payload is built by the one function that builds it.
    PERFORM public.boardreadyops_release_run_enqueue_check_run(x.id, 'running', NULL, x.traceparent, v_now)
    FROM unnest(v_runs, v_trace) WITH ORDINALITY AS x(id, traceparent, n)
    ORDER BY x.n;
    RETURN QUERY
    UPDATE public.control_plane_outbox o
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
        result = jsonb_build_object('workflow_run_id', x.workflow_run_id), last_error = NULL, updated_at = v_now
    FROM unnest(v_ids, v_workflow) AS x(id, workflow_run_id)
    WHERE o.id = x.id
    RETURNING o.id;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_finish_batch(p_job_ids bigint[], p_worker text, p_check_run_name text, p_traceparents text[], p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_enqueue_check_run(p_run_id uuid, p_state text, p_notice text, p_traceparent text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    run public.release_runs;
    att public.execution_attempts;
    v_full_name text;
    v_state text := p_state;
    v_blocker text;
    v_reason text;
    v_url text;
    v_attempts jsonb;
    v_total integer;
    v_generation integer;
    v_id bigint;
BEGIN
    IF p_state IS NOT NULL AND p_state NOT IN ('dispatching', 'running', 'succeeded', 'failed', 'cancelled',
                                               'dispatch_failed', 'dispatch_unknown', 'retrying') THEN
        RAISE EXCEPTION 'unknown check run state %', p_state USING ERRCODE = '22023';
    END IF;
    SELECT * INTO run FROM public.release_runs WHERE id = p_run_id FOR UPDATE;
    IF NOT FOUND OR run.check_run_id IS NULL THEN
        RETURN NULL; -- no check run to update (yet)
    END IF;
    SELECT * INTO att FROM public.execution_attempts a WHERE a.release_run_id = run.id AND a.number = run.current_attempt;
    IF v_state IS NULL THEN
        v_state := CASE run.status WHEN 'running' THEN 'running' WHEN 'succeeded' THEN 'succeeded'
                                   WHEN 'failed' THEN 'failed' WHEN 'cancelled' THEN 'cancelled'
                                   WHEN 'blocked' THEN NULL ELSE 'dispatching' END;
    END IF;
    IF v_state IS NULL OR v_state IN ('dispatch_failed', 'dispatch_unknown') THEN
        -- What blocks the run: a dispatch awaiting reconciliation outranks a dead letter (it is
        -- never retried blindly).
        SELECT o.status, o.last_error INTO v_blocker, v_reason
        FROM public.control_plane_outbox o
        WHERE o.release_run_id = run.id AND o.status IN ('dead_letter', 'reconciliation_required')
          AND o.effect_type <> 'github.collaborator_permission.read' -- a failed check of a Retry blocks nothing
        ORDER BY o.status = 'reconciliation_required' DESC, o.id DESC
        LIMIT 1;
        v_state := coalesce(v_state, CASE v_blocker WHEN 'reconciliation_required' THEN 'dispatch_unknown' ELSE 'dispatch_failed' END);
    END IF;
    SELECT p.full_name INTO v_full_name FROM public.repositories p WHERE p.id = run.repository_id;
    SELECT w.workflow_run_url INTO v_url FROM public.execution_attempt_workflow_runs w WHERE w.execution_attempt_id = att.id;
    SELECT count(*) INTO v_total FROM public.execution_attempts a WHERE a.release_run_id = run.id;
    -- The newest 8 attempts, oldest first: the payload stays far below its 8 KiB bound.
    SELECT coalesce(jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
               'number', a.number, 'status', a.status, 'workflow_run_id', a.workflow_run_id,
               'workflow_run_url', w.workflow_run_url, 'run_attempt', w.workflow_run_attempt,
               'conclusion', a.conclusion, 'started_at', coalesce(w.started_at, a.dispatched_at),
               'completed_at', a.completed_at)) ORDER BY a.number), '[]'::jsonb)
    INTO v_attempts
    FROM (SELECT * FROM public.execution_attempts x WHERE x.release_run_id = run.id ORDER BY x.number DESC LIMIT 8) a
    -- One primary-key probe per attempt (migration 00036): never a join that reads the table whole.
    LEFT JOIN LATERAL (
        SELECT r.workflow_run_url, r.workflow_run_attempt, r.started_at
        FROM public.execution_attempt_workflow_runs r WHERE r.execution_attempt_id = a.id
        LIMIT 1
    ) w ON true;

    SELECT coalesce(max(o.generation) + 1, 0) INTO v_generation
    FROM public.control_plane_outbox o
    WHERE o.release_run_id = run.id AND o.effect_type = 'github.check_run.complete' AND o.execution_attempt_id = att.id;
    INSERT INTO public.control_plane_outbox (
        effect_type, idempotency_key, generation, payload, max_attempts, available_at,
        release_run_id, execution_attempt_id, installation_id, traceparent, created_at, updated_at)
    VALUES (
        'github.check_run.complete',
        'github.check_run.complete:' || run.id::text || ':' || att.id::text
            || CASE WHEN v_generation > 0 THEN ':g' || v_generation::text ELSE '' END,
        v_generation,
        jsonb_strip_nulls(jsonb_build_object(
            'release_run_id', run.id, 'execution_attempt_id', att.id, 'attempt_number', att.number,
            'installation_id', run.installation_id, 'repository_full_name', v_full_name,
            'check_run_id', run.check_run_id, 'state', v_state,
            'tag', substr(run.ref, length('refs/tags/') + 1), 'head_sha', run.head_sha,
            'workflow_file', run.workflow_file,
            'reason', CASE WHEN v_state IN ('dispatch_failed', 'dispatch_unknown') THEN left(v_reason, 800) END,
            'notice', left(p_notice, 500),
            'retry', CASE WHEN v_state = 'dispatch_failed' THEN true END,
            'details_url', v_url, 'attempts', v_attempts, 'attempts_total', v_total,
            -- what a dispatcher of the previous release reads
            'conclusion', CASE v_state WHEN 'succeeded' THEN 'success' WHEN 'cancelled' THEN 'cancelled'
                                       WHEN 'failed' THEN 'failure' WHEN 'dispatch_failed' THEN 'failure' END,
            'workflow_run_id', att.workflow_run_id, 'workflow_run_url', v_url)),
        10, v_now, run.id, att.id, run.installation_id, p_traceparent, v_now, v_now)
    RETURNING id INTO v_id;
    -- The newest state wins: an older update not sent yet is superseded, never sent after it.
    UPDATE public.control_plane_outbox o
    SET status = 'completed', completed_at = v_now, superseded_by = v_id,
        result = jsonb_build_object('resolution', 'superseded', 'superseded_by', v_id), updated_at = v_now
    WHERE o.release_run_id = run.id AND o.effect_type = 'github.check_run.complete' AND o.status = 'available'
      AND o.id <> v_id;
    RETURN v_id;
END;
$$;
-- +goose StatementEnd
DROP FUNCTION public.boardreadyops_release_run_enqueue_check_runs(uuid[], text[], text[], text[], timestamptz);
