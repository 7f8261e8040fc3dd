-- The conclusion of a workflow run that finished while BoardReadyOps was not listening is read
-- back from GitHub (issue 20, part 3).
--
-- When a repair (brops reconcile resolve with a run id) finds no stored completion of that run
-- in the inbox, boardreadyops_execution_attempt_rematch enqueues a github.workflow_run.read
-- effect instead: lifecycle never calls GitHub, the dispatcher does. The new effect type:
--   replay-safe  a GET of the workflow run (GET /repos/{owner}/{repo}/actions/runs/{id}):
--                reading twice changes nothing; the claim records delivery_started_at as for
--                the other replay-safe effects;
--   key          github.workflow_run.read:<release_run_id>:<execution_attempt_id>[:g<n>], n the
--                attempt's count of reads so far; at most one read of an attempt is pending;
--   payload      release run, attempt (id and number), installation, repository full name and
--                workflow run id: under 400 bytes of the 8 KiB bound, no credential.
-- boardreadyops_outbox_complete_workflow_run_read records what GitHub answered: a completed run
-- finishes the attempt (and the run, when current) as a workflow_run.completed webhook would, and
-- updates the check run saying the conclusion was read back; a run not finished yet changes
-- nothing (its completion webhook will come); an attempt finished meanwhile is left alone.
-- Re-run of a finished run (boardreadyops_execution_attempt_start_next) also updates the check run
-- to the new attempt ('dispatching') in the same transaction, instead of leaving the previous
-- attempt's conclusion on it until the dispatch completes.
-- New functions follow docs/operations.md, "Rules for a new function".

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_enqueue_workflow_run_read(p_attempt_id uuid, p_now timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
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
CREATE FUNCTION public.boardreadyops_outbox_complete_workflow_run_read(
    p_id bigint, p_worker text, p_status text, p_conclusion text, p_run_attempt integer, p_html_url text,
    p_now timestamptz DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
    att public.execution_attempts;
    run public.release_runs;
    v_conclusion text;
    v_status text;
    v_outcome text := 'not_finished';
BEGIN
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, 'github.workflow_run.read');
    SELECT * INTO run FROM public.release_runs WHERE id = r.release_run_id FOR UPDATE;
    SELECT * INTO att FROM public.execution_attempts WHERE id = r.execution_attempt_id FOR UPDATE;
    IF att.status <> 'running' OR att.workflow_run_id IS DISTINCT FROM (r.payload ->> 'workflow_run_id')::bigint THEN
        v_outcome := 'stale'; -- finished meanwhile (its webhook came after all), or not this run
    ELSIF p_status = 'completed' THEN
        v_conclusion := coalesce(nullif(left(p_conclusion, 64), ''), 'unknown');
        v_status := CASE v_conclusion WHEN 'success' THEN 'succeeded' WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END;
        INSERT INTO public.execution_attempt_workflow_runs AS w (execution_attempt_id, workflow_run_url, workflow_run_attempt, started_at, updated_at)
        VALUES (att.id, CASE WHEN p_html_url ~ '^https?://' AND length(p_html_url) <= 1024 THEN p_html_url END,
                least(greatest(coalesce(p_run_attempt, 1), 1), 1000), att.dispatched_at, v_now)
        ON CONFLICT ON CONSTRAINT execution_attempt_workflow_runs_pkey DO UPDATE
        SET workflow_run_url = coalesce(EXCLUDED.workflow_run_url, w.workflow_run_url),
            workflow_run_attempt = greatest(w.workflow_run_attempt, EXCLUDED.workflow_run_attempt), updated_at = v_now;
        UPDATE public.execution_attempts
        SET status = v_status, conclusion = v_conclusion, completed_at = v_now, updated_at = v_now
        WHERE id = att.id;
        IF att.number = run.current_attempt THEN
            IF run.status IN ('running', 'blocked') THEN
                UPDATE public.release_runs SET status = v_status, completed_at = v_now, updated_at = v_now WHERE id = run.id;
            END IF;
            PERFORM public.boardreadyops_release_run_enqueue_check_run(run.id, v_status,
                'The conclusion was read back from GitHub: its workflow_run webhook was never received.', r.traceparent, v_now);
        END IF;
        v_outcome := 'finished';
    END IF;
    UPDATE public.control_plane_outbox
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL, last_error = NULL,
        result = jsonb_build_object('workflow_run_status', left(p_status, 64), 'conclusion', left(p_conclusion, 64),
                                    'outcome', v_outcome),
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
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_rematch(p_attempt_id uuid, p_workflow_run_id bigint, p_since timestamp with time zone, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
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
        -- No completion stored: it finished while nothing listened, or has not finished. Ask
        -- GitHub (the dispatcher reads; lifecycle never calls GitHub).
        PERFORM public.boardreadyops_outbox_enqueue_workflow_run_read(p_attempt_id, v_now);
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
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_start_next(p_run_id uuid, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(attempt_id uuid, attempt_number integer, outbox_id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    run public.release_runs;
    att public.execution_attempts;
BEGIN
    SELECT * INTO run FROM public.release_runs WHERE id = p_run_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'release run % does not exist', p_run_id USING ERRCODE = 'BR006';
    END IF;
    IF run.status NOT IN ('succeeded', 'failed', 'cancelled') OR run.check_run_id IS NULL THEN
        RAISE EXCEPTION 'release run % is %, only a finished run is re-run', p_run_id, run.status
            USING ERRCODE = 'BR005';
    END IF;
    INSERT INTO public.execution_attempts (release_run_id, number, status, created_at, updated_at)
    VALUES (run.id, run.current_attempt + 1, 'dispatching', v_now, v_now)
    RETURNING * INTO att;
    UPDATE public.release_runs
    SET current_attempt = att.number, status = 'dispatching', completed_at = NULL, updated_at = v_now
    WHERE id = run.id;
    RETURN QUERY SELECT att.id, att.number,
        public.boardreadyops_outbox_enqueue_attempt_dispatch(run.id, att.id, p_traceparent, v_now);
    -- The check run shows the new attempt at once, not the previous one's conclusion.
    PERFORM public.boardreadyops_release_run_enqueue_check_run(run.id, 'dispatching',
        format('Re-run: attempt %s is starting.', att.number), p_traceparent, v_now);
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'boardreadyops_schema_owner') THEN
        ALTER FUNCTION public.boardreadyops_outbox_enqueue_workflow_run_read(uuid, timestamptz) OWNER TO boardreadyops_schema_owner;
        ALTER FUNCTION public.boardreadyops_outbox_complete_workflow_run_read(bigint, text, text, text, integer, text, timestamptz) OWNER TO boardreadyops_schema_owner;
    END IF;
END;
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION public.boardreadyops_outbox_enqueue_workflow_run_read(uuid, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_enqueue_workflow_run_read(uuid, timestamptz) TO boardreadyops_admin;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_outbox_complete_workflow_run_read(bigint, text, text, text, integer, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_complete_workflow_run_read(bigint, text, text, text, integer, text, timestamptz) TO boardreadyops_dispatcher, boardreadyops_admin;

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM public.control_plane_outbox WHERE effect_type = 'github.workflow_run.read') THEN
        RAISE EXCEPTION 'workflow run reads are recorded; the previous schema cannot hold them' USING ERRCODE = '55000';
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
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_rematch(p_attempt_id uuid, p_workflow_run_id bigint, p_since timestamp with time zone, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
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
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_start_next(p_run_id uuid, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(attempt_id uuid, attempt_number integer, outbox_id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    run public.release_runs;
    att public.execution_attempts;
BEGIN
    SELECT * INTO run FROM public.release_runs WHERE id = p_run_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'release run % does not exist', p_run_id USING ERRCODE = 'BR006';
    END IF;
    IF run.status NOT IN ('succeeded', 'failed', 'cancelled') OR run.check_run_id IS NULL THEN
        RAISE EXCEPTION 'release run % is %, only a finished run is re-run', p_run_id, run.status
            USING ERRCODE = 'BR005';
    END IF;
    INSERT INTO public.execution_attempts (release_run_id, number, status, created_at, updated_at)
    VALUES (run.id, run.current_attempt + 1, 'dispatching', v_now, v_now)
    RETURNING * INTO att;
    UPDATE public.release_runs
    SET current_attempt = att.number, status = 'dispatching', completed_at = NULL, updated_at = v_now
    WHERE id = run.id;
    RETURN QUERY SELECT att.id, att.number,
        public.boardreadyops_outbox_enqueue_attempt_dispatch(run.id, att.id, p_traceparent, v_now);
END;
$$;
-- +goose StatementEnd
DROP FUNCTION public.boardreadyops_outbox_complete_workflow_run_read(bigint, text, text, text, integer, text, timestamptz);
DROP FUNCTION public.boardreadyops_outbox_enqueue_workflow_run_read(uuid, timestamptz);
