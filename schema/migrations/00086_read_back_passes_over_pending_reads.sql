-- The sweep for quiet runs reads back every installation's, not only the first hundred waiting
-- behind a blocked one (docs/lifecycle.md, "A quiet run is read back").
--
-- boardreadyops_release_run_read_back_quiet picks up to p_limit (100) running attempts quiet for
-- the read-back period, oldest run first, and enqueues a github.workflow_run.read for each; the
-- enqueue adds none while the attempt has one still to be sent. A read waiting for its
-- installation's rate-limit block (an hour or more) was older than the period, so its attempt was
-- picked again at every sweep and given nothing: with a hundred such attempts in one rate-limited
-- installation, every sweep's places went to them, and the quiet runs of every other installation
-- were never read back, left running until someone answered the stale-run alert. An attempt with a
-- read still available or leased is now passed over. The probe is the same key lookup as before
-- (control_plane_outbox_effect_key).
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
          -- every period only added a dead letter each time (00083). Nor with a read still to be
          -- sent (00086): the enqueue adds none beside it, and such attempts, oldest first, took
          -- every place of the sweep while their installation was blocked.
          AND NOT EXISTS (SELECT 1 FROM public.control_plane_outbox o
                          WHERE o.release_run_id = x.release_run_id AND o.effect_type = 'github.workflow_run.read' AND o.execution_attempt_id = x.id
                            AND (o.created_at > v_now - p_quiet
                                 OR o.status IN ('available', 'leased')
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
