-- Workflow-dispatch completions of one group commit are recorded together (issue 25,
-- docs/performance.md "Runs advanced in sets").
--
-- boardreadyops_outbox_complete_workflow_dispatch_with_run ran once per release run: the lease
-- lock, the run and its attempt locked and tested, the attempt to 'running' with its workflow
-- run, the run to 'running', the run's page stored, the check-run update enqueued and the effect
-- completed, about twenty statements per run. The batch makes the same writes for every
-- completion of a batch with one statement each; only the check-run update is still enqueued per
-- run, by boardreadyops_release_run_enqueue_check_run itself, so that its payload is built in one
-- place. It returns the effects it completed.
--
-- It carries out only the common case. An effect it leaves out runs again alone through the
-- single-row function (pkg/groupcommit: ErrAlone), whose error is its exact outcome:
--   * not leased by p_worker, not a workflow dispatch, its delivery never started, or a workflow
--     run id that is not positive;
--   * a run that is neither 'dispatching' nor 'blocked', or an attempt that is not its current
--     one, not 'dispatching', or that has a workflow run already;
--   * a workflow run that belongs to another attempt already.
-- Two completions of one batch naming the same workflow run fail the batch on the attempts'
-- unique workflow run id, and every completion then runs alone.
--
-- Only a new function: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_complete_workflow_dispatch_batch(p_ids bigint[], p_workflow_run_ids bigint[], p_workflow_run_urls text[], p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
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
ALTER FUNCTION public.boardreadyops_outbox_complete_workflow_dispatch_batch(bigint[], bigint[], text[], text, timestamptz) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_outbox_complete_workflow_dispatch_batch(bigint[], bigint[], text[], text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_complete_workflow_dispatch_batch(bigint[], bigint[], text[], text, timestamptz) TO boardreadyops_dispatcher, boardreadyops_admin;

-- +goose Down
DROP FUNCTION public.boardreadyops_outbox_complete_workflow_dispatch_batch(bigint[], bigint[], text[], text, timestamptz);
