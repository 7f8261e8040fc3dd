-- Check-run creations of one group commit complete in one set-based statement (issue 25,
-- docs/performance.md "Runs advanced in sets").
--
-- boardreadyops_outbox_complete_check_run_create ran once per release run: the lease lock, the
-- run and its attempt, the dispatch it enqueues, the pause test and the completion, about ten
-- statements (each with its executor start-up, row rules and foreign-key checks) per run. The
-- batch does the same writes for every effect of a batch in one statement: the attempt to
-- 'dispatching', the run to 'dispatching' with its check run, the workflow dispatch enqueued
-- (its deterministic key, ON CONFLICT DO NOTHING as boardreadyops_outbox_enqueue), the effect
-- completed. It returns each effect it completed with the dispatch it enqueued (NULL: the
-- dispatch existed already).
--
-- It carries out only the common case. An effect it leaves out runs again alone through the
-- single-row function (pkg/groupcommit: ErrAlone), whose error or branch is its exact outcome:
--   * not leased by p_worker, not a check-run creation, or a check run id that is not positive;
--   * a run that is not 'check_pending' (it only records the check run id), or that has another
--     check run already;
--   * a run whose current attempt is not pending;
--   * a run whose installation's dispatches are paused (the single function also enqueues the
--     check-run update that says so). The batch reads the pauses as its statement starts, the
--     single function after it has locked the run: a pause committed while the batch waits for
--     a run's lock is not told on that run's check run (its dispatch is still held: the claims
--     skip paused dispatches).
--
-- Only a new function: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_complete_check_run_create_batch(p_ids bigint[], p_check_run_ids bigint[], p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
    RETURNS TABLE (id bigint, dispatch_id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_bitmapscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_ids IS NULL OR p_check_run_ids IS NULL OR cardinality(p_ids) <> cardinality(p_check_run_ids)
       OR cardinality(p_ids) > 10000 THEN
        RAISE EXCEPTION 'between 0 and 10000 outbox ids per call, each with its check run id' USING ERRCODE = '22023';
    END IF;
    IF (SELECT count(DISTINCT x) FROM unnest(p_ids) AS x) <> cardinality(p_ids) THEN
        RAISE EXCEPTION 'an outbox id more than once in one call' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH effect AS (
        -- Locked in id order, as the single function locks its one effect first. Only the primary
        -- key may serve it: the effect type by IS NOT DISTINCT FROM (migration 00047), and no
        -- `status = 'leased'`, which would match control_plane_outbox_lease_idx and read every
        -- worker's leased effects (the row rules make a lease owner mean 'leased').
        SELECT o.id, o.release_run_id, o.traceparent, i.check_run_id
        FROM unnest(p_ids, p_check_run_ids) AS i(id, check_run_id)
        JOIN public.control_plane_outbox o ON o.id = i.id
        WHERE i.check_run_id > 0 AND o.lease_owner = p_worker
          AND o.effect_type IS NOT DISTINCT FROM 'github.check_run.create'
        ORDER BY o.id
        FOR UPDATE OF o
    ), run AS (
        SELECT r.id, r.installation_id, r.repository_id, r.current_attempt, r.workflow_file, r.ref, r.head_sha,
               e.id AS effect_id, e.traceparent, e.check_run_id
        FROM effect e
        JOIN public.release_runs r ON r.id = e.release_run_id
        WHERE r.status = 'check_pending' AND (r.check_run_id IS NULL OR r.check_run_id = e.check_run_id)
          AND NOT EXISTS (SELECT 1 FROM public.dispatch_pauses p WHERE p.installation_id IN (0, r.installation_id))
        ORDER BY r.id
        FOR UPDATE OF r
    ), attempt AS (
        UPDATE public.execution_attempts a SET status = 'dispatching', updated_at = v_now
        FROM run
        WHERE a.release_run_id = run.id AND a.number = run.current_attempt AND a.status = 'pending'
        RETURNING a.id AS attempt_id, a.number, run.*
    ), advanced AS (
        -- Only runs whose attempt advanced: every statement below reads `attempt`, so an effect
        -- is completed exactly when all of its writes are made.
        UPDATE public.release_runs r SET check_run_id = a.check_run_id, status = 'dispatching', updated_at = v_now
        FROM attempt a
        WHERE r.id = a.id
        RETURNING r.id
    ), dispatch AS (
        INSERT INTO public.control_plane_outbox AS n (
            effect_type, idempotency_key, payload, max_attempts, available_at,
            release_run_id, execution_attempt_id, installation_id, traceparent, created_at, updated_at)
        SELECT 'github.workflow.dispatch',
               'github.workflow.dispatch:' || a.id::text || ':' || a.attempt_id::text,
               jsonb_build_object(
                   'release_run_id', a.id,
                   'execution_attempt_id', a.attempt_id,
                   'attempt_number', a.number,
                   'installation_id', a.installation_id,
                   'repository_id', a.repository_id,
                   'repository_full_name', p.full_name,
                   'workflow_file', a.workflow_file,
                   'ref', a.ref,
                   'head_sha', a.head_sha,
                   'check_run_id', a.check_run_id),
               10, v_now, a.id, a.attempt_id, a.installation_id, a.traceparent, v_now, v_now
        FROM attempt a
        LEFT JOIN public.repositories p ON p.id = a.repository_id
        ON CONFLICT (release_run_id, effect_type, execution_attempt_id, generation) DO NOTHING
        RETURNING n.id, n.release_run_id
    ), completed AS (
        UPDATE public.control_plane_outbox o
        SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
            result = jsonb_build_object('check_run_id', a.check_run_id), last_error = NULL, updated_at = v_now
        FROM attempt a
        WHERE o.id = a.effect_id
        RETURNING o.id, o.release_run_id
    )
    -- `advanced` is not read here: a data-modifying WITH query runs to completion whether or not
    -- anything reads it.
    SELECT c.id, d.id
    FROM completed c
    LEFT JOIN dispatch d ON d.release_run_id = c.release_run_id;
END;
$$;
-- +goose StatementEnd

ALTER FUNCTION public.boardreadyops_outbox_complete_check_run_create_batch(bigint[], bigint[], text, timestamptz) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_outbox_complete_check_run_create_batch(bigint[], bigint[], text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_complete_check_run_create_batch(bigint[], bigint[], text, timestamptz) TO boardreadyops_dispatcher, boardreadyops_admin;

-- +goose Down
DROP FUNCTION public.boardreadyops_outbox_complete_check_run_create_batch(bigint[], bigint[], text, timestamp with time zone);
