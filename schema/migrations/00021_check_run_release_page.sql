-- Release runs are never silently stuck (issue 20, parts 1-3): every effect failure reaches the
-- developer on the check run, Retry replays a dead letter, and late evidence finishes a run.
--
-- The check run is updated through the existing effect type github.check_run.complete, which now
-- carries the run's state rather than a finished text: 'dispatching', 'running', 'succeeded',
-- 'failed', 'cancelled', 'dispatch_failed', 'dispatch_unknown' or 'retrying', with the tag,
-- commit, workflow, the newest 8 attempts (workflow run, run attempt, conclusion, times), the
-- reason, a notice answering a request, and whether to offer Retry. The dispatcher renders
-- the words (pkg/checkrun). A run has several such updates, so the effect may now carry a
-- generation like a superseding dispatch: key github.check_run.complete:<run>:<attempt>[:g<n>],
-- n counting the attempt's updates under the run's row lock (the same transition always writes
-- the same key). Each update is the whole state and replay-safe (a PATCH); a newer one
-- supersedes the run's updates not sent yet, and a retried one that a newer one replaced is
-- completed as superseded instead of being sent after it.
--
-- boardreadyops_release_run_block (called by dead_letter, retry when exhausted,
-- require_reconciliation and lease recovery): a dead-lettered or doubtful dispatch of the current
-- attempt moves the run to the new status 'blocked' and enqueues the update ('dispatch_failed'
-- with Retry, or 'dispatch_unknown'); a dead-lettered check-run creation blocks the run
-- (there is no check run to tell). boardreadyops_outbox_replay and a superseding resolution
-- unblock it (boardreadyops_release_run_unblock) and say so on the check run. A repair advances a
-- blocked run and re-queues the unmatched workflow_run completion already in the inbox
-- (boardreadyops_execution_attempt_rematch). Lifecycle answers Re-run on an unfinished run and
-- the Retry requested action through boardreadyops_release_run_request_from_check_run, which
-- replays the run's dead letters with the GitHub user as operator (audit 'outbox.replay', operator
-- github:<login>) and never retries a reconciliation. Dispatch completion records the workflow
-- run's html_url (boardreadyops_outbox_record_workflow_run) and updates the check run ('running',
-- details URL); a workflow_run of a finished attempt with a higher run_attempt (a re-run from the
-- Actions UI) runs the attempt again and is followed.
--
-- Workflow run links and run attempts live in the new table execution_attempt_workflow_runs:
-- adding columns to execution_attempts would lock a hot table ACCESS EXCLUSIVE.
-- New functions follow docs/operations.md, "Rules for a new function".

-- +goose Up
CREATE TABLE public.execution_attempt_workflow_runs (
    execution_attempt_id uuid PRIMARY KEY REFERENCES public.execution_attempts (id) ON DELETE CASCADE,
    workflow_run_url text CHECK (workflow_run_url ~ '^https?://' AND length(workflow_run_url) <= 1024),
    workflow_run_attempt integer NOT NULL DEFAULT 1 CHECK (workflow_run_attempt BETWEEN 1 AND 1000),
    started_at timestamptz,
    updated_at timestamptz NOT NULL
);
GRANT SELECT ON public.execution_attempt_workflow_runs TO boardreadyops_lifecycle, boardreadyops_admin;

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_release_run_enqueue_check_run(
    p_run_id uuid, p_state text, p_notice text, p_traceparent text, p_now timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
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
CREATE FUNCTION public.boardreadyops_release_run_block(p_outbox_id bigint, p_now timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
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
CREATE FUNCTION public.boardreadyops_release_run_unblock(r public.control_plane_outbox, p_operator text, p_now timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
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
CREATE FUNCTION public.boardreadyops_execution_attempt_rematch(
    p_attempt_id uuid, p_workflow_run_id bigint, p_since timestamptz, p_now timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    v_repository bigint;
    v_job bigint;
BEGIN
    SELECT r.repository_id INTO v_repository
    FROM public.execution_attempts a JOIN public.release_runs r ON r.id = a.release_run_id
    WHERE a.id = p_attempt_id;
    -- The completion GitHub sent while the run id was unknown, recorded as unmatched. Bounded by
    -- the received_at index: it arrived after the dispatch started.
    SELECT j.id INTO v_job
    FROM public.webhook_inbox i JOIN public.control_plane_jobs j ON j.inbox_id = i.id
    WHERE i.received_at >= coalesce(p_since, '-infinity'::timestamptz) - interval '10 minutes'
      AND i.event = 'workflow_run' AND i.action = 'completed' AND i.repository_id = v_repository
      AND i.payload -> 'workflow_run' ->> 'id' = p_workflow_run_id::text
      AND j.status = 'completed'
    ORDER BY i.received_at DESC
    LIMIT 1
    FOR UPDATE OF j;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    UPDATE public.control_plane_jobs
    SET status = 'available', available_at = v_now, attempts = 0, completed_at = NULL,
        last_error = format('re-matched: workflow run %s was recorded by a reconciliation repair', p_workflow_run_id),
        updated_at = v_now
    WHERE id = v_job;
    PERFORM pg_notify('boardreadyops_jobs', '');
    RETURN v_job;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_record_workflow_run(
    p_id bigint, p_worker text, p_workflow_run_url text, p_now timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, 'github.workflow.dispatch');
    IF p_workflow_run_url IS NULL OR p_workflow_run_url !~ '^https?://' OR length(p_workflow_run_url) > 1024 THEN
        RETURN; -- nothing usable to link to
    END IF;
    INSERT INTO public.execution_attempt_workflow_runs AS w (execution_attempt_id, workflow_run_url, workflow_run_attempt, updated_at)
    VALUES (r.execution_attempt_id, p_workflow_run_url, 1, v_now)
    ON CONFLICT ON CONSTRAINT execution_attempt_workflow_runs_pkey DO UPDATE SET workflow_run_url = EXCLUDED.workflow_run_url, updated_at = v_now;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_release_run_request_from_check_run(
    p_job_id bigint, p_worker text, p_check_run_name text, p_traceparent text DEFAULT NULL, p_now timestamptz DEFAULT NULL)
RETURNS TABLE(outcome text, release_run_id uuid, outbox_id bigint)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_validate_row(p_ref text, p_head_sha text, p_workflow_file text, p_status text, p_check_run_id bigint, p_current_attempt integer, p_completed_at timestamp with time zone) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
BEGIN
    -- Every rule in one expression: the common case is a single evaluation.
    IF (p_ref ~ '^refs/tags/.+' AND length(p_ref) <= 512) IS NOT FALSE
        AND (length(p_head_sha) IN (40, 64) AND p_head_sha ~ '^[0-9a-f]+$') IS NOT FALSE
        AND (p_workflow_file ~ '^[A-Za-z0-9._-]+\.ya?ml$'
            AND length(p_workflow_file) - CASE WHEN right(p_workflow_file, 5) = '.yaml' THEN 5 ELSE 4 END <= 200) IS NOT FALSE
        AND (p_status IN ('requested', 'check_pending', 'dispatching', 'running', 'blocked', 'succeeded', 'failed', 'cancelled')) IS NOT FALSE
        AND (p_check_run_id > 0) IS NOT FALSE
        AND (p_current_attempt >= 1) IS NOT FALSE
        AND ((p_status IN ('succeeded', 'failed', 'cancelled')) = (p_completed_at IS NOT NULL)) IS NOT FALSE THEN
        RETURN true;
    END IF;
    -- A rule is false: name it.
    IF NOT (p_ref ~ '^refs/tags/.+' AND length(p_ref) <= 512) THEN
        RETURN public.boardreadyops_row_rule_violation('release_runs', 'release_runs_ref_check');
    END IF;
    IF NOT (length(p_head_sha) IN (40, 64) AND p_head_sha ~ '^[0-9a-f]+$') THEN
        RETURN public.boardreadyops_row_rule_violation('release_runs', 'release_runs_head_sha_check');
    END IF;
    IF NOT (p_workflow_file ~ '^[A-Za-z0-9._-]+\.ya?ml$'
            AND length(p_workflow_file) - CASE WHEN right(p_workflow_file, 5) = '.yaml' THEN 5 ELSE 4 END <= 200) THEN
        RETURN public.boardreadyops_row_rule_violation('release_runs', 'release_runs_workflow_file_check');
    END IF;
    IF NOT (p_status IN ('requested', 'check_pending', 'dispatching', 'running', 'blocked', 'succeeded', 'failed', 'cancelled')) THEN
        RETURN public.boardreadyops_row_rule_violation('release_runs', 'release_runs_status_check');
    END IF;
    IF NOT (p_check_run_id > 0) THEN
        RETURN public.boardreadyops_row_rule_violation('release_runs', 'release_runs_check_run_id_check');
    END IF;
    IF NOT (p_current_attempt >= 1) THEN
        RETURN public.boardreadyops_row_rule_violation('release_runs', 'release_runs_current_attempt_check');
    END IF;
    IF NOT ((p_status IN ('succeeded', 'failed', 'cancelled')) = (p_completed_at IS NOT NULL)) THEN
        RETURN public.boardreadyops_row_rule_violation('release_runs', 'release_runs_completed_check');
    END IF;
    RETURN public.boardreadyops_row_rule_violation('release_runs', 'release_runs_row_check');
END;
$_$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_validate_row(p_effect_type text, p_idempotency_key text, p_generation integer, p_payload jsonb, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_delivery_started_at timestamp with time zone, p_completed_at timestamp with time zone, p_last_error text, p_result jsonb, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_traceparent text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
BEGIN
    -- Every rule in one expression: the common case is a single evaluation.
    IF (p_effect_type IN ('github.check_run.create', 'github.workflow.dispatch', 'github.check_run.complete')) IS NOT FALSE
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
        AND (p_generation = 0 OR p_effect_type IN ('github.workflow.dispatch', 'github.check_run.complete')) IS NOT FALSE
        AND ((p_status = 'leased') = (p_lease_owner IS NOT NULL AND p_lease_expires_at IS NOT NULL)
            AND (p_status = 'leased' OR (p_lease_owner IS NULL AND p_lease_expires_at IS NULL))) IS NOT FALSE
        AND ((p_status = 'completed') = (p_completed_at IS NOT NULL)) IS NOT FALSE
        AND (p_status <> 'reconciliation_required'
            OR (p_effect_type = 'github.workflow.dispatch' AND p_delivery_started_at IS NOT NULL)) IS NOT FALSE THEN
        RETURN true;
    END IF;
    -- A rule is false: name it.
    IF NOT (p_effect_type IN ('github.check_run.create', 'github.workflow.dispatch', 'github.check_run.complete')) THEN
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
    IF NOT (p_generation = 0 OR p_effect_type IN ('github.workflow.dispatch', 'github.check_run.complete')) THEN
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
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_advance_dispatched_attempt(r public.control_plane_outbox, p_workflow_run_id bigint, p_now timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    run public.release_runs;
    att public.execution_attempts;
BEGIN
    IF p_workflow_run_id IS NULL OR p_workflow_run_id <= 0 THEN
        RAISE EXCEPTION 'workflow run id must be positive, got %', p_workflow_run_id USING ERRCODE = '22023';
    END IF;
    SELECT * INTO run FROM public.release_runs WHERE id = r.release_run_id FOR UPDATE;
    SELECT * INTO att FROM public.execution_attempts WHERE id = r.execution_attempt_id FOR UPDATE;
    IF run.status NOT IN ('dispatching', 'blocked') OR att.status <> 'dispatching' OR att.number <> run.current_attempt
       OR att.workflow_run_id IS NOT NULL THEN
        RAISE EXCEPTION 'release run % attempt % cannot advance to running', run.id, att.number
            USING ERRCODE = 'BR005',
                  DETAIL = format('run status %s (current attempt %s), attempt status %s, workflow run %s',
                                  run.status, run.current_attempt, att.status, coalesce(att.workflow_run_id::text, 'none'));
    END IF;
    IF EXISTS (SELECT 1 FROM public.execution_attempts WHERE workflow_run_id = p_workflow_run_id) THEN
        RAISE EXCEPTION 'workflow run % already belongs to another execution attempt', p_workflow_run_id
            USING ERRCODE = 'BR005';
    END IF;
    UPDATE public.execution_attempts
    SET status = 'running', workflow_run_id = p_workflow_run_id, dispatched_at = p_now, updated_at = p_now
    WHERE id = att.id;
    UPDATE public.release_runs SET status = 'running', updated_at = p_now WHERE id = run.id;
    INSERT INTO public.execution_attempt_workflow_runs AS w (execution_attempt_id, workflow_run_attempt, started_at, updated_at)
    VALUES (att.id, 1, p_now, p_now)
    ON CONFLICT ON CONSTRAINT execution_attempt_workflow_runs_pkey DO UPDATE SET started_at = coalesce(w.started_at, p_now), updated_at = p_now;
    PERFORM public.boardreadyops_release_run_enqueue_check_run(run.id, 'running', NULL, r.traceparent, p_now);
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_dead_letter(p_id bigint, p_worker text, p_error text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_error IS NULL OR btrim(p_error) = '' THEN
        RAISE EXCEPTION 'dead-lettering needs an error description' USING ERRCODE = '22023';
    END IF;
    PERFORM public.boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    UPDATE public.control_plane_outbox
    SET status = 'dead_letter', lease_owner = NULL, lease_expires_at = NULL,
        last_error = left(p_error, 4096), updated_at = v_now
    WHERE id = p_id;
    PERFORM public.boardreadyops_release_run_block(p_id, v_now);
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_retry(p_id bigint, p_worker text, p_error text, p_retry_at timestamp with time zone, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
    v_status text;
BEGIN
    IF p_error IS NULL OR btrim(p_error) = '' THEN
        RAISE EXCEPTION 'retry needs an error description' USING ERRCODE = '22023';
    END IF;
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    v_status := CASE WHEN r.attempts >= r.max_attempts THEN 'dead_letter' ELSE 'available' END;
    -- A check-run update that a newer one replaced is not sent again: it would undo the newer.
    IF r.effect_type = 'github.check_run.complete' AND EXISTS (
        SELECT 1 FROM public.control_plane_outbox o
        WHERE o.release_run_id = r.release_run_id AND o.effect_type = 'github.check_run.complete' AND o.id > r.id) THEN
        UPDATE public.control_plane_outbox o
        SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
            superseded_by = (SELECT max(n.id) FROM public.control_plane_outbox n
                             WHERE n.release_run_id = r.release_run_id AND n.effect_type = 'github.check_run.complete'),
            result = jsonb_build_object('resolution', 'superseded'), last_error = left(p_error, 4096), updated_at = v_now
        WHERE o.id = p_id;
        RETURN 'completed';
    END IF;
    UPDATE public.control_plane_outbox
    SET status = v_status,
        available_at = CASE WHEN v_status = 'available' THEN greatest(coalesce(p_retry_at, v_now), v_now) ELSE available_at END,
        lease_owner = NULL, lease_expires_at = NULL, delivery_started_at = NULL,
        last_error = left(CASE WHEN v_status = 'dead_letter'
                               THEN format('attempts exhausted (%s of %s): %s', r.attempts, r.max_attempts, p_error)
                               ELSE p_error END, 4096),
        updated_at = v_now
    WHERE id = p_id;
    IF v_status = 'dead_letter' THEN
        PERFORM public.boardreadyops_release_run_block(p_id, v_now);
    END IF;
    RETURN v_status;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_require_reconciliation(p_id bigint, p_worker text, p_error text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    IF p_error IS NULL OR btrim(p_error) = '' THEN
        RAISE EXCEPTION 'reconciliation needs an error description' USING ERRCODE = '22023';
    END IF;
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, 'github.workflow.dispatch');
    IF r.delivery_started_at IS NULL THEN
        RAISE EXCEPTION 'outbox record %: delivery never started, so it cannot need reconciliation', p_id
            USING ERRCODE = 'BR003', HINT = 'retry it instead';
    END IF;
    UPDATE public.control_plane_outbox
    SET status = 'reconciliation_required', lease_owner = NULL, lease_expires_at = NULL,
        last_error = left(p_error, 4096), updated_at = v_now
    WHERE id = p_id;
    PERFORM public.boardreadyops_release_run_block(p_id, v_now);
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_recover_leases(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, p_limit integer DEFAULT 1000) RETURNS TABLE(id bigint, effect_type text, previous_owner text, status text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    rec record;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'recovery limit must be between 1 and 10000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    FOR rec IN
    WITH expired AS (
        SELECT o.id, o.lease_owner,
               CASE
                   WHEN o.effect_type = 'github.workflow.dispatch' AND o.delivery_started_at IS NOT NULL
                       THEN 'reconciliation_required'
                   WHEN o.attempts >= o.max_attempts THEN 'dead_letter'
                   ELSE 'available'
               END AS next_status
        FROM public.control_plane_outbox o
        WHERE o.status = 'leased' AND o.lease_expires_at <= v_now
        ORDER BY o.lease_expires_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE public.control_plane_outbox o
    SET status = e.next_status,
        available_at = CASE WHEN e.next_status = 'available' THEN v_now ELSE o.available_at END,
        delivery_started_at = CASE WHEN e.next_status = 'reconciliation_required' THEN o.delivery_started_at END,
        lease_owner = NULL, lease_expires_at = NULL,
        last_error = left(format('lease of worker %s expired at %s%s; %s',
                                 e.lease_owner, o.lease_expires_at,
                                 CASE WHEN o.delivery_started_at IS NOT NULL
                                      THEN format(' after delivery started at %s', o.delivery_started_at) ELSE '' END,
                                 CASE e.next_status
                                      WHEN 'reconciliation_required' THEN 'the dispatch may have reached GitHub'
                                      WHEN 'dead_letter' THEN format('attempts exhausted (%s of %s)', o.attempts, o.max_attempts)
                                      ELSE 'returned to the queue' END), 4096),
        updated_at = v_now
    FROM expired e
    WHERE o.id = e.id
    RETURNING o.id, o.effect_type, e.lease_owner AS previous_owner, o.status
    LOOP
        IF rec.status IN ('dead_letter', 'reconciliation_required') THEN
            PERFORM public.boardreadyops_release_run_block(rec.id, v_now);
        END IF;
        id := rec.id; effect_type := rec.effect_type; previous_owner := rec.previous_owner; status := rec.status;
        RETURN NEXT;
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_replay(p_id bigint, p_operator text, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS public.control_plane_outbox
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'replay needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'replay needs a reason' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO r FROM public.control_plane_outbox WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'outbox record % does not exist', p_id USING ERRCODE = 'BR006';
    END IF;
    IF r.status = 'reconciliation_required' THEN
        RAISE EXCEPTION 'outbox record % requires reconciliation and cannot be replayed', p_id
            USING ERRCODE = 'BR004',
                  DETAIL = format('GitHub may already have created a workflow run for this dispatch (delivery started at %s)',
                                  r.delivery_started_at),
                  HINT = 'find out whether the run exists (brops reconcile inspect), then resolve the record '
                         '(brops reconcile resolve) with the evidence';
    END IF;
    IF r.status <> 'dead_letter' THEN
        RAISE EXCEPTION 'outbox record % is %, only dead letters can be replayed', p_id, r.status
            USING ERRCODE = 'BR003';
    END IF;
    INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'outbox.replay', 'outbox', p_id, p_reason,
            jsonb_build_object('last_error', r.last_error, 'attempts', r.attempts), r.status, 'available');
    UPDATE public.control_plane_outbox
    SET status = 'available', available_at = v_now, attempts = 0, delivery_started_at = NULL, updated_at = v_now
    WHERE public.control_plane_outbox.id = p_id
    RETURNING * INTO r;
    PERFORM public.boardreadyops_release_run_unblock(r, p_operator, v_now);
    PERFORM pg_notify('boardreadyops_outbox', '');
    RETURN r;
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
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_finish(p_job_id bigint, p_worker text, p_check_run_name text, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(outcome text, release_run_id uuid, execution_attempt_id uuid, outbox_id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    j public.control_plane_jobs;
    i public.webhook_inbox;
    run public.release_runs;
    att public.execution_attempts;
    v_full_name text;
    v_workflow_run_id bigint;
    v_conclusion text;
    v_status text;
    v_check text;
    v_outbox bigint;
    v_run_attempt integer;
    v_known integer;
    v_url text;
    v_current boolean;
BEGIN
    IF p_check_run_name IS NULL OR length(p_check_run_name) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'check run name must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    j := public.boardreadyops_job_lock_leased(p_job_id, p_worker);
    SELECT * INTO i FROM public.webhook_inbox WHERE id = j.inbox_id;
    IF i.event IS DISTINCT FROM 'workflow_run' OR i.repository_id IS NULL THEN
        RAISE EXCEPTION 'job % is not a workflow_run delivery of a repository', p_job_id USING ERRCODE = 'BR005';
    END IF;
    v_workflow_run_id := (i.payload -> 'workflow_run' ->> 'id')::bigint;
    v_conclusion := coalesce(nullif(i.payload -> 'workflow_run' ->> 'conclusion', ''), 'unknown');

    SELECT a.* INTO att
    FROM public.execution_attempts a JOIN public.release_runs r ON r.id = a.release_run_id
    WHERE a.workflow_run_id = v_workflow_run_id AND r.repository_id = i.repository_id
    FOR UPDATE OF r, a SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'unmatched'::text, NULL::uuid, NULL::uuid, NULL::bigint;
        RETURN;
    END IF;
    SELECT * INTO run FROM public.release_runs r WHERE r.id = att.release_run_id;
    v_current := att.number = run.current_attempt;
    v_run_attempt := greatest(coalesce((i.payload -> 'workflow_run' ->> 'run_attempt')::integer, 1), 1);
    v_url := nullif(left(i.payload -> 'workflow_run' ->> 'html_url', 1024), '');
    SELECT w.workflow_run_attempt INTO v_known FROM public.execution_attempt_workflow_runs w WHERE w.execution_attempt_id = att.id;
    v_known := coalesce(v_known, 1);
    IF v_run_attempt < v_known THEN
        RETURN QUERY SELECT 'ignored'::text, run.id, att.id, NULL::bigint; -- an earlier run attempt's late event
        RETURN;
    END IF;
    INSERT INTO public.execution_attempt_workflow_runs AS w (execution_attempt_id, workflow_run_url, workflow_run_attempt, started_at, updated_at)
    VALUES (att.id, v_url, v_run_attempt, coalesce(att.dispatched_at, v_now), v_now)
    ON CONFLICT ON CONSTRAINT execution_attempt_workflow_runs_pkey DO UPDATE
    SET workflow_run_url = coalesce(EXCLUDED.workflow_run_url, w.workflow_run_url),
        workflow_run_attempt = EXCLUDED.workflow_run_attempt,
        started_at = CASE WHEN EXCLUDED.workflow_run_attempt > w.workflow_run_attempt THEN v_now ELSE w.started_at END,
        updated_at = v_now;
    IF v_run_attempt > v_known AND att.status IN ('succeeded', 'failed', 'cancelled') THEN
        -- Re-run from the Actions UI: the same workflow run, a new run attempt. The attempt (and the
        -- run, when the attempt is its current one) is running again until that run attempt ends.
        UPDATE public.execution_attempts a SET status = 'running', conclusion = NULL, completed_at = NULL, updated_at = v_now
        WHERE a.id = att.id RETURNING * INTO att;
        IF v_current AND run.status IN ('succeeded', 'failed', 'cancelled') THEN
            UPDATE public.release_runs r SET status = 'running', completed_at = NULL, updated_at = v_now
            WHERE r.id = run.id RETURNING * INTO run;
        END IF;
        IF i.action IS DISTINCT FROM 'completed' THEN
            IF v_current AND run.check_run_id IS NOT NULL THEN
                v_outbox := public.boardreadyops_release_run_enqueue_check_run(run.id, 'running',
                    format('The workflow run was re-run from GitHub Actions (run attempt %s); BoardReadyOps follows it.', v_run_attempt),
                    p_traceparent, v_now);
            END IF;
            RETURN QUERY SELECT 'followed'::text, run.id, att.id, v_outbox;
            RETURN;
        END IF;
    END IF;
    IF i.action IS DISTINCT FROM 'completed' OR att.status <> 'running' THEN
        RETURN QUERY SELECT 'ignored'::text, run.id, att.id, NULL::bigint;
        RETURN;
    END IF;

    v_status := CASE v_conclusion WHEN 'success' THEN 'succeeded' WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END;
    v_check := CASE v_conclusion WHEN 'success' THEN 'success' WHEN 'cancelled' THEN 'cancelled' ELSE 'failure' END;
    UPDATE public.execution_attempts a
    SET status = v_status, conclusion = left(v_conclusion, 64), completed_at = v_now, updated_at = v_now
    WHERE a.id = att.id;
    IF v_current AND run.status IN ('running', 'blocked') THEN
        UPDATE public.release_runs r SET status = v_status, completed_at = v_now, updated_at = v_now WHERE r.id = run.id;
    END IF;
    IF run.check_run_id IS NULL THEN
        RETURN QUERY SELECT 'finished'::text, run.id, att.id, NULL::bigint;
        RETURN;
    END IF;
    IF NOT v_current THEN
        RETURN QUERY SELECT 'finished'::text, run.id, att.id, NULL::bigint; -- an earlier attempt: the check run shows the current one
        RETURN;
    END IF;
    v_outbox := public.boardreadyops_release_run_enqueue_check_run(run.id, v_status, NULL, p_traceparent, v_now);
    RETURN QUERY SELECT 'completed'::text, run.id, att.id, v_outbox;
END;
$$;
-- +goose StatementEnd


-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'boardreadyops_schema_owner') THEN
        ALTER TABLE public.execution_attempt_workflow_runs OWNER TO boardreadyops_schema_owner;
        ALTER FUNCTION public.boardreadyops_release_run_enqueue_check_run(uuid, text, text, text, timestamptz) OWNER TO boardreadyops_schema_owner;
        ALTER FUNCTION public.boardreadyops_release_run_block(bigint, timestamptz) OWNER TO boardreadyops_schema_owner;
        ALTER FUNCTION public.boardreadyops_release_run_unblock(public.control_plane_outbox, text, timestamptz) OWNER TO boardreadyops_schema_owner;
        ALTER FUNCTION public.boardreadyops_execution_attempt_rematch(uuid, bigint, timestamptz, timestamptz) OWNER TO boardreadyops_schema_owner;
        ALTER FUNCTION public.boardreadyops_outbox_record_workflow_run(bigint, text, text, timestamptz) OWNER TO boardreadyops_schema_owner;
        ALTER FUNCTION public.boardreadyops_release_run_request_from_check_run(bigint, text, text, text, timestamptz) OWNER TO boardreadyops_schema_owner;
    END IF;
END;
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION public.boardreadyops_release_run_enqueue_check_run(uuid, text, text, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_release_run_enqueue_check_run(uuid, text, text, text, timestamptz) TO boardreadyops_admin;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_release_run_block(bigint, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_release_run_block(bigint, timestamptz) TO boardreadyops_admin;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_release_run_unblock(public.control_plane_outbox, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_release_run_unblock(public.control_plane_outbox, text, timestamptz) TO boardreadyops_admin;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_execution_attempt_rematch(uuid, bigint, timestamptz, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_execution_attempt_rematch(uuid, bigint, timestamptz, timestamptz) TO boardreadyops_admin;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_outbox_record_workflow_run(bigint, text, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_record_workflow_run(bigint, text, text, timestamptz) TO boardreadyops_dispatcher, boardreadyops_admin;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_release_run_request_from_check_run(bigint, text, text, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_release_run_request_from_check_run(bigint, text, text, text, timestamptz) TO boardreadyops_lifecycle, boardreadyops_admin;

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM public.release_runs WHERE status = 'blocked') THEN
        RAISE EXCEPTION 'release runs are blocked; resolve them (brops outbox replay, brops reconcile resolve) before going back'
            USING ERRCODE = '55000';
    END IF;
    IF EXISTS (SELECT 1 FROM public.control_plane_outbox WHERE effect_type = 'github.check_run.complete' AND generation > 0) THEN
        RAISE EXCEPTION 'check-run updates with generations are recorded; the previous schema cannot hold them'
            USING ERRCODE = '55000';
    END IF;
END;
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_validate_row(p_ref text, p_head_sha text, p_workflow_file text, p_status text, p_check_run_id bigint, p_current_attempt integer, p_completed_at timestamp with time zone) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
BEGIN
    -- Every rule in one expression: the common case is a single evaluation.
    IF (p_ref ~ '^refs/tags/.+' AND length(p_ref) <= 512) IS NOT FALSE
        AND (length(p_head_sha) IN (40, 64) AND p_head_sha ~ '^[0-9a-f]+$') IS NOT FALSE
        AND (p_workflow_file ~ '^[A-Za-z0-9._-]+\.ya?ml$'
            AND length(p_workflow_file) - CASE WHEN right(p_workflow_file, 5) = '.yaml' THEN 5 ELSE 4 END <= 200) IS NOT FALSE
        AND (p_status IN ('requested', 'check_pending', 'dispatching', 'running', 'succeeded', 'failed', 'cancelled')) IS NOT FALSE
        AND (p_check_run_id > 0) IS NOT FALSE
        AND (p_current_attempt >= 1) IS NOT FALSE
        AND ((p_status IN ('succeeded', 'failed', 'cancelled')) = (p_completed_at IS NOT NULL)) IS NOT FALSE THEN
        RETURN true;
    END IF;
    -- A rule is false: name it.
    IF NOT (p_ref ~ '^refs/tags/.+' AND length(p_ref) <= 512) THEN
        RETURN public.boardreadyops_row_rule_violation('release_runs', 'release_runs_ref_check');
    END IF;
    IF NOT (length(p_head_sha) IN (40, 64) AND p_head_sha ~ '^[0-9a-f]+$') THEN
        RETURN public.boardreadyops_row_rule_violation('release_runs', 'release_runs_head_sha_check');
    END IF;
    IF NOT (p_workflow_file ~ '^[A-Za-z0-9._-]+\.ya?ml$'
            AND length(p_workflow_file) - CASE WHEN right(p_workflow_file, 5) = '.yaml' THEN 5 ELSE 4 END <= 200) THEN
        RETURN public.boardreadyops_row_rule_violation('release_runs', 'release_runs_workflow_file_check');
    END IF;
    IF NOT (p_status IN ('requested', 'check_pending', 'dispatching', 'running', 'succeeded', 'failed', 'cancelled')) THEN
        RETURN public.boardreadyops_row_rule_violation('release_runs', 'release_runs_status_check');
    END IF;
    IF NOT (p_check_run_id > 0) THEN
        RETURN public.boardreadyops_row_rule_violation('release_runs', 'release_runs_check_run_id_check');
    END IF;
    IF NOT (p_current_attempt >= 1) THEN
        RETURN public.boardreadyops_row_rule_violation('release_runs', 'release_runs_current_attempt_check');
    END IF;
    IF NOT ((p_status IN ('succeeded', 'failed', 'cancelled')) = (p_completed_at IS NOT NULL)) THEN
        RETURN public.boardreadyops_row_rule_violation('release_runs', 'release_runs_completed_check');
    END IF;
    RETURN public.boardreadyops_row_rule_violation('release_runs', 'release_runs_row_check');
END;
$_$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_validate_row(p_effect_type text, p_idempotency_key text, p_generation integer, p_payload jsonb, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_delivery_started_at timestamp with time zone, p_completed_at timestamp with time zone, p_last_error text, p_result jsonb, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_traceparent text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
BEGIN
    -- Every rule in one expression: the common case is a single evaluation.
    IF (p_effect_type IN ('github.check_run.create', 'github.workflow.dispatch', 'github.check_run.complete')) IS NOT FALSE
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
        AND (p_generation = 0 OR p_effect_type = 'github.workflow.dispatch') IS NOT FALSE
        AND ((p_status = 'leased') = (p_lease_owner IS NOT NULL AND p_lease_expires_at IS NOT NULL)
            AND (p_status = 'leased' OR (p_lease_owner IS NULL AND p_lease_expires_at IS NULL))) IS NOT FALSE
        AND ((p_status = 'completed') = (p_completed_at IS NOT NULL)) IS NOT FALSE
        AND (p_status <> 'reconciliation_required'
            OR (p_effect_type = 'github.workflow.dispatch' AND p_delivery_started_at IS NOT NULL)) IS NOT FALSE THEN
        RETURN true;
    END IF;
    -- A rule is false: name it.
    IF NOT (p_effect_type IN ('github.check_run.create', 'github.workflow.dispatch', 'github.check_run.complete')) THEN
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
    IF NOT (p_generation = 0 OR p_effect_type = 'github.workflow.dispatch') THEN
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
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_advance_dispatched_attempt(r public.control_plane_outbox, p_workflow_run_id bigint, p_now timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    run public.release_runs;
    att public.execution_attempts;
BEGIN
    IF p_workflow_run_id IS NULL OR p_workflow_run_id <= 0 THEN
        RAISE EXCEPTION 'workflow run id must be positive, got %', p_workflow_run_id USING ERRCODE = '22023';
    END IF;
    SELECT * INTO run FROM public.release_runs WHERE id = r.release_run_id FOR UPDATE;
    SELECT * INTO att FROM public.execution_attempts WHERE id = r.execution_attempt_id FOR UPDATE;
    IF run.status <> 'dispatching' OR att.status <> 'dispatching' OR att.number <> run.current_attempt
       OR att.workflow_run_id IS NOT NULL THEN
        RAISE EXCEPTION 'release run % attempt % cannot advance to running', run.id, att.number
            USING ERRCODE = 'BR005',
                  DETAIL = format('run status %s (current attempt %s), attempt status %s, workflow run %s',
                                  run.status, run.current_attempt, att.status, coalesce(att.workflow_run_id::text, 'none'));
    END IF;
    IF EXISTS (SELECT 1 FROM public.execution_attempts WHERE workflow_run_id = p_workflow_run_id) THEN
        RAISE EXCEPTION 'workflow run % already belongs to another execution attempt', p_workflow_run_id
            USING ERRCODE = 'BR005';
    END IF;
    UPDATE public.execution_attempts
    SET status = 'running', workflow_run_id = p_workflow_run_id, dispatched_at = p_now, updated_at = p_now
    WHERE id = att.id;
    UPDATE public.release_runs SET status = 'running', updated_at = p_now WHERE id = run.id;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_dead_letter(p_id bigint, p_worker text, p_error text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_error IS NULL OR btrim(p_error) = '' THEN
        RAISE EXCEPTION 'dead-lettering needs an error description' USING ERRCODE = '22023';
    END IF;
    PERFORM public.boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    UPDATE public.control_plane_outbox
    SET status = 'dead_letter', lease_owner = NULL, lease_expires_at = NULL,
        last_error = left(p_error, 4096), updated_at = v_now
    WHERE id = p_id;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_retry(p_id bigint, p_worker text, p_error text, p_retry_at timestamp with time zone, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
    v_status text;
BEGIN
    IF p_error IS NULL OR btrim(p_error) = '' THEN
        RAISE EXCEPTION 'retry needs an error description' USING ERRCODE = '22023';
    END IF;
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    v_status := CASE WHEN r.attempts >= r.max_attempts THEN 'dead_letter' ELSE 'available' END;
    UPDATE public.control_plane_outbox
    SET status = v_status,
        available_at = CASE WHEN v_status = 'available' THEN greatest(coalesce(p_retry_at, v_now), v_now) ELSE available_at END,
        lease_owner = NULL, lease_expires_at = NULL, delivery_started_at = NULL,
        last_error = left(CASE WHEN v_status = 'dead_letter'
                               THEN format('attempts exhausted (%s of %s): %s', r.attempts, r.max_attempts, p_error)
                               ELSE p_error END, 4096),
        updated_at = v_now
    WHERE id = p_id;
    RETURN v_status;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_require_reconciliation(p_id bigint, p_worker text, p_error text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    IF p_error IS NULL OR btrim(p_error) = '' THEN
        RAISE EXCEPTION 'reconciliation needs an error description' USING ERRCODE = '22023';
    END IF;
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, 'github.workflow.dispatch');
    IF r.delivery_started_at IS NULL THEN
        RAISE EXCEPTION 'outbox record %: delivery never started, so it cannot need reconciliation', p_id
            USING ERRCODE = 'BR003', HINT = 'retry it instead';
    END IF;
    UPDATE public.control_plane_outbox
    SET status = 'reconciliation_required', lease_owner = NULL, lease_expires_at = NULL,
        last_error = left(p_error, 4096), updated_at = v_now
    WHERE id = p_id;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_recover_leases(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, p_limit integer DEFAULT 1000) RETURNS TABLE(id bigint, effect_type text, previous_owner text, status text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'recovery limit must be between 1 and 10000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH expired AS (
        SELECT o.id, o.lease_owner,
               CASE
                   WHEN o.effect_type = 'github.workflow.dispatch' AND o.delivery_started_at IS NOT NULL
                       THEN 'reconciliation_required'
                   WHEN o.attempts >= o.max_attempts THEN 'dead_letter'
                   ELSE 'available'
               END AS next_status
        FROM public.control_plane_outbox o
        WHERE o.status = 'leased' AND o.lease_expires_at <= v_now
        ORDER BY o.lease_expires_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE public.control_plane_outbox o
    SET status = e.next_status,
        available_at = CASE WHEN e.next_status = 'available' THEN v_now ELSE o.available_at END,
        delivery_started_at = CASE WHEN e.next_status = 'reconciliation_required' THEN o.delivery_started_at END,
        lease_owner = NULL, lease_expires_at = NULL,
        last_error = left(format('lease of worker %s expired at %s%s; %s',
                                 e.lease_owner, o.lease_expires_at,
                                 CASE WHEN o.delivery_started_at IS NOT NULL
                                      THEN format(' after delivery started at %s', o.delivery_started_at) ELSE '' END,
                                 CASE e.next_status
                                      WHEN 'reconciliation_required' THEN 'the dispatch may have reached GitHub'
                                      WHEN 'dead_letter' THEN format('attempts exhausted (%s of %s)', o.attempts, o.max_attempts)
                                      ELSE 'returned to the queue' END), 4096),
        updated_at = v_now
    FROM expired e
    WHERE o.id = e.id
    RETURNING o.id, o.effect_type, e.lease_owner, o.status;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_replay(p_id bigint, p_operator text, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS public.control_plane_outbox
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'replay needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'replay needs a reason' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO r FROM public.control_plane_outbox WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'outbox record % does not exist', p_id USING ERRCODE = 'BR006';
    END IF;
    IF r.status = 'reconciliation_required' THEN
        RAISE EXCEPTION 'outbox record % requires reconciliation and cannot be replayed', p_id
            USING ERRCODE = 'BR004',
                  DETAIL = format('GitHub may already have created a workflow run for this dispatch (delivery started at %s)',
                                  r.delivery_started_at),
                  HINT = 'find out whether the run exists (brops reconcile inspect), then resolve the record '
                         '(brops reconcile resolve) with the evidence';
    END IF;
    IF r.status <> 'dead_letter' THEN
        RAISE EXCEPTION 'outbox record % is %, only dead letters can be replayed', p_id, r.status
            USING ERRCODE = 'BR003';
    END IF;
    INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'outbox.replay', 'outbox', p_id, p_reason,
            jsonb_build_object('last_error', r.last_error, 'attempts', r.attempts), r.status, 'available');
    UPDATE public.control_plane_outbox
    SET status = 'available', available_at = v_now, attempts = 0, delivery_started_at = NULL, updated_at = v_now
    WHERE public.control_plane_outbox.id = p_id
    RETURNING * INTO r;
    PERFORM pg_notify('boardreadyops_outbox', '');
    RETURN r;
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
    PERFORM pg_notify('boardreadyops_outbox', '');
    RETURN v_new_id;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_finish(p_job_id bigint, p_worker text, p_check_run_name text, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(outcome text, release_run_id uuid, execution_attempt_id uuid, outbox_id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    j public.control_plane_jobs;
    i public.webhook_inbox;
    run public.release_runs;
    att public.execution_attempts;
    v_full_name text;
    v_workflow_run_id bigint;
    v_conclusion text;
    v_status text;
    v_check text;
    v_outbox bigint;
BEGIN
    IF p_check_run_name IS NULL OR length(p_check_run_name) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'check run name must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    j := public.boardreadyops_job_lock_leased(p_job_id, p_worker);
    SELECT * INTO i FROM public.webhook_inbox WHERE id = j.inbox_id;
    IF i.event IS DISTINCT FROM 'workflow_run' OR i.repository_id IS NULL THEN
        RAISE EXCEPTION 'job % is not a workflow_run delivery of a repository', p_job_id USING ERRCODE = 'BR005';
    END IF;
    v_workflow_run_id := (i.payload -> 'workflow_run' ->> 'id')::bigint;
    v_conclusion := coalesce(nullif(i.payload -> 'workflow_run' ->> 'conclusion', ''), 'unknown');

    SELECT a.* INTO att
    FROM public.execution_attempts a JOIN public.release_runs r ON r.id = a.release_run_id
    WHERE a.workflow_run_id = v_workflow_run_id AND r.repository_id = i.repository_id
    FOR UPDATE OF r, a SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'unmatched'::text, NULL::uuid, NULL::uuid, NULL::bigint;
        RETURN;
    END IF;
    SELECT * INTO run FROM public.release_runs r WHERE r.id = att.release_run_id;
    IF i.action IS DISTINCT FROM 'completed' OR att.status <> 'running' THEN
        RETURN QUERY SELECT 'ignored'::text, run.id, att.id, NULL::bigint;
        RETURN;
    END IF;

    v_status := CASE v_conclusion WHEN 'success' THEN 'succeeded' WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END;
    v_check := CASE v_conclusion WHEN 'success' THEN 'success' WHEN 'cancelled' THEN 'cancelled' ELSE 'failure' END;
    UPDATE public.execution_attempts a
    SET status = v_status, conclusion = left(v_conclusion, 64), completed_at = v_now, updated_at = v_now
    WHERE a.id = att.id;
    IF att.number = run.current_attempt AND run.status = 'running' THEN
        UPDATE public.release_runs r SET status = v_status, completed_at = v_now, updated_at = v_now WHERE r.id = run.id;
    END IF;
    IF run.check_run_id IS NULL THEN
        RETURN QUERY SELECT 'finished'::text, run.id, att.id, NULL::bigint;
        RETURN;
    END IF;
    SELECT p.full_name INTO v_full_name FROM public.repositories p WHERE p.id = run.repository_id;
    v_outbox := public.boardreadyops_outbox_enqueue(
        'github.check_run.complete', run.id, att.id, run.installation_id,
        jsonb_build_object(
            'release_run_id', run.id,
            'execution_attempt_id', att.id,
            'attempt_number', att.number,
            'installation_id', run.installation_id,
            'repository_full_name', v_full_name,
            'check_run_id', run.check_run_id,
            'name', p_check_run_name,
            'conclusion', v_check,
            'workflow_run_id', v_workflow_run_id,
            'workflow_run_url', coalesce(i.payload -> 'workflow_run' ->> 'html_url', ''),
            'title', format('Release %s', v_check),
            'summary', format('Attempt %s: workflow %s run %s concluded %s.',
                              att.number, run.workflow_file, v_workflow_run_id, v_conclusion)),
        p_traceparent, 10, v_now);
    RETURN QUERY SELECT 'completed'::text, run.id, att.id, v_outbox;
END;
$$;
-- +goose StatementEnd

DROP FUNCTION public.boardreadyops_release_run_request_from_check_run(bigint, text, text, text, timestamptz);
DROP FUNCTION public.boardreadyops_outbox_record_workflow_run(bigint, text, text, timestamptz);
DROP FUNCTION public.boardreadyops_execution_attempt_rematch(uuid, bigint, timestamptz, timestamptz);
DROP FUNCTION public.boardreadyops_release_run_unblock(public.control_plane_outbox, text, timestamptz);
DROP FUNCTION public.boardreadyops_release_run_block(bigint, timestamptz);
DROP FUNCTION public.boardreadyops_release_run_enqueue_check_run(uuid, text, text, text, timestamptz);
DROP TABLE public.execution_attempt_workflow_runs;
