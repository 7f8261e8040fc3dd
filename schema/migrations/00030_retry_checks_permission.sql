-- Retry must come from a user with write access, and a run paused before its check run existed
-- is told (issue 20).
--
-- The check run's Retry (check_run requested_action) replayed the run's dead letters on the word
-- of the payload's sender. Now boardreadyops_release_run_request_from_check_run enqueues a
-- github.collaborator_permission.read effect instead, and the dispatcher asks GitHub (lifecycle
-- never calls GitHub). The new effect type:
--   replay-safe  a GET of the sender's permission (GET /repos/{owner}/{repo}/collaborators/
--                {username}/permission): reading twice changes nothing; the claim records
--                delivery_started_at as for the other replay-safe effects;
--   key          github.collaborator_permission.read:<release_run_id>:<execution_attempt_id>[:g<n>],
--                n the attempt's count of permission reads so far, taken under the run's row
--                lock; at most one read per user is pending (a second press or a redelivery adds
--                none);
--   payload      release run, attempt (id and number), installation, repository full name, check
--                run id, the sender's login (GitHub's shape, checked: it is a path segment), id
--                and the delivery id: under 600 bytes of the 8 KiB bound, no credential.
-- boardreadyops_outbox_complete_collaborator_permission_read records what GitHub answered. For
-- permission admin or write (maintain reads as write) or role_name admin, maintain or write, it
-- replays the run's dead letters as the Retry did (boardreadyops_outbox_replay, operator
-- github:<login>, an outbox.replay audit row each) if the run is still blocked by them and by no
-- reconciliation; otherwise (read, triage, none, or not a collaborator: the dispatcher passes a
-- 404 as no permission) it replays nothing, writes a check_run.retry.refused audit row naming
-- the user and why, and answers on the check run, which stays failed with Retry. A read that
-- dead-letters blocks nothing (the run stays blocked by its own dead letters, which
-- boardreadyops_release_run_enqueue_check_run still names as the reason) and is answered on the
-- check run; Retry can be pressed again.
--
-- The paused-at-creation case (docs/operations.md, pause runbook): a run created before a
-- dispatch pause whose check run is created during it was not told (its creation payload
-- predates the pause, and boardreadyops_release_run_tell_pause told only runs that had a check
-- run). boardreadyops_outbox_complete_check_run_create now enqueues the pause notice through
-- boardreadyops_release_run_enqueue_check_run when the run waits for its dispatch under a pause
-- its creation payload did not name.
-- New functions follow docs/operations.md, "Rules for a new function".

-- +goose Up
ALTER TABLE public.control_plane_audit DROP CONSTRAINT control_plane_audit_action_check;
ALTER TABLE public.control_plane_audit ADD CONSTRAINT control_plane_audit_action_check CHECK (action IN (
    'outbox.replay', 'job.replay', 'outbox.reconciliation.repair', 'outbox.reconciliation.supersede',
    'outbox.restore_fence', 'outbox.reconciliation.left', 'release_run.cancel', 'dispatch.pause', 'dispatch.resume',
    'release_settings.set', 'release_settings.unset', 'check_run.retry.refused'));

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_enqueue_collaborator_permission_read(
    p_run_id uuid, p_username text, p_sender_id bigint, p_delivery_id text, p_traceparent text, p_now timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_complete_collaborator_permission_read(
    p_id bigint, p_worker text, p_permission text, p_role_name text, p_now timestamptz DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
    run public.release_runs;
    v_login text;
    v_permission text := lower(left(p_permission, 64));
    v_role text := left(p_role_name, 100);
    v_pressed text;
    v_why text;
    v_id bigint;
    v_n integer := 0;
    v_outcome text;
BEGIN
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, 'github.collaborator_permission.read');
    SELECT * INTO run FROM public.release_runs WHERE id = r.release_run_id FOR UPDATE;
    v_login := r.payload ->> 'username';
    v_pressed := format('Retry pressed on check run %s by GitHub user %s (id %s), delivery %s',
                        r.payload ->> 'check_run_id', v_login, coalesce(r.payload ->> 'sender_id', 'unknown'),
                        coalesce(r.payload ->> 'delivery_id', 'unknown'));
    -- permission is GitHub's base role (maintain reads as write, triage as read); role_name the
    -- role itself, custom roles included.
    IF v_permission IN ('admin', 'write') OR lower(v_role) IN ('admin', 'maintain', 'write') THEN
        IF run.status = 'blocked' AND NOT EXISTS (SELECT 1 FROM public.control_plane_outbox o
                                                  WHERE o.release_run_id = run.id AND o.status = 'reconciliation_required') THEN
            -- A dead letter never reached GitHub's side effect (or was refused): replaying it is
            -- what an operator's brops outbox replay does, audited under the GitHub user's name.
            FOR v_id IN SELECT o.id FROM public.control_plane_outbox o
                        WHERE o.release_run_id = run.id AND o.status = 'dead_letter'
                          AND o.effect_type <> 'github.collaborator_permission.read'
                        ORDER BY o.id LOOP
                PERFORM public.boardreadyops_outbox_replay(v_id, 'github:' || v_login,
                    format('%s, permission %s (role %s) read from GitHub', v_pressed,
                           coalesce(v_permission, 'none'), coalesce(v_role, 'unknown')), v_now);
                v_n := v_n + 1;
            END LOOP;
        END IF;
        -- Nothing left to replay: the run moved on meanwhile (another Retry, an operator).
        v_outcome := CASE WHEN v_n > 0 THEN 'retried' ELSE 'nothing_to_retry' END;
    ELSE
        v_why := CASE WHEN p_permission IS NULL
                      THEN format('%s is not a collaborator of %s (GitHub answered 404)', v_login, r.payload ->> 'repository_full_name')
                      ELSE format('%s has permission %s (role %s) on %s; Retry needs admin, maintain or write',
                                  v_login, coalesce(v_permission, 'none'), coalesce(v_role, 'unknown'), r.payload ->> 'repository_full_name') END;
        INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence,
                                                from_status, to_status, release_run_id)
        VALUES (v_now, 'github:' || v_login, 'check_run.retry.refused', 'outbox', p_id,
                left(v_pressed || ', refused: ' || v_why, 2000),
                jsonb_strip_nulls(jsonb_build_object('permission', v_permission, 'role_name', v_role,
                                                     'collaborator', p_permission IS NOT NULL)),
                run.status, run.status, run.id);
        IF run.status = 'blocked' THEN
            -- Said on the check run, which stays as it was: failed, with Retry.
            PERFORM public.boardreadyops_release_run_enqueue_check_run(run.id, NULL,
                format('Retry requested by @%s was refused: only a user with write access to the repository can retry a release.', v_login),
                r.traceparent, v_now);
        END IF;
        v_outcome := 'refused';
    END IF;
    UPDATE public.control_plane_outbox
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL, last_error = NULL,
        result = jsonb_strip_nulls(jsonb_build_object('permission', v_permission, 'role_name', v_role,
                                                      'collaborator', p_permission IS NOT NULL, 'outcome', v_outcome)),
        updated_at = v_now
    WHERE id = p_id;
    RETURN v_outcome;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_validate_row(p_effect_type text, p_idempotency_key text, p_generation integer, p_payload jsonb, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_delivery_started_at timestamp with time zone, p_completed_at timestamp with time zone, p_last_error text, p_result jsonb, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_traceparent text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
BEGIN
    -- Every rule in one expression: the common case is a single evaluation.
    IF (p_effect_type IN ('github.check_run.create', 'github.workflow.dispatch', 'github.check_run.complete', 'github.workflow_run.read', 'github.collaborator_permission.read')) IS NOT FALSE
        AND (p_generation >= 0) IS NOT FALSE
        AND (jsonb_typeof(p_payload) = 'object' AND pg_column_size(p_payload) <= 8192) IS NOT FALSE
        AND (p_status IN ('available', 'leased', 'completed', 'dead_letter', 'reconciliation_required')) IS NOT FALSE
        AND (p_attempts >= 0) IS NOT FALSE
        AND (p_max_attempts BETWEEN 1 AND 1000) IS NOT FALSE
        AND (length(p_lease_owner) BETWEEN 1 AND 200) IS NOT FALSE
        AND (length(p_last_error) <= 4096) IS NOT FALSE
        AND (jsonb_typeof(p_result) = 'object' AND pg_column_size(p_result) <= 4096) IS NOT FALSE
        AND (p_installation_id > 0) IS NOT FALSE
        AND (length(p_traceparent) = 55 AND substr(p_traceparent, 36, 1) = '-'
            AND p_traceparent ~ '^[0-9a-f][0-9a-f]-[0-9a-f]+-[0-9a-f]+-[0-9a-f][0-9a-f]$') IS NOT FALSE
        AND (p_idempotency_key = p_effect_type || ':' || p_release_run_id::text
            || coalesce(':' || p_execution_attempt_id::text, '')
            || CASE WHEN p_generation > 0 THEN ':g' || p_generation::text ELSE '' END) IS NOT FALSE
        AND ((p_effect_type = 'github.check_run.create') = (p_execution_attempt_id IS NULL)) IS NOT FALSE
        AND (p_generation = 0 OR p_effect_type IN ('github.workflow.dispatch', 'github.check_run.complete', 'github.workflow_run.read', 'github.collaborator_permission.read')) IS NOT FALSE
        AND ((p_status = 'leased') = (p_lease_owner IS NOT NULL AND p_lease_expires_at IS NOT NULL)
            AND (p_status = 'leased' OR (p_lease_owner IS NULL AND p_lease_expires_at IS NULL))) IS NOT FALSE
        AND ((p_status = 'completed') = (p_completed_at IS NOT NULL)) IS NOT FALSE
        AND (p_status <> 'reconciliation_required'
            OR (p_effect_type = 'github.workflow.dispatch' AND p_delivery_started_at IS NOT NULL)) IS NOT FALSE THEN
        RETURN true;
    END IF;
    -- A rule is false: name it.
    IF NOT (p_effect_type IN ('github.check_run.create', 'github.workflow.dispatch', 'github.check_run.complete', 'github.workflow_run.read', 'github.collaborator_permission.read')) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_effect_type_check');
    END IF;
    IF NOT (p_generation >= 0) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_generation_check');
    END IF;
    IF NOT (jsonb_typeof(p_payload) = 'object' AND pg_column_size(p_payload) <= 8192) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_payload_check');
    END IF;
    IF NOT (p_status IN ('available', 'leased', 'completed', 'dead_letter', 'reconciliation_required')) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_status_check');
    END IF;
    IF NOT (p_attempts >= 0) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_attempts_check');
    END IF;
    IF NOT (p_max_attempts BETWEEN 1 AND 1000) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_max_attempts_check');
    END IF;
    IF NOT (length(p_lease_owner) BETWEEN 1 AND 200) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_lease_owner_check');
    END IF;
    IF NOT (length(p_last_error) <= 4096) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_last_error_check');
    END IF;
    IF NOT (jsonb_typeof(p_result) = 'object' AND pg_column_size(p_result) <= 4096) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_result_check');
    END IF;
    IF NOT (p_installation_id > 0) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_installation_id_check');
    END IF;
    IF NOT (length(p_traceparent) = 55 AND substr(p_traceparent, 36, 1) = '-'
            AND p_traceparent ~ '^[0-9a-f][0-9a-f]-[0-9a-f]+-[0-9a-f]+-[0-9a-f][0-9a-f]$') THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_traceparent_check');
    END IF;
    IF NOT (p_idempotency_key = p_effect_type || ':' || p_release_run_id::text
            || coalesce(':' || p_execution_attempt_id::text, '')
            || CASE WHEN p_generation > 0 THEN ':g' || p_generation::text ELSE '' END) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_idempotency_key_check');
    END IF;
    IF NOT ((p_effect_type = 'github.check_run.create') = (p_execution_attempt_id IS NULL)) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_attempt_check');
    END IF;
    IF NOT (p_generation = 0 OR p_effect_type IN ('github.workflow.dispatch', 'github.check_run.complete', 'github.workflow_run.read', 'github.collaborator_permission.read')) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_generation_effect_check');
    END IF;
    IF NOT ((p_status = 'leased') = (p_lease_owner IS NOT NULL AND p_lease_expires_at IS NOT NULL)
            AND (p_status = 'leased' OR (p_lease_owner IS NULL AND p_lease_expires_at IS NULL))) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_lease_check');
    END IF;
    IF NOT ((p_status = 'completed') = (p_completed_at IS NOT NULL)) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_completed_check');
    END IF;
    IF NOT (p_status <> 'reconciliation_required'
            OR (p_effect_type = 'github.workflow.dispatch' AND p_delivery_started_at IS NOT NULL)) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_reconciliation_check');
    END IF;
    RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_row_check');
END;
$_$;
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_unblock(r public.control_plane_outbox, p_operator text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    run public.release_runs;
    v_who text;
BEGIN
    SELECT * INTO run FROM public.release_runs WHERE id = r.release_run_id FOR UPDATE;
    IF NOT FOUND OR run.status <> 'blocked' OR r.effect_type = 'github.collaborator_permission.read' THEN
        RETURN; -- a permission read replayed by an operator unblocks nothing by itself
    END IF;
    IF EXISTS (SELECT 1 FROM public.control_plane_outbox o
               WHERE o.release_run_id = run.id AND o.status IN ('dead_letter', 'reconciliation_required')
                 AND o.effect_type <> 'github.collaborator_permission.read') THEN
        RETURN; -- something else still blocks it
    END IF;
    UPDATE public.release_runs
    SET status = CASE WHEN run.check_run_id IS NULL THEN 'check_pending' ELSE 'dispatching' END, updated_at = v_now
    WHERE id = run.id;
    v_who := CASE WHEN p_operator LIKE 'github:%' THEN 'Retry requested by @' || substr(p_operator, length('github:') + 1)
                  ELSE 'Operator ' || p_operator || ' resolved it' END;
    PERFORM public.boardreadyops_release_run_enqueue_check_run(run.id, 'retrying',
        v_who || ': the release workflow is dispatched again.', r.traceparent, v_now);
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_block(p_outbox_id bigint, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
    run public.release_runs;
    att public.execution_attempts;
BEGIN
    SELECT * INTO r FROM public.control_plane_outbox WHERE id = p_outbox_id;
    IF NOT FOUND OR r.status NOT IN ('dead_letter', 'reconciliation_required') THEN
        RETURN;
    END IF;
    SELECT * INTO run FROM public.release_runs WHERE id = r.release_run_id FOR UPDATE;
    IF r.effect_type = 'github.workflow.dispatch' THEN
        SELECT * INTO att FROM public.execution_attempts WHERE id = r.execution_attempt_id;
        IF att.number <> run.current_attempt OR att.status <> 'dispatching' OR run.status NOT IN ('dispatching', 'blocked') THEN
            RETURN; -- not the run's current dispatch any more
        END IF;
        UPDATE public.release_runs SET status = 'blocked', updated_at = v_now WHERE id = run.id;
        PERFORM public.boardreadyops_release_run_enqueue_check_run(run.id,
            CASE r.status WHEN 'reconciliation_required' THEN 'dispatch_unknown' ELSE 'dispatch_failed' END,
            NULL, r.traceparent, v_now);
    ELSIF r.effect_type = 'github.collaborator_permission.read' THEN
        -- A Retry whose sender's permission could not be read: nothing was retried, the run
        -- stays blocked by its own dead letters, and the check run says so (Retry still offered).
        IF run.status = 'blocked' THEN
            PERFORM public.boardreadyops_release_run_enqueue_check_run(run.id, NULL,
                format('Retry requested by @%s was not done: their permission on the repository could not be read from GitHub (%s). Press Retry to try again.',
                       r.payload ->> 'username', left(r.last_error, 200)),
                r.traceparent, v_now);
        END IF;
    ELSIF r.effect_type = 'github.check_run.create' AND run.status = 'check_pending' THEN
        -- No check run to tell: the run is blocked for operators (brops) to see.
        UPDATE public.release_runs SET status = 'blocked', updated_at = v_now WHERE id = run.id;
    END IF;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_request_from_check_run(p_job_id bigint, p_worker text, p_check_run_name text, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(outcome text, release_run_id uuid, outbox_id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    j public.control_plane_jobs;
    i public.webhook_inbox;
    run public.release_runs;
    v_cr jsonb;
    v_ext text;
    v_login text;
    v_who text;
    v_unknown boolean;
    v_outbox bigint;
BEGIN
    j := public.boardreadyops_job_lock_leased(p_job_id, p_worker);
    SELECT * INTO i FROM public.webhook_inbox WHERE id = j.inbox_id;
    IF i.event IS DISTINCT FROM 'check_run' OR i.action NOT IN ('rerequested', 'requested_action') OR i.repository_id IS NULL THEN
        RAISE EXCEPTION 'job % is not a check_run rerequested or requested_action delivery', p_job_id USING ERRCODE = 'BR005';
    END IF;
    v_cr := i.payload -> 'check_run';
    v_ext := v_cr ->> 'external_id';
    IF v_ext IS NULL OR v_ext !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RETURN QUERY SELECT 'unknown'::text, NULL::uuid, NULL::bigint;
        RETURN;
    END IF;
    SELECT * INTO run FROM public.release_runs r WHERE r.id = v_ext::uuid FOR UPDATE;
    IF NOT FOUND OR run.repository_id IS DISTINCT FROM i.repository_id
       OR run.check_run_id IS DISTINCT FROM (v_cr ->> 'id')::bigint OR (v_cr ->> 'name') IS DISTINCT FROM p_check_run_name THEN
        RETURN QUERY SELECT 'unknown'::text, NULL::uuid, NULL::bigint;
        RETURN;
    END IF;
    v_login := nullif(v_cr ->> 'sender_login', '');
    v_who := coalesce('@' || v_login, 'someone');
    v_unknown := EXISTS (SELECT 1 FROM public.control_plane_outbox o
                         WHERE o.release_run_id = run.id AND o.status = 'reconciliation_required');

    IF i.action = 'rerequested' THEN
        IF run.status IN ('succeeded', 'failed', 'cancelled') THEN
            RETURN QUERY SELECT 'rerun'::text, run.id, NULL::bigint; -- the caller starts the next attempt
            RETURN;
        END IF;
        v_outbox := public.boardreadyops_release_run_enqueue_check_run(run.id, NULL,
            format('Re-run requested by %s while the release is %s: nothing new was started.%s', v_who,
                   CASE run.status WHEN 'blocked' THEN 'blocked' WHEN 'running' THEN 'still running' ELSE 'still starting' END,
                   CASE WHEN run.status = 'blocked' AND NOT v_unknown THEN ' Press Retry to start it again.' ELSE '' END),
            p_traceparent, v_now);
        RETURN QUERY SELECT 'answered'::text, run.id, v_outbox;
        RETURN;
    END IF;

    -- requested_action: only our "Retry", pressed by a person.
    -- A login is GitHub's shape (1 to 39 letters, digits and hyphens) or it is not a person's:
    -- it becomes a path segment of the permission read.
    IF (v_cr ->> 'requested_action') IS DISTINCT FROM 'retry' OR v_login IS NULL OR (v_cr ->> 'sender_type') = 'Bot'
       OR v_login !~ '^[A-Za-z0-9][A-Za-z0-9-]{0,38}$' THEN
        RETURN QUERY SELECT 'ignored'::text, run.id, NULL::bigint;
        RETURN;
    END IF;
    IF run.status = 'blocked' AND NOT v_unknown
       AND EXISTS (SELECT 1 FROM public.control_plane_outbox o
                   WHERE o.release_run_id = run.id AND o.status = 'dead_letter'
                     AND o.effect_type <> 'github.collaborator_permission.read') THEN
        -- The sender is only a name in the payload: the dispatcher asks GitHub for their
        -- permission on the repository, and the read's completion replays the dead letters only
        -- for write access or more (lifecycle makes no GitHub request).
        RETURN QUERY SELECT 'checking'::text, run.id,
            public.boardreadyops_outbox_enqueue_collaborator_permission_read(run.id, v_login,
                (v_cr ->> 'sender_id')::bigint, i.delivery_id, p_traceparent, v_now);
        RETURN;
    END IF;
    v_outbox := public.boardreadyops_release_run_enqueue_check_run(run.id, NULL,
        CASE WHEN v_unknown
             THEN format('Retry requested by %s: it is not known whether the release workflow started, so it is not started again; an operator has been asked to check.', v_who)
             ELSE format('Retry requested by %s: there is nothing to retry (the release is %s).', v_who, run.status) END,
        p_traceparent, v_now);
    RETURN QUERY SELECT 'answered'::text, run.id, v_outbox;
END;
$_$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_check_run_create(p_id bigint, p_worker text, p_check_run_id bigint, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r   public.control_plane_outbox;
    run public.release_runs;
    att public.execution_attempts;
    v_dispatch_id bigint;
    v_paused text;
BEGIN
    IF p_check_run_id IS NULL OR p_check_run_id <= 0 THEN
        RAISE EXCEPTION 'check run id must be positive, got %', p_check_run_id USING ERRCODE = '22023';
    END IF;
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, 'github.check_run.create');

    SELECT * INTO run FROM public.release_runs WHERE id = r.release_run_id FOR UPDATE;
    IF run.check_run_id IS NOT NULL AND run.check_run_id <> p_check_run_id THEN
        RAISE EXCEPTION 'release run % already has check run %, not %', run.id, run.check_run_id, p_check_run_id
            USING ERRCODE = 'BR005';
    END IF;

    IF run.status = 'check_pending' THEN
        UPDATE public.execution_attempts SET status = 'dispatching', updated_at = v_now
        WHERE release_run_id = run.id AND number = run.current_attempt AND status = 'pending'
        RETURNING * INTO att;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'release run %: attempt % is not pending', run.id, run.current_attempt
                USING ERRCODE = 'BR005';
        END IF;
        UPDATE public.release_runs SET check_run_id = p_check_run_id, status = 'dispatching', updated_at = v_now
        WHERE id = run.id;
        v_dispatch_id := public.boardreadyops_outbox_enqueue_attempt_dispatch(run.id, att.id, r.traceparent, v_now);
        -- Paused since the run was created: its creation payload could not say so, and the
        -- pause told only the runs that had a check run then. The check run says it now.
        v_paused := public.boardreadyops_outbox_dispatch_pause_reason(run.installation_id);
        IF v_paused IS NOT NULL AND v_paused IS DISTINCT FROM r.payload ->> 'dispatch_paused' THEN
            PERFORM public.boardreadyops_release_run_enqueue_check_run(run.id, 'dispatching',
                format('The release is paused: an operator paused workflow dispatches (%s). The release workflow starts when they resume.', v_paused),
                r.traceparent, v_now);
        END IF;
    ELSE
        UPDATE public.release_runs SET check_run_id = p_check_run_id, updated_at = v_now WHERE id = run.id;
    END IF;

    UPDATE public.control_plane_outbox
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
        result = jsonb_build_object('check_run_id', p_check_run_id), last_error = NULL, updated_at = v_now
    WHERE id = p_id;
    RETURN v_dispatch_id;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'boardreadyops_schema_owner') THEN
        ALTER FUNCTION public.boardreadyops_outbox_enqueue_collaborator_permission_read(uuid, text, bigint, text, text, timestamptz) OWNER TO boardreadyops_schema_owner;
        ALTER FUNCTION public.boardreadyops_outbox_complete_collaborator_permission_read(bigint, text, text, text, timestamptz) OWNER TO boardreadyops_schema_owner;
    END IF;
END;
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION public.boardreadyops_outbox_enqueue_collaborator_permission_read(uuid, text, bigint, text, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_enqueue_collaborator_permission_read(uuid, text, bigint, text, text, timestamptz) TO boardreadyops_admin;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_outbox_complete_collaborator_permission_read(bigint, text, text, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_complete_collaborator_permission_read(bigint, text, text, text, timestamptz) TO boardreadyops_dispatcher, boardreadyops_admin;

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM public.control_plane_outbox WHERE effect_type = 'github.collaborator_permission.read') THEN
        RAISE EXCEPTION 'permission reads are recorded; the previous schema cannot hold them' USING ERRCODE = '55000';
    END IF;
    IF EXISTS (SELECT 1 FROM public.control_plane_audit WHERE action = 'check_run.retry.refused') THEN
        RAISE EXCEPTION 'control_plane_audit holds refused Retries; the audit trail is never rewritten' USING ERRCODE = '55000';
    END IF;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_validate_row(p_effect_type text, p_idempotency_key text, p_generation integer, p_payload jsonb, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_delivery_started_at timestamp with time zone, p_completed_at timestamp with time zone, p_last_error text, p_result jsonb, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_traceparent text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
BEGIN
    -- Every rule in one expression: the common case is a single evaluation.
    IF (p_effect_type IN ('github.check_run.create', 'github.workflow.dispatch', 'github.check_run.complete', 'github.workflow_run.read')) IS NOT FALSE
        AND (p_generation >= 0) IS NOT FALSE
        AND (jsonb_typeof(p_payload) = 'object' AND pg_column_size(p_payload) <= 8192) IS NOT FALSE
        AND (p_status IN ('available', 'leased', 'completed', 'dead_letter', 'reconciliation_required')) IS NOT FALSE
        AND (p_attempts >= 0) IS NOT FALSE
        AND (p_max_attempts BETWEEN 1 AND 1000) IS NOT FALSE
        AND (length(p_lease_owner) BETWEEN 1 AND 200) IS NOT FALSE
        AND (length(p_last_error) <= 4096) IS NOT FALSE
        AND (jsonb_typeof(p_result) = 'object' AND pg_column_size(p_result) <= 4096) IS NOT FALSE
        AND (p_installation_id > 0) IS NOT FALSE
        AND (length(p_traceparent) = 55 AND substr(p_traceparent, 36, 1) = '-'
            AND p_traceparent ~ '^[0-9a-f][0-9a-f]-[0-9a-f]+-[0-9a-f]+-[0-9a-f][0-9a-f]$') IS NOT FALSE
        AND (p_idempotency_key = p_effect_type || ':' || p_release_run_id::text
            || coalesce(':' || p_execution_attempt_id::text, '')
            || CASE WHEN p_generation > 0 THEN ':g' || p_generation::text ELSE '' END) IS NOT FALSE
        AND ((p_effect_type = 'github.check_run.create') = (p_execution_attempt_id IS NULL)) IS NOT FALSE
        AND (p_generation = 0 OR p_effect_type IN ('github.workflow.dispatch', 'github.check_run.complete', 'github.workflow_run.read')) IS NOT FALSE
        AND ((p_status = 'leased') = (p_lease_owner IS NOT NULL AND p_lease_expires_at IS NOT NULL)
            AND (p_status = 'leased' OR (p_lease_owner IS NULL AND p_lease_expires_at IS NULL))) IS NOT FALSE
        AND ((p_status = 'completed') = (p_completed_at IS NOT NULL)) IS NOT FALSE
        AND (p_status <> 'reconciliation_required'
            OR (p_effect_type = 'github.workflow.dispatch' AND p_delivery_started_at IS NOT NULL)) IS NOT FALSE THEN
        RETURN true;
    END IF;
    -- A rule is false: name it.
    IF NOT (p_effect_type IN ('github.check_run.create', 'github.workflow.dispatch', 'github.check_run.complete', 'github.workflow_run.read')) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_effect_type_check');
    END IF;
    IF NOT (p_generation >= 0) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_generation_check');
    END IF;
    IF NOT (jsonb_typeof(p_payload) = 'object' AND pg_column_size(p_payload) <= 8192) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_payload_check');
    END IF;
    IF NOT (p_status IN ('available', 'leased', 'completed', 'dead_letter', 'reconciliation_required')) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_status_check');
    END IF;
    IF NOT (p_attempts >= 0) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_attempts_check');
    END IF;
    IF NOT (p_max_attempts BETWEEN 1 AND 1000) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_max_attempts_check');
    END IF;
    IF NOT (length(p_lease_owner) BETWEEN 1 AND 200) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_lease_owner_check');
    END IF;
    IF NOT (length(p_last_error) <= 4096) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_last_error_check');
    END IF;
    IF NOT (jsonb_typeof(p_result) = 'object' AND pg_column_size(p_result) <= 4096) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_result_check');
    END IF;
    IF NOT (p_installation_id > 0) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_installation_id_check');
    END IF;
    IF NOT (length(p_traceparent) = 55 AND substr(p_traceparent, 36, 1) = '-'
            AND p_traceparent ~ '^[0-9a-f][0-9a-f]-[0-9a-f]+-[0-9a-f]+-[0-9a-f][0-9a-f]$') THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_traceparent_check');
    END IF;
    IF NOT (p_idempotency_key = p_effect_type || ':' || p_release_run_id::text
            || coalesce(':' || p_execution_attempt_id::text, '')
            || CASE WHEN p_generation > 0 THEN ':g' || p_generation::text ELSE '' END) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_idempotency_key_check');
    END IF;
    IF NOT ((p_effect_type = 'github.check_run.create') = (p_execution_attempt_id IS NULL)) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_attempt_check');
    END IF;
    IF NOT (p_generation = 0 OR p_effect_type IN ('github.workflow.dispatch', 'github.check_run.complete', 'github.workflow_run.read')) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_generation_effect_check');
    END IF;
    IF NOT ((p_status = 'leased') = (p_lease_owner IS NOT NULL AND p_lease_expires_at IS NOT NULL)
            AND (p_status = 'leased' OR (p_lease_owner IS NULL AND p_lease_expires_at IS NULL))) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_lease_check');
    END IF;
    IF NOT ((p_status = 'completed') = (p_completed_at IS NOT NULL)) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_completed_check');
    END IF;
    IF NOT (p_status <> 'reconciliation_required'
            OR (p_effect_type = 'github.workflow.dispatch' AND p_delivery_started_at IS NOT NULL)) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_reconciliation_check');
    END IF;
    RETURN public.boardreadyops_row_rule_violation('control_plane_outbox', 'control_plane_outbox_row_check');
END;
$_$;
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_unblock(r public.control_plane_outbox, p_operator text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    run public.release_runs;
    v_who text;
BEGIN
    SELECT * INTO run FROM public.release_runs WHERE id = r.release_run_id FOR UPDATE;
    IF NOT FOUND OR run.status <> 'blocked' THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM public.control_plane_outbox o
               WHERE o.release_run_id = run.id AND o.status IN ('dead_letter', 'reconciliation_required')) THEN
        RETURN; -- something else still blocks it
    END IF;
    UPDATE public.release_runs
    SET status = CASE WHEN run.check_run_id IS NULL THEN 'check_pending' ELSE 'dispatching' END, updated_at = v_now
    WHERE id = run.id;
    v_who := CASE WHEN p_operator LIKE 'github:%' THEN 'Retry requested by @' || substr(p_operator, length('github:') + 1)
                  ELSE 'Operator ' || p_operator || ' resolved it' END;
    PERFORM public.boardreadyops_release_run_enqueue_check_run(run.id, 'retrying',
        v_who || ': the release workflow is dispatched again.', r.traceparent, v_now);
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_block(p_outbox_id bigint, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
    run public.release_runs;
    att public.execution_attempts;
BEGIN
    SELECT * INTO r FROM public.control_plane_outbox WHERE id = p_outbox_id;
    IF NOT FOUND OR r.status NOT IN ('dead_letter', 'reconciliation_required') THEN
        RETURN;
    END IF;
    SELECT * INTO run FROM public.release_runs WHERE id = r.release_run_id FOR UPDATE;
    IF r.effect_type = 'github.workflow.dispatch' THEN
        SELECT * INTO att FROM public.execution_attempts WHERE id = r.execution_attempt_id;
        IF att.number <> run.current_attempt OR att.status <> 'dispatching' OR run.status NOT IN ('dispatching', 'blocked') THEN
            RETURN; -- not the run's current dispatch any more
        END IF;
        UPDATE public.release_runs SET status = 'blocked', updated_at = v_now WHERE id = run.id;
        PERFORM public.boardreadyops_release_run_enqueue_check_run(run.id,
            CASE r.status WHEN 'reconciliation_required' THEN 'dispatch_unknown' ELSE 'dispatch_failed' END,
            NULL, r.traceparent, v_now);
    ELSIF r.effect_type = 'github.check_run.create' AND run.status = 'check_pending' THEN
        -- No check run to tell: the run is blocked for operators (brops) to see.
        UPDATE public.release_runs SET status = 'blocked', updated_at = v_now WHERE id = run.id;
    END IF;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_request_from_check_run(p_job_id bigint, p_worker text, p_check_run_name text, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(outcome text, release_run_id uuid, outbox_id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    j public.control_plane_jobs;
    i public.webhook_inbox;
    run public.release_runs;
    v_cr jsonb;
    v_ext text;
    v_login text;
    v_who text;
    v_unknown boolean;
    v_id bigint;
    v_n integer := 0;
    v_outbox bigint;
BEGIN
    j := public.boardreadyops_job_lock_leased(p_job_id, p_worker);
    SELECT * INTO i FROM public.webhook_inbox WHERE id = j.inbox_id;
    IF i.event IS DISTINCT FROM 'check_run' OR i.action NOT IN ('rerequested', 'requested_action') OR i.repository_id IS NULL THEN
        RAISE EXCEPTION 'job % is not a check_run rerequested or requested_action delivery', p_job_id USING ERRCODE = 'BR005';
    END IF;
    v_cr := i.payload -> 'check_run';
    v_ext := v_cr ->> 'external_id';
    IF v_ext IS NULL OR v_ext !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RETURN QUERY SELECT 'unknown'::text, NULL::uuid, NULL::bigint;
        RETURN;
    END IF;
    SELECT * INTO run FROM public.release_runs r WHERE r.id = v_ext::uuid FOR UPDATE;
    IF NOT FOUND OR run.repository_id IS DISTINCT FROM i.repository_id
       OR run.check_run_id IS DISTINCT FROM (v_cr ->> 'id')::bigint OR (v_cr ->> 'name') IS DISTINCT FROM p_check_run_name THEN
        RETURN QUERY SELECT 'unknown'::text, NULL::uuid, NULL::bigint;
        RETURN;
    END IF;
    v_login := nullif(v_cr ->> 'sender_login', '');
    v_who := coalesce('@' || v_login, 'someone');
    v_unknown := EXISTS (SELECT 1 FROM public.control_plane_outbox o
                         WHERE o.release_run_id = run.id AND o.status = 'reconciliation_required');

    IF i.action = 'rerequested' THEN
        IF run.status IN ('succeeded', 'failed', 'cancelled') THEN
            RETURN QUERY SELECT 'rerun'::text, run.id, NULL::bigint; -- the caller starts the next attempt
            RETURN;
        END IF;
        v_outbox := public.boardreadyops_release_run_enqueue_check_run(run.id, NULL,
            format('Re-run requested by %s while the release is %s: nothing new was started.%s', v_who,
                   CASE run.status WHEN 'blocked' THEN 'blocked' WHEN 'running' THEN 'still running' ELSE 'still starting' END,
                   CASE WHEN run.status = 'blocked' AND NOT v_unknown THEN ' Press Retry to start it again.' ELSE '' END),
            p_traceparent, v_now);
        RETURN QUERY SELECT 'answered'::text, run.id, v_outbox;
        RETURN;
    END IF;

    -- requested_action: only our "Retry", pressed by a person.
    IF (v_cr ->> 'requested_action') IS DISTINCT FROM 'retry' OR v_login IS NULL OR (v_cr ->> 'sender_type') = 'Bot' THEN
        RETURN QUERY SELECT 'ignored'::text, run.id, NULL::bigint;
        RETURN;
    END IF;
    IF run.status = 'blocked' AND NOT v_unknown THEN
        -- A dead letter never reached GitHub's side effect (or was refused): replaying it is what an
        -- operator's brops outbox replay does, audited under the GitHub user's name.
        FOR v_id IN SELECT o.id FROM public.control_plane_outbox o
                    WHERE o.release_run_id = run.id AND o.status = 'dead_letter' ORDER BY o.id LOOP
            PERFORM public.boardreadyops_outbox_replay(v_id, 'github:' || v_login,
                format('Retry pressed on check run %s by GitHub user %s (id %s), delivery %s',
                       run.check_run_id, v_login, coalesce(v_cr ->> 'sender_id', 'unknown'), i.delivery_id), v_now);
            v_n := v_n + 1;
        END LOOP;
        IF v_n > 0 THEN
            RETURN QUERY SELECT 'retried'::text, run.id, NULL::bigint;
            RETURN;
        END IF;
    END IF;
    v_outbox := public.boardreadyops_release_run_enqueue_check_run(run.id, NULL,
        CASE WHEN v_unknown
             THEN format('Retry requested by %s: it is not known whether the release workflow started, so it is not started again; an operator has been asked to check.', v_who)
             ELSE format('Retry requested by %s: there is nothing to retry (the release is %s).', v_who, run.status) END,
        p_traceparent, v_now);
    RETURN QUERY SELECT 'answered'::text, run.id, v_outbox;
END;
$_$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_check_run_create(p_id bigint, p_worker text, p_check_run_id bigint, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r   public.control_plane_outbox;
    run public.release_runs;
    att public.execution_attempts;
    v_dispatch_id bigint;
BEGIN
    IF p_check_run_id IS NULL OR p_check_run_id <= 0 THEN
        RAISE EXCEPTION 'check run id must be positive, got %', p_check_run_id USING ERRCODE = '22023';
    END IF;
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, 'github.check_run.create');

    SELECT * INTO run FROM public.release_runs WHERE id = r.release_run_id FOR UPDATE;
    IF run.check_run_id IS NOT NULL AND run.check_run_id <> p_check_run_id THEN
        RAISE EXCEPTION 'release run % already has check run %, not %', run.id, run.check_run_id, p_check_run_id
            USING ERRCODE = 'BR005';
    END IF;

    IF run.status = 'check_pending' THEN
        UPDATE public.execution_attempts SET status = 'dispatching', updated_at = v_now
        WHERE release_run_id = run.id AND number = run.current_attempt AND status = 'pending'
        RETURNING * INTO att;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'release run %: attempt % is not pending', run.id, run.current_attempt
                USING ERRCODE = 'BR005';
        END IF;
        UPDATE public.release_runs SET check_run_id = p_check_run_id, status = 'dispatching', updated_at = v_now
        WHERE id = run.id;
        v_dispatch_id := public.boardreadyops_outbox_enqueue_attempt_dispatch(run.id, att.id, r.traceparent, v_now);
    ELSE
        UPDATE public.release_runs SET check_run_id = p_check_run_id, updated_at = v_now WHERE id = run.id;
    END IF;

    UPDATE public.control_plane_outbox
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
        result = jsonb_build_object('check_run_id', p_check_run_id), last_error = NULL, updated_at = v_now
    WHERE id = p_id;
    RETURN v_dispatch_id;
END;
$$;
-- +goose StatementEnd

DROP FUNCTION public.boardreadyops_outbox_complete_collaborator_permission_read(bigint, text, text, text, timestamptz);
DROP FUNCTION public.boardreadyops_outbox_enqueue_collaborator_permission_read(uuid, text, bigint, text, text, timestamptz);
ALTER TABLE public.control_plane_audit DROP CONSTRAINT control_plane_audit_action_check;
ALTER TABLE public.control_plane_audit ADD CONSTRAINT control_plane_audit_action_check CHECK (action IN (
    'outbox.replay', 'job.replay', 'outbox.reconciliation.repair', 'outbox.reconciliation.supersede',
    'outbox.restore_fence', 'outbox.reconciliation.left', 'release_run.cancel', 'dispatch.pause', 'dispatch.resume',
    'release_settings.set', 'release_settings.unset'));
