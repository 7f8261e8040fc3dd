-- The check-run page's attempt list probes each attempt's workflow run by primary key (issue 25,
-- docs/performance.md "End to end").
--
-- boardreadyops_release_run_enqueue_check_run builds every check-run update's attempt list from the
-- run's newest 8 attempts LEFT JOINed to execution_attempt_workflow_runs. PL/pgSQL caches that
-- statement's generic plan per connection from its sixth call. Planned while the table had never
-- been analyzed (a new installation, or the first minute of a load), it estimated the table at ten
-- pages and chose a hash join over a sequential scan of the whole table, and the connection kept
-- that plan as the table grew until autovacuum's first ANALYZE invalidated it. In a 20,000-run
-- load from an empty database that was 14,876 sequential scans of 7,900 rows on average, about
-- 100 buffers per check-run update instead of about 10.
--
-- A LATERAL subquery with a LIMIT is never flattened into a join, so the only plans left are one
-- probe per attempt: by the primary key, or a sequential scan of a table the statistics say is a
-- page or two (which the next autovacuum ANALYZE replaces, as before). The attempt list is the
-- same: at most one workflow-run row per attempt (it is the primary key).

-- +goose Up
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
    WHERE o.effect_type = 'github.check_run.complete' AND o.execution_attempt_id = att.id;
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

-- +goose Down
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
    LEFT JOIN public.execution_attempt_workflow_runs w ON w.execution_attempt_id = a.id;

    SELECT coalesce(max(o.generation) + 1, 0) INTO v_generation
    FROM public.control_plane_outbox o
    WHERE o.effect_type = 'github.check_run.complete' AND o.execution_attempt_id = att.id;
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
