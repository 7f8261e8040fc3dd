-- Effects found by their run's effect key; the outbox's attempt index dropped (issue 25,
-- docs/performance.md "One index fewer per outbox row version").
--
-- Every outbox transition changes status, so none is HOT: each row version inserts into every
-- index whose predicate it meets. control_plane_outbox_execution_attempt_idx (00026) was one of
-- four for every effect of an attempt: it served the lookups of an attempt's effects of a type
-- (the next generation, "one read at a time") and the foreign key's check when an attempt is
-- deleted. Every one of those lookups knows the attempt's release run, and
-- control_plane_outbox_effect_key (release_run_id, effect_type, execution_attempt_id, generation)
-- serves them whole once the run is named:
--
-- - the five functions that look an attempt's effects up name the run too;
-- - the foreign key becomes (release_run_id, execution_attempt_id) → execution_attempts
--   (release_run_id, id), whose check on an attempt's deletion is then a lookup of the run's
--   effects in the effect key; an effect's attempt must now be an attempt of its own run (the
--   state machine never wrote another);
-- - the attempt index is dropped.
--
-- Locks: CREATE/DROP INDEX CONCURRENTLY take SHARE UPDATE EXCLUSIVE (writes carry on); the swap
-- of the foreign keys takes ACCESS EXCLUSIVE on both tables for the catalog update only, as
-- 00035's drop, within a 10 s lock timeout; VALIDATE CONSTRAINT scans the outbox under SHARE
-- UPDATE EXCLUSIVE (writes carry on). Hence NO TRANSACTION, as 00026: a run that failed half way
-- (a lock timeout, a cancel) is run again from the start; every step is idempotent, and a run
-- again swaps the keys again.

-- +goose NO TRANSACTION
-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_enqueue_collaborator_permission_read(p_run_id uuid, p_username text, p_sender_id bigint, p_delivery_id text, p_traceparent text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    run public.release_runs;
    att public.execution_attempts;
    v_full_name text;
    v_generation integer;
    v_id bigint;
BEGIN
    IF p_username IS NULL OR p_username !~ '^[A-Za-z0-9][A-Za-z0-9-]{0,38}$' THEN
        RAISE EXCEPTION 'not a GitHub login: %', left(p_username, 100) USING ERRCODE = '22023';
    END IF;
    SELECT * INTO run FROM public.release_runs WHERE id = p_run_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT * INTO att FROM public.execution_attempts a WHERE a.release_run_id = run.id AND a.number = run.current_attempt;
    IF EXISTS (SELECT 1 FROM public.control_plane_outbox o
               WHERE o.release_run_id = run.id AND o.effect_type = 'github.collaborator_permission.read' AND o.execution_attempt_id = att.id
                 AND o.status IN ('available', 'leased') AND lower(o.payload ->> 'username') = lower(p_username)) THEN
        RETURN NULL; -- this user's press is being checked already (a second press, a redelivery)
    END IF;
    SELECT p.full_name INTO v_full_name FROM public.repositories p WHERE p.id = run.repository_id;
    SELECT coalesce(max(o.generation) + 1, 0) INTO v_generation
    FROM public.control_plane_outbox o
    WHERE o.release_run_id = run.id AND o.effect_type = 'github.collaborator_permission.read' AND o.execution_attempt_id = att.id;
    INSERT INTO public.control_plane_outbox (
        effect_type, idempotency_key, generation, payload, max_attempts, available_at,
        release_run_id, execution_attempt_id, installation_id, traceparent, created_at, updated_at)
    VALUES (
        'github.collaborator_permission.read',
        'github.collaborator_permission.read:' || run.id::text || ':' || att.id::text
            || CASE WHEN v_generation > 0 THEN ':g' || v_generation::text ELSE '' END,
        v_generation,
        jsonb_strip_nulls(jsonb_build_object(
            'release_run_id', run.id, 'execution_attempt_id', att.id, 'attempt_number', att.number,
            'installation_id', run.installation_id, 'repository_full_name', v_full_name,
            'check_run_id', run.check_run_id, 'username', p_username, 'sender_id', p_sender_id,
            'delivery_id', left(p_delivery_id, 100))),
        10, v_now, run.id, att.id, run.installation_id, p_traceparent, v_now, v_now)
    RETURNING id INTO v_id;
    PERFORM pg_notify('boardreadyops_outbox', '');
    RETURN v_id;
END;
$_$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_enqueue_workflow_run_read(p_attempt_id uuid, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    att public.execution_attempts;
    run public.release_runs;
    v_full_name text;
    v_generation integer;
    v_id bigint;
BEGIN
    SELECT * INTO att FROM public.execution_attempts WHERE id = p_attempt_id;
    IF NOT FOUND OR att.workflow_run_id IS NULL OR att.status <> 'running' THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM public.control_plane_outbox o
               WHERE o.release_run_id = att.release_run_id AND o.effect_type = 'github.workflow_run.read' AND o.execution_attempt_id = att.id
                 AND o.status IN ('available', 'leased')) THEN
        RETURN NULL; -- one read at a time
    END IF;
    SELECT * INTO run FROM public.release_runs WHERE id = att.release_run_id;
    SELECT p.full_name INTO v_full_name FROM public.repositories p WHERE p.id = run.repository_id;
    SELECT coalesce(max(o.generation) + 1, 0) INTO v_generation
    FROM public.control_plane_outbox o
    WHERE o.release_run_id = att.release_run_id AND o.effect_type = 'github.workflow_run.read' AND o.execution_attempt_id = att.id;
    INSERT INTO public.control_plane_outbox (
        effect_type, idempotency_key, generation, payload, max_attempts, available_at,
        release_run_id, execution_attempt_id, installation_id, created_at, updated_at)
    VALUES (
        'github.workflow_run.read',
        'github.workflow_run.read:' || run.id::text || ':' || att.id::text
            || CASE WHEN v_generation > 0 THEN ':g' || v_generation::text ELSE '' END,
        v_generation,
        jsonb_build_object('release_run_id', run.id, 'execution_attempt_id', att.id, 'attempt_number', att.number,
                           'installation_id', run.installation_id, 'repository_full_name', v_full_name,
                           'workflow_run_id', att.workflow_run_id),
        10, v_now, run.id, att.id, run.installation_id, v_now, v_now)
    RETURNING id INTO v_id;
    PERFORM pg_notify('boardreadyops_outbox', '');
    RETURN v_id;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_resolve_reconciliation(p_id bigint, p_operator text, p_workflow_run_id bigint, p_evidence text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
    v_generation integer;
    v_new_id bigint;
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'resolution needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_evidence IS NULL OR btrim(p_evidence) = '' THEN
        RAISE EXCEPTION 'resolution needs evidence of what GitHub did' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO r FROM public.control_plane_outbox WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'outbox record % does not exist', p_id USING ERRCODE = 'BR006';
    END IF;
    IF r.effect_type <> 'github.workflow.dispatch' THEN
        RAISE EXCEPTION 'outbox record % is a %, only workflow dispatches are reconciled', p_id, r.effect_type
            USING ERRCODE = 'BR002';
    END IF;
    IF r.status <> 'reconciliation_required' THEN
        RAISE EXCEPTION 'outbox record % is %, not reconciliation_required', p_id, r.status USING ERRCODE = 'BR003';
    END IF;

    IF p_workflow_run_id IS NOT NULL THEN
        PERFORM public.boardreadyops_outbox_advance_dispatched_attempt(r, p_workflow_run_id, v_now);
        UPDATE public.control_plane_outbox
        SET status = 'completed', completed_at = v_now, updated_at = v_now,
            result = jsonb_build_object('workflow_run_id', p_workflow_run_id, 'resolution', 'repair')
        WHERE id = p_id;
        INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
        VALUES (v_now, p_operator, 'outbox.reconciliation.repair', 'outbox', p_id, p_evidence,
                jsonb_build_object('workflow_run_id', p_workflow_run_id, 'delivery_started_at', r.delivery_started_at,
                                   'last_error', r.last_error),
                r.status, 'completed');
        PERFORM public.boardreadyops_execution_attempt_rematch(r.execution_attempt_id, p_workflow_run_id, r.delivery_started_at, v_now);
        RETURN NULL;
    END IF;

    SELECT max(o.generation) + 1 INTO v_generation
    FROM public.control_plane_outbox o
    WHERE o.release_run_id = r.release_run_id AND o.effect_type = 'github.workflow.dispatch' AND o.execution_attempt_id = r.execution_attempt_id;
    INSERT INTO public.control_plane_outbox (
        effect_type, idempotency_key, generation, payload, max_attempts, available_at,
        release_run_id, execution_attempt_id, installation_id, traceparent, created_at, updated_at)
    VALUES (
        r.effect_type,
        r.effect_type || ':' || r.release_run_id::text || ':' || r.execution_attempt_id::text || ':g' || v_generation::text,
        v_generation, r.payload, r.max_attempts, v_now,
        r.release_run_id, r.execution_attempt_id, r.installation_id, r.traceparent, v_now, v_now)
    RETURNING id INTO v_new_id;
    UPDATE public.control_plane_outbox
    SET status = 'completed', completed_at = v_now, superseded_by = v_new_id, updated_at = v_now,
        result = jsonb_build_object('superseded_by', v_new_id, 'resolution', 'supersede')
    WHERE id = p_id;
    INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'outbox.reconciliation.supersede', 'outbox', p_id, p_evidence,
            jsonb_build_object('superseded_by', v_new_id, 'delivery_started_at', r.delivery_started_at,
                               'last_error', r.last_error),
            r.status, 'completed');
    PERFORM public.boardreadyops_release_run_unblock(r, p_operator, v_now);
    PERFORM pg_notify('boardreadyops_outbox', '');
    RETURN v_new_id;
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

-- The new key's unique index (kept when a run interrupted later built it; an interrupted build
-- leaves it INVALID, and the migration stops and says what to do, as 00035 does).
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS execution_attempts_run_attempt_key ON public.execution_attempts (release_run_id, id);
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_index i
               WHERE i.indexrelid = 'public.execution_attempts_run_attempt_key'::pg_catalog.regclass AND NOT i.indisvalid) THEN
        RAISE EXCEPTION 'execution_attempts_run_attempt_key is INVALID (its build was interrupted): run DROP INDEX CONCURRENTLY public.execution_attempts_run_attempt_key, then migrate again';
    END IF;
END;
$$;
-- +goose StatementEnd
-- The keys swapped in one statement: one ACCESS EXCLUSIVE acquisition on both tables (the drop
-- of a foreign key locks the table it references too), for the catalog update only. It waits
-- for every open transaction that touched either table, and writes queue behind it meanwhile:
-- the lock timeout bounds that wait (the migration then fails, and is run again). The new key is
-- enforced for every write from here; VALIDATE checks the existing rows without that lock.
-- +goose StatementBegin
BEGIN;
SET LOCAL lock_timeout = '10s';
ALTER TABLE public.control_plane_outbox
    DROP CONSTRAINT IF EXISTS control_plane_outbox_execution_attempt_id_fkey,
    DROP CONSTRAINT IF EXISTS control_plane_outbox_attempt_of_run_fkey,
    ADD CONSTRAINT control_plane_outbox_attempt_of_run_fkey FOREIGN KEY (release_run_id, execution_attempt_id)
        REFERENCES public.execution_attempts (release_run_id, id) NOT VALID;
COMMIT;
-- +goose StatementEnd
ALTER TABLE public.control_plane_outbox VALIDATE CONSTRAINT control_plane_outbox_attempt_of_run_fkey;
DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_outbox_execution_attempt_idx;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_outbox_execution_attempt_idx;
CREATE INDEX CONCURRENTLY control_plane_outbox_execution_attempt_idx ON public.control_plane_outbox (execution_attempt_id)
    WHERE execution_attempt_id IS NOT NULL;
-- +goose StatementBegin
BEGIN;
SET LOCAL lock_timeout = '10s';
ALTER TABLE public.control_plane_outbox
    DROP CONSTRAINT IF EXISTS control_plane_outbox_attempt_of_run_fkey,
    DROP CONSTRAINT IF EXISTS control_plane_outbox_execution_attempt_id_fkey,
    ADD CONSTRAINT control_plane_outbox_execution_attempt_id_fkey FOREIGN KEY (execution_attempt_id)
        REFERENCES public.execution_attempts (id) NOT VALID;
COMMIT;
-- +goose StatementEnd
ALTER TABLE public.control_plane_outbox VALIDATE CONSTRAINT control_plane_outbox_execution_attempt_id_fkey;
DROP INDEX CONCURRENTLY IF EXISTS public.execution_attempts_run_attempt_key;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_enqueue_collaborator_permission_read(p_run_id uuid, p_username text, p_sender_id bigint, p_delivery_id text, p_traceparent text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    run public.release_runs;
    att public.execution_attempts;
    v_full_name text;
    v_generation integer;
    v_id bigint;
BEGIN
    IF p_username IS NULL OR p_username !~ '^[A-Za-z0-9][A-Za-z0-9-]{0,38}$' THEN
        RAISE EXCEPTION 'not a GitHub login: %', left(p_username, 100) USING ERRCODE = '22023';
    END IF;
    SELECT * INTO run FROM public.release_runs WHERE id = p_run_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT * INTO att FROM public.execution_attempts a WHERE a.release_run_id = run.id AND a.number = run.current_attempt;
    IF EXISTS (SELECT 1 FROM public.control_plane_outbox o
               WHERE o.effect_type = 'github.collaborator_permission.read' AND o.execution_attempt_id = att.id
                 AND o.status IN ('available', 'leased') AND lower(o.payload ->> 'username') = lower(p_username)) THEN
        RETURN NULL; -- this user's press is being checked already (a second press, a redelivery)
    END IF;
    SELECT p.full_name INTO v_full_name FROM public.repositories p WHERE p.id = run.repository_id;
    SELECT coalesce(max(o.generation) + 1, 0) INTO v_generation
    FROM public.control_plane_outbox o
    WHERE o.effect_type = 'github.collaborator_permission.read' AND o.execution_attempt_id = att.id;
    INSERT INTO public.control_plane_outbox (
        effect_type, idempotency_key, generation, payload, max_attempts, available_at,
        release_run_id, execution_attempt_id, installation_id, traceparent, created_at, updated_at)
    VALUES (
        'github.collaborator_permission.read',
        'github.collaborator_permission.read:' || run.id::text || ':' || att.id::text
            || CASE WHEN v_generation > 0 THEN ':g' || v_generation::text ELSE '' END,
        v_generation,
        jsonb_strip_nulls(jsonb_build_object(
            'release_run_id', run.id, 'execution_attempt_id', att.id, 'attempt_number', att.number,
            'installation_id', run.installation_id, 'repository_full_name', v_full_name,
            'check_run_id', run.check_run_id, 'username', p_username, 'sender_id', p_sender_id,
            'delivery_id', left(p_delivery_id, 100))),
        10, v_now, run.id, att.id, run.installation_id, p_traceparent, v_now, v_now)
    RETURNING id INTO v_id;
    PERFORM pg_notify('boardreadyops_outbox', '');
    RETURN v_id;
END;
$_$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_enqueue_workflow_run_read(p_attempt_id uuid, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    att public.execution_attempts;
    run public.release_runs;
    v_full_name text;
    v_generation integer;
    v_id bigint;
BEGIN
    SELECT * INTO att FROM public.execution_attempts WHERE id = p_attempt_id;
    IF NOT FOUND OR att.workflow_run_id IS NULL OR att.status <> 'running' THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM public.control_plane_outbox o
               WHERE o.effect_type = 'github.workflow_run.read' AND o.execution_attempt_id = att.id
                 AND o.status IN ('available', 'leased')) THEN
        RETURN NULL; -- one read at a time
    END IF;
    SELECT * INTO run FROM public.release_runs WHERE id = att.release_run_id;
    SELECT p.full_name INTO v_full_name FROM public.repositories p WHERE p.id = run.repository_id;
    SELECT coalesce(max(o.generation) + 1, 0) INTO v_generation
    FROM public.control_plane_outbox o
    WHERE o.effect_type = 'github.workflow_run.read' AND o.execution_attempt_id = att.id;
    INSERT INTO public.control_plane_outbox (
        effect_type, idempotency_key, generation, payload, max_attempts, available_at,
        release_run_id, execution_attempt_id, installation_id, created_at, updated_at)
    VALUES (
        'github.workflow_run.read',
        'github.workflow_run.read:' || run.id::text || ':' || att.id::text
            || CASE WHEN v_generation > 0 THEN ':g' || v_generation::text ELSE '' END,
        v_generation,
        jsonb_build_object('release_run_id', run.id, 'execution_attempt_id', att.id, 'attempt_number', att.number,
                           'installation_id', run.installation_id, 'repository_full_name', v_full_name,
                           'workflow_run_id', att.workflow_run_id),
        10, v_now, run.id, att.id, run.installation_id, v_now, v_now)
    RETURNING id INTO v_id;
    PERFORM pg_notify('boardreadyops_outbox', '');
    RETURN v_id;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_resolve_reconciliation(p_id bigint, p_operator text, p_workflow_run_id bigint, p_evidence text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
    v_generation integer;
    v_new_id bigint;
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'resolution needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_evidence IS NULL OR btrim(p_evidence) = '' THEN
        RAISE EXCEPTION 'resolution needs evidence of what GitHub did' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO r FROM public.control_plane_outbox WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'outbox record % does not exist', p_id USING ERRCODE = 'BR006';
    END IF;
    IF r.effect_type <> 'github.workflow.dispatch' THEN
        RAISE EXCEPTION 'outbox record % is a %, only workflow dispatches are reconciled', p_id, r.effect_type
            USING ERRCODE = 'BR002';
    END IF;
    IF r.status <> 'reconciliation_required' THEN
        RAISE EXCEPTION 'outbox record % is %, not reconciliation_required', p_id, r.status USING ERRCODE = 'BR003';
    END IF;

    IF p_workflow_run_id IS NOT NULL THEN
        PERFORM public.boardreadyops_outbox_advance_dispatched_attempt(r, p_workflow_run_id, v_now);
        UPDATE public.control_plane_outbox
        SET status = 'completed', completed_at = v_now, updated_at = v_now,
            result = jsonb_build_object('workflow_run_id', p_workflow_run_id, 'resolution', 'repair')
        WHERE id = p_id;
        INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
        VALUES (v_now, p_operator, 'outbox.reconciliation.repair', 'outbox', p_id, p_evidence,
                jsonb_build_object('workflow_run_id', p_workflow_run_id, 'delivery_started_at', r.delivery_started_at,
                                   'last_error', r.last_error),
                r.status, 'completed');
        PERFORM public.boardreadyops_execution_attempt_rematch(r.execution_attempt_id, p_workflow_run_id, r.delivery_started_at, v_now);
        RETURN NULL;
    END IF;

    SELECT max(o.generation) + 1 INTO v_generation
    FROM public.control_plane_outbox o
    WHERE o.effect_type = 'github.workflow.dispatch' AND o.execution_attempt_id = r.execution_attempt_id;
    INSERT INTO public.control_plane_outbox (
        effect_type, idempotency_key, generation, payload, max_attempts, available_at,
        release_run_id, execution_attempt_id, installation_id, traceparent, created_at, updated_at)
    VALUES (
        r.effect_type,
        r.effect_type || ':' || r.release_run_id::text || ':' || r.execution_attempt_id::text || ':g' || v_generation::text,
        v_generation, r.payload, r.max_attempts, v_now,
        r.release_run_id, r.execution_attempt_id, r.installation_id, r.traceparent, v_now, v_now)
    RETURNING id INTO v_new_id;
    UPDATE public.control_plane_outbox
    SET status = 'completed', completed_at = v_now, superseded_by = v_new_id, updated_at = v_now,
        result = jsonb_build_object('superseded_by', v_new_id, 'resolution', 'supersede')
    WHERE id = p_id;
    INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'outbox.reconciliation.supersede', 'outbox', p_id, p_evidence,
            jsonb_build_object('superseded_by', v_new_id, 'delivery_started_at', r.delivery_started_at,
                               'last_error', r.last_error),
            r.status, 'completed');
    PERFORM public.boardreadyops_release_run_unblock(r, p_operator, v_now);
    PERFORM pg_notify('boardreadyops_outbox', '');
    RETURN v_new_id;
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
                          WHERE o.execution_attempt_id = x.id AND o.effect_type = 'github.workflow_run.read'
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
