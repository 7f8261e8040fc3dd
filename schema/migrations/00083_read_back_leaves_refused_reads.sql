-- A quiet run whose read-back was dead-lettered is read again a day later, not every period
-- (docs/lifecycle.md, "A quiet run is read back"; docs/operations.md, "Runbook: dead letters").
--
-- boardreadyops_release_run_read_back_quiet enqueues a github.workflow_run.read for a running
-- attempt quiet for the read-back period and not read within it. A read that is dead-lettered
-- finishes nothing: GitHub refused it (the workflow run deleted: 404; access lost: 403), its
-- attempts ran out during an outage, or its installation was suspended. The attempt stayed quiet
-- and the next period enqueued another read, dead-lettered in turn when the cause lasted: one
-- more dead letter every 30 minutes for as long as the run stayed running, which retention never
-- deletes (the run is not finished) and BoardReadyOpsOutboxDeadLettersGrowing kept reporting.
-- The sweep now leaves an attempt alone for a day after a read of it was dead-lettered (its
-- updated_at), then reads it again: at most one dead letter a day for a refusal that lasts, and a
-- cause that passes (an outage, a suspension lifted) is read past without anyone's help. An
-- operator can replay the dead-lettered read sooner, or cancel the run. The probe is the same key
-- lookup as before (control_plane_outbox_effect_key).
--
-- Only a function changes: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_read_back_quiet(p_quiet interval, p_limit integer, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now   timestamptz := public.boardreadyops_clock_now(p_now);
    v_count integer := 0;
    a       record;
BEGIN
    IF p_quiet IS NULL OR p_quiet < interval '5 minutes' THEN
        RAISE EXCEPTION 'read-back quiet period must be at least 5 minutes, got %', p_quiet USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'read-back limit must be 1 to 1000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    FOR a IN
        SELECT x.id
        FROM public.release_runs r
        JOIN public.execution_attempts x ON x.release_run_id = r.id AND x.number = r.current_attempt
        WHERE r.status = 'running' AND r.created_at < v_now - p_quiet
          AND x.status = 'running' AND x.workflow_run_id IS NOT NULL AND x.updated_at < v_now - p_quiet
          -- Not read within the period, nor dead-lettered within a day: a read GitHub refused
          -- (a deleted workflow run's 404, a 403), or one whose attempts ran out, asked again
          -- every period only added a dead letter each time (00083).
          AND NOT EXISTS (SELECT 1 FROM public.control_plane_outbox o
                          WHERE o.release_run_id = x.release_run_id AND o.effect_type = 'github.workflow_run.read' AND o.execution_attempt_id = x.id
                            AND (o.created_at > v_now - p_quiet
                                 OR (o.status = 'dead_letter' AND o.updated_at > v_now - interval '1 day')))
        ORDER BY r.created_at
        LIMIT p_limit
        FOR UPDATE OF x SKIP LOCKED -- another replica's sweep has these: it reads them
    LOOP
        IF public.boardreadyops_outbox_enqueue_workflow_run_read(a.id, v_now) IS NOT NULL THEN
            v_count := v_count + 1;
        END IF;
    END LOOP;
    RETURN v_count;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_read_back_quiet(p_quiet interval, p_limit integer, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now   timestamptz := public.boardreadyops_clock_now(p_now);
    v_count integer := 0;
    a       record;
BEGIN
    IF p_quiet IS NULL OR p_quiet < interval '5 minutes' THEN
        RAISE EXCEPTION 'read-back quiet period must be at least 5 minutes, got %', p_quiet USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'read-back limit must be 1 to 1000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    FOR a IN
        SELECT x.id
        FROM public.release_runs r
        JOIN public.execution_attempts x ON x.release_run_id = r.id AND x.number = r.current_attempt
        WHERE r.status = 'running' AND r.created_at < v_now - p_quiet
          AND x.status = 'running' AND x.workflow_run_id IS NOT NULL AND x.updated_at < v_now - p_quiet
          AND NOT EXISTS (SELECT 1 FROM public.control_plane_outbox o
                          WHERE o.release_run_id = x.release_run_id AND o.effect_type = 'github.workflow_run.read' AND o.execution_attempt_id = x.id
                            AND o.created_at > v_now - p_quiet)
        ORDER BY r.created_at
        LIMIT p_limit
        FOR UPDATE OF x SKIP LOCKED -- another replica's sweep has these: it reads them
    LOOP
        IF public.boardreadyops_outbox_enqueue_workflow_run_read(a.id, v_now) IS NOT NULL THEN
            v_count := v_count + 1;
        END IF;
    END LOOP;
    RETURN v_count;
END;
$$;
-- +goose StatementEnd
