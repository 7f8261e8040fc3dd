-- One CHECK constraint per hot table, evaluated by a PL/pgSQL function, in place of the
-- per-column and per-rule CHECK constraints of 00001. The rules are the same, rule for rule; a
-- violation still fails with SQLSTATE 23514 (check_violation) naming the rule's original
-- constraint (e.g. control_plane_outbox_lease_check) and the table.
--
-- Why: PostgreSQL deserializes every CHECK constraint of a table from its stored node tree and
-- plans it again for each INSERT or UPDATE statement that touches the table (the prepared
-- expressions live with the statement's executor state, not in a cache). Our transitions are
-- single-row statements inside functions, so each paid that for every rule: a profile of the
-- end-to-end load (perf, docs/performance.md) put 26 % of PostgreSQL's CPU in ExecConstraints,
-- and a single-row UPDATE of control_plane_outbox cost ~53 µs more than on the same table
-- without its 17 constraints. A constraint that calls a function stores a tiny node tree; the
-- function's compiled body and its expressions are cached per session, so the same rules cost
-- ~5 µs per row (outbox), ~2 µs with the patterns below.
--
-- The patterns are written for PostgreSQL's regex engine: a bounded repetition such as
-- [a-z_]{1,64} or [0-9a-f]{32} cost 2.7-9.8 µs per match here (workflow_file's {1,200}: 9.8 µs),
-- an unbounded class plus a length test 0.2-0.8 µs. Each rewritten rule accepts exactly the
-- strings the original pattern did (pkg/migrate's TestRowCheckPatterns compares them on
-- thousands of near-miss strings).
--
-- The functions are IMMUTABLE (they depend only on their arguments) and receive only the
-- columns their rules read. All rules are evaluated as one expression; only when that fails are
-- they evaluated one by one to name the broken rule. Rules that are NULL pass, as in a CHECK
-- constraint (`rule IS NOT FALSE`, `IF NOT (rule)`).
--
-- The low-traffic tables (installations, repositories, repository_release_settings,
-- control_plane_audit) keep their plain constraints.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_check_violation(p_table text, p_constraint text)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
AS $$
BEGIN
    RAISE EXCEPTION 'new row for relation "%" violates check constraint "%"', p_table, p_constraint
        USING ERRCODE = 'check_violation', TABLE = p_table, CONSTRAINT = p_constraint, SCHEMA = 'public';
END;
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_check_webhook_inbox(
    p_delivery_id text, p_event text, p_action text, p_installation_id bigint,
    p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
AS $$
BEGIN
    -- Every rule in one expression: the common case is a single evaluation.
    IF (length(p_delivery_id) BETWEEN 1 AND 100) IS NOT FALSE
        AND (length(p_event) BETWEEN 1 AND 64 AND p_event ~ '^[a-z_]+$') IS NOT FALSE
        AND (length(p_action) BETWEEN 1 AND 64 AND p_action ~ '^[a-z_]+$') IS NOT FALSE
        AND (p_installation_id > 0) IS NOT FALSE
        AND (p_repository_id > 0) IS NOT FALSE
        AND (jsonb_typeof(p_payload) = 'object' AND pg_column_size(p_payload) <= 1048576) IS NOT FALSE
        AND (length(p_payload_sha256) = 32) IS NOT FALSE
        AND (length(p_traceparent) = 55 AND substr(p_traceparent, 36, 1) = '-'
            AND p_traceparent ~ '^[0-9a-f][0-9a-f]-[0-9a-f]+-[0-9a-f]+-[0-9a-f][0-9a-f]$') IS NOT FALSE THEN
        RETURN true;
    END IF;
    -- A rule is false: name it.
    IF NOT (length(p_delivery_id) BETWEEN 1 AND 100) THEN
        RETURN public.boardreadyops_check_violation('webhook_inbox', 'webhook_inbox_delivery_id_check');
    END IF;
    IF NOT (length(p_event) BETWEEN 1 AND 64 AND p_event ~ '^[a-z_]+$') THEN
        RETURN public.boardreadyops_check_violation('webhook_inbox', 'webhook_inbox_event_check');
    END IF;
    IF NOT (length(p_action) BETWEEN 1 AND 64 AND p_action ~ '^[a-z_]+$') THEN
        RETURN public.boardreadyops_check_violation('webhook_inbox', 'webhook_inbox_action_check');
    END IF;
    IF NOT (p_installation_id > 0) THEN
        RETURN public.boardreadyops_check_violation('webhook_inbox', 'webhook_inbox_installation_id_check');
    END IF;
    IF NOT (p_repository_id > 0) THEN
        RETURN public.boardreadyops_check_violation('webhook_inbox', 'webhook_inbox_repository_id_check');
    END IF;
    IF NOT (jsonb_typeof(p_payload) = 'object' AND pg_column_size(p_payload) <= 1048576) THEN
        RETURN public.boardreadyops_check_violation('webhook_inbox', 'webhook_inbox_payload_check');
    END IF;
    IF NOT (length(p_payload_sha256) = 32) THEN
        RETURN public.boardreadyops_check_violation('webhook_inbox', 'webhook_inbox_payload_sha256_check');
    END IF;
    IF NOT (length(p_traceparent) = 55 AND substr(p_traceparent, 36, 1) = '-'
            AND p_traceparent ~ '^[0-9a-f][0-9a-f]-[0-9a-f]+-[0-9a-f]+-[0-9a-f][0-9a-f]$') THEN
        RETURN public.boardreadyops_check_violation('webhook_inbox', 'webhook_inbox_traceparent_check');
    END IF;
    RETURN public.boardreadyops_check_violation('webhook_inbox', 'webhook_inbox_row_check');
END;
$$;
-- +goose StatementEnd

ALTER TABLE webhook_inbox
    DROP CONSTRAINT webhook_inbox_delivery_id_check,
    DROP CONSTRAINT webhook_inbox_event_check,
    DROP CONSTRAINT webhook_inbox_action_check,
    DROP CONSTRAINT webhook_inbox_installation_id_check,
    DROP CONSTRAINT webhook_inbox_repository_id_check,
    DROP CONSTRAINT webhook_inbox_payload_check,
    DROP CONSTRAINT webhook_inbox_payload_sha256_check,
    DROP CONSTRAINT webhook_inbox_traceparent_check,
    ADD CONSTRAINT webhook_inbox_row_check CHECK (boardreadyops_check_webhook_inbox(
        delivery_id, event, action, installation_id, repository_id, payload, payload_sha256,
        traceparent));

-- +goose StatementBegin
CREATE FUNCTION boardreadyops_check_control_plane_jobs(
    p_kind text, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text,
    p_lease_expires_at timestamptz, p_last_error text, p_completed_at timestamptz,
    p_traceparent text)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
AS $$
BEGIN
    -- Every rule in one expression: the common case is a single evaluation.
    IF (length(p_kind) BETWEEN 1 AND 64 AND p_kind ~ '^[a-z_]+$') IS NOT FALSE
        AND (p_status IN ('available', 'leased', 'completed', 'dead_letter')) IS NOT FALSE
        AND (p_attempts >= 0) IS NOT FALSE
        AND (p_max_attempts BETWEEN 1 AND 1000) IS NOT FALSE
        AND (length(p_lease_owner) BETWEEN 1 AND 200) IS NOT FALSE
        AND (length(p_last_error) <= 4096) IS NOT FALSE
        AND (length(p_traceparent) = 55 AND substr(p_traceparent, 36, 1) = '-'
            AND p_traceparent ~ '^[0-9a-f][0-9a-f]-[0-9a-f]+-[0-9a-f]+-[0-9a-f][0-9a-f]$') IS NOT FALSE
        AND ((p_status = 'leased') = (p_lease_owner IS NOT NULL AND p_lease_expires_at IS NOT NULL)
            AND (p_status = 'leased' OR (p_lease_owner IS NULL AND p_lease_expires_at IS NULL))) IS NOT FALSE
        AND ((p_status = 'completed') = (p_completed_at IS NOT NULL)) IS NOT FALSE THEN
        RETURN true;
    END IF;
    -- A rule is false: name it.
    IF NOT (length(p_kind) BETWEEN 1 AND 64 AND p_kind ~ '^[a-z_]+$') THEN
        RETURN public.boardreadyops_check_violation('control_plane_jobs', 'control_plane_jobs_kind_check');
    END IF;
    IF NOT (p_status IN ('available', 'leased', 'completed', 'dead_letter')) THEN
        RETURN public.boardreadyops_check_violation('control_plane_jobs', 'control_plane_jobs_status_check');
    END IF;
    IF NOT (p_attempts >= 0) THEN
        RETURN public.boardreadyops_check_violation('control_plane_jobs', 'control_plane_jobs_attempts_check');
    END IF;
    IF NOT (p_max_attempts BETWEEN 1 AND 1000) THEN
        RETURN public.boardreadyops_check_violation('control_plane_jobs', 'control_plane_jobs_max_attempts_check');
    END IF;
    IF NOT (length(p_lease_owner) BETWEEN 1 AND 200) THEN
        RETURN public.boardreadyops_check_violation('control_plane_jobs', 'control_plane_jobs_lease_owner_check');
    END IF;
    IF NOT (length(p_last_error) <= 4096) THEN
        RETURN public.boardreadyops_check_violation('control_plane_jobs', 'control_plane_jobs_last_error_check');
    END IF;
    IF NOT (length(p_traceparent) = 55 AND substr(p_traceparent, 36, 1) = '-'
            AND p_traceparent ~ '^[0-9a-f][0-9a-f]-[0-9a-f]+-[0-9a-f]+-[0-9a-f][0-9a-f]$') THEN
        RETURN public.boardreadyops_check_violation('control_plane_jobs', 'control_plane_jobs_traceparent_check');
    END IF;
    IF NOT ((p_status = 'leased') = (p_lease_owner IS NOT NULL AND p_lease_expires_at IS NOT NULL)
            AND (p_status = 'leased' OR (p_lease_owner IS NULL AND p_lease_expires_at IS NULL))) THEN
        RETURN public.boardreadyops_check_violation('control_plane_jobs', 'control_plane_jobs_lease_check');
    END IF;
    IF NOT ((p_status = 'completed') = (p_completed_at IS NOT NULL)) THEN
        RETURN public.boardreadyops_check_violation('control_plane_jobs', 'control_plane_jobs_completed_check');
    END IF;
    RETURN public.boardreadyops_check_violation('control_plane_jobs', 'control_plane_jobs_row_check');
END;
$$;
-- +goose StatementEnd

ALTER TABLE control_plane_jobs
    DROP CONSTRAINT control_plane_jobs_kind_check,
    DROP CONSTRAINT control_plane_jobs_status_check,
    DROP CONSTRAINT control_plane_jobs_attempts_check,
    DROP CONSTRAINT control_plane_jobs_max_attempts_check,
    DROP CONSTRAINT control_plane_jobs_lease_owner_check,
    DROP CONSTRAINT control_plane_jobs_last_error_check,
    DROP CONSTRAINT control_plane_jobs_traceparent_check,
    DROP CONSTRAINT control_plane_jobs_lease_check,
    DROP CONSTRAINT control_plane_jobs_completed_check,
    ADD CONSTRAINT control_plane_jobs_row_check CHECK (boardreadyops_check_control_plane_jobs(
        kind, status, attempts, max_attempts, lease_owner, lease_expires_at, last_error,
        completed_at, traceparent));

-- +goose StatementBegin
CREATE FUNCTION boardreadyops_check_release_runs(
    p_ref text, p_head_sha text, p_workflow_file text, p_status text, p_check_run_id bigint,
    p_current_attempt integer, p_completed_at timestamptz)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
AS $$
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
        RETURN public.boardreadyops_check_violation('release_runs', 'release_runs_ref_check');
    END IF;
    IF NOT (length(p_head_sha) IN (40, 64) AND p_head_sha ~ '^[0-9a-f]+$') THEN
        RETURN public.boardreadyops_check_violation('release_runs', 'release_runs_head_sha_check');
    END IF;
    IF NOT (p_workflow_file ~ '^[A-Za-z0-9._-]+\.ya?ml$'
            AND length(p_workflow_file) - CASE WHEN right(p_workflow_file, 5) = '.yaml' THEN 5 ELSE 4 END <= 200) THEN
        RETURN public.boardreadyops_check_violation('release_runs', 'release_runs_workflow_file_check');
    END IF;
    IF NOT (p_status IN ('requested', 'check_pending', 'dispatching', 'running', 'succeeded', 'failed', 'cancelled')) THEN
        RETURN public.boardreadyops_check_violation('release_runs', 'release_runs_status_check');
    END IF;
    IF NOT (p_check_run_id > 0) THEN
        RETURN public.boardreadyops_check_violation('release_runs', 'release_runs_check_run_id_check');
    END IF;
    IF NOT (p_current_attempt >= 1) THEN
        RETURN public.boardreadyops_check_violation('release_runs', 'release_runs_current_attempt_check');
    END IF;
    IF NOT ((p_status IN ('succeeded', 'failed', 'cancelled')) = (p_completed_at IS NOT NULL)) THEN
        RETURN public.boardreadyops_check_violation('release_runs', 'release_runs_completed_check');
    END IF;
    RETURN public.boardreadyops_check_violation('release_runs', 'release_runs_row_check');
END;
$$;
-- +goose StatementEnd

ALTER TABLE release_runs
    DROP CONSTRAINT release_runs_ref_check,
    DROP CONSTRAINT release_runs_head_sha_check,
    DROP CONSTRAINT release_runs_workflow_file_check,
    DROP CONSTRAINT release_runs_status_check,
    DROP CONSTRAINT release_runs_check_run_id_check,
    DROP CONSTRAINT release_runs_current_attempt_check,
    DROP CONSTRAINT release_runs_completed_check,
    ADD CONSTRAINT release_runs_row_check CHECK (boardreadyops_check_release_runs(
        ref, head_sha, workflow_file, status, check_run_id, current_attempt, completed_at));

-- +goose StatementBegin
CREATE FUNCTION boardreadyops_check_execution_attempts(
    p_number integer, p_status text, p_workflow_run_id bigint, p_dispatched_at timestamptz,
    p_completed_at timestamptz, p_conclusion text)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
AS $$
BEGIN
    -- Every rule in one expression: the common case is a single evaluation.
    IF (p_number >= 1) IS NOT FALSE
        AND (p_status IN ('pending', 'dispatching', 'running', 'succeeded', 'failed', 'cancelled')) IS NOT FALSE
        AND (p_workflow_run_id > 0) IS NOT FALSE
        AND (length(p_conclusion) BETWEEN 1 AND 64) IS NOT FALSE
        AND ((p_workflow_run_id IS NULL) = (p_dispatched_at IS NULL)) IS NOT FALSE
        AND ((p_status IN ('succeeded', 'failed', 'cancelled')) = (p_completed_at IS NOT NULL)) IS NOT FALSE THEN
        RETURN true;
    END IF;
    -- A rule is false: name it.
    IF NOT (p_number >= 1) THEN
        RETURN public.boardreadyops_check_violation('execution_attempts', 'execution_attempts_number_check');
    END IF;
    IF NOT (p_status IN ('pending', 'dispatching', 'running', 'succeeded', 'failed', 'cancelled')) THEN
        RETURN public.boardreadyops_check_violation('execution_attempts', 'execution_attempts_status_check');
    END IF;
    IF NOT (p_workflow_run_id > 0) THEN
        RETURN public.boardreadyops_check_violation('execution_attempts', 'execution_attempts_workflow_run_id_check');
    END IF;
    IF NOT (length(p_conclusion) BETWEEN 1 AND 64) THEN
        RETURN public.boardreadyops_check_violation('execution_attempts', 'execution_attempts_conclusion_check');
    END IF;
    IF NOT ((p_workflow_run_id IS NULL) = (p_dispatched_at IS NULL)) THEN
        RETURN public.boardreadyops_check_violation('execution_attempts', 'execution_attempts_dispatched_check');
    END IF;
    IF NOT ((p_status IN ('succeeded', 'failed', 'cancelled')) = (p_completed_at IS NOT NULL)) THEN
        RETURN public.boardreadyops_check_violation('execution_attempts', 'execution_attempts_completed_check');
    END IF;
    RETURN public.boardreadyops_check_violation('execution_attempts', 'execution_attempts_row_check');
END;
$$;
-- +goose StatementEnd

ALTER TABLE execution_attempts
    DROP CONSTRAINT execution_attempts_number_check,
    DROP CONSTRAINT execution_attempts_status_check,
    DROP CONSTRAINT execution_attempts_workflow_run_id_check,
    DROP CONSTRAINT execution_attempts_conclusion_check,
    DROP CONSTRAINT execution_attempts_dispatched_check,
    DROP CONSTRAINT execution_attempts_completed_check,
    ADD CONSTRAINT execution_attempts_row_check CHECK (boardreadyops_check_execution_attempts(
        number, status, workflow_run_id, dispatched_at, completed_at, conclusion));

-- +goose StatementBegin
CREATE FUNCTION boardreadyops_check_control_plane_outbox(
    p_effect_type text, p_idempotency_key text, p_generation integer, p_payload jsonb,
    p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text,
    p_lease_expires_at timestamptz, p_delivery_started_at timestamptz, p_completed_at timestamptz,
    p_last_error text, p_result jsonb, p_release_run_id uuid, p_execution_attempt_id uuid,
    p_installation_id bigint, p_traceparent text)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
AS $$
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
        RETURN public.boardreadyops_check_violation('control_plane_outbox', 'control_plane_outbox_effect_type_check');
    END IF;
    IF NOT (p_generation >= 0) THEN
        RETURN public.boardreadyops_check_violation('control_plane_outbox', 'control_plane_outbox_generation_check');
    END IF;
    IF NOT (jsonb_typeof(p_payload) = 'object' AND pg_column_size(p_payload) <= 8192) THEN
        RETURN public.boardreadyops_check_violation('control_plane_outbox', 'control_plane_outbox_payload_check');
    END IF;
    IF NOT (p_status IN ('available', 'leased', 'completed', 'dead_letter', 'reconciliation_required')) THEN
        RETURN public.boardreadyops_check_violation('control_plane_outbox', 'control_plane_outbox_status_check');
    END IF;
    IF NOT (p_attempts >= 0) THEN
        RETURN public.boardreadyops_check_violation('control_plane_outbox', 'control_plane_outbox_attempts_check');
    END IF;
    IF NOT (p_max_attempts BETWEEN 1 AND 1000) THEN
        RETURN public.boardreadyops_check_violation('control_plane_outbox', 'control_plane_outbox_max_attempts_check');
    END IF;
    IF NOT (length(p_lease_owner) BETWEEN 1 AND 200) THEN
        RETURN public.boardreadyops_check_violation('control_plane_outbox', 'control_plane_outbox_lease_owner_check');
    END IF;
    IF NOT (length(p_last_error) <= 4096) THEN
        RETURN public.boardreadyops_check_violation('control_plane_outbox', 'control_plane_outbox_last_error_check');
    END IF;
    IF NOT (jsonb_typeof(p_result) = 'object' AND pg_column_size(p_result) <= 4096) THEN
        RETURN public.boardreadyops_check_violation('control_plane_outbox', 'control_plane_outbox_result_check');
    END IF;
    IF NOT (p_installation_id > 0) THEN
        RETURN public.boardreadyops_check_violation('control_plane_outbox', 'control_plane_outbox_installation_id_check');
    END IF;
    IF NOT (length(p_traceparent) = 55 AND substr(p_traceparent, 36, 1) = '-'
            AND p_traceparent ~ '^[0-9a-f][0-9a-f]-[0-9a-f]+-[0-9a-f]+-[0-9a-f][0-9a-f]$') THEN
        RETURN public.boardreadyops_check_violation('control_plane_outbox', 'control_plane_outbox_traceparent_check');
    END IF;
    IF NOT (p_idempotency_key = p_effect_type || ':' || p_release_run_id::text
            || coalesce(':' || p_execution_attempt_id::text, '')
            || CASE WHEN p_generation > 0 THEN ':g' || p_generation::text ELSE '' END) THEN
        RETURN public.boardreadyops_check_violation('control_plane_outbox', 'control_plane_outbox_idempotency_key_check');
    END IF;
    IF NOT ((p_effect_type = 'github.check_run.create') = (p_execution_attempt_id IS NULL)) THEN
        RETURN public.boardreadyops_check_violation('control_plane_outbox', 'control_plane_outbox_attempt_check');
    END IF;
    IF NOT (p_generation = 0 OR p_effect_type = 'github.workflow.dispatch') THEN
        RETURN public.boardreadyops_check_violation('control_plane_outbox', 'control_plane_outbox_generation_effect_check');
    END IF;
    IF NOT ((p_status = 'leased') = (p_lease_owner IS NOT NULL AND p_lease_expires_at IS NOT NULL)
            AND (p_status = 'leased' OR (p_lease_owner IS NULL AND p_lease_expires_at IS NULL))) THEN
        RETURN public.boardreadyops_check_violation('control_plane_outbox', 'control_plane_outbox_lease_check');
    END IF;
    IF NOT ((p_status = 'completed') = (p_completed_at IS NOT NULL)) THEN
        RETURN public.boardreadyops_check_violation('control_plane_outbox', 'control_plane_outbox_completed_check');
    END IF;
    IF NOT (p_status <> 'reconciliation_required'
            OR (p_effect_type = 'github.workflow.dispatch' AND p_delivery_started_at IS NOT NULL)) THEN
        RETURN public.boardreadyops_check_violation('control_plane_outbox', 'control_plane_outbox_reconciliation_check');
    END IF;
    RETURN public.boardreadyops_check_violation('control_plane_outbox', 'control_plane_outbox_row_check');
END;
$$;
-- +goose StatementEnd

ALTER TABLE control_plane_outbox
    DROP CONSTRAINT control_plane_outbox_effect_type_check,
    DROP CONSTRAINT control_plane_outbox_generation_check,
    DROP CONSTRAINT control_plane_outbox_payload_check,
    DROP CONSTRAINT control_plane_outbox_status_check,
    DROP CONSTRAINT control_plane_outbox_attempts_check,
    DROP CONSTRAINT control_plane_outbox_max_attempts_check,
    DROP CONSTRAINT control_plane_outbox_lease_owner_check,
    DROP CONSTRAINT control_plane_outbox_last_error_check,
    DROP CONSTRAINT control_plane_outbox_result_check,
    DROP CONSTRAINT control_plane_outbox_installation_id_check,
    DROP CONSTRAINT control_plane_outbox_traceparent_check,
    DROP CONSTRAINT control_plane_outbox_idempotency_key_check,
    DROP CONSTRAINT control_plane_outbox_attempt_check,
    DROP CONSTRAINT control_plane_outbox_generation_effect_check,
    DROP CONSTRAINT control_plane_outbox_lease_check,
    DROP CONSTRAINT control_plane_outbox_completed_check,
    DROP CONSTRAINT control_plane_outbox_reconciliation_check,
    ADD CONSTRAINT control_plane_outbox_row_check CHECK (boardreadyops_check_control_plane_outbox(
        effect_type, idempotency_key, generation, payload, status, attempts, max_attempts,
        lease_owner, lease_expires_at, delivery_started_at, completed_at, last_error, result,
        release_run_id, execution_attempt_id, installation_id, traceparent));


-- The constraints run as the user writing the row (the SECURITY DEFINER functions' owner, or
-- lifecycle and brops, which also write some tables directly). They only validate.
GRANT EXECUTE ON FUNCTION
    boardreadyops_check_violation(text, text),
    boardreadyops_check_webhook_inbox(text, text, text, bigint, bigint, jsonb, bytea, text),
    boardreadyops_check_control_plane_jobs(text, text, integer, integer, text, timestamptz, text, timestamptz, text),
    boardreadyops_check_release_runs(text, text, text, text, bigint, integer, timestamptz),
    boardreadyops_check_execution_attempts(integer, text, bigint, timestamptz, timestamptz, text),
    boardreadyops_check_control_plane_outbox(text, text, integer, jsonb, text, integer, integer, text, timestamptz, timestamptz, timestamptz, text, jsonb, uuid, uuid, bigint, text)
TO boardreadyops_ingest, boardreadyops_lifecycle, boardreadyops_dispatcher, boardreadyops_admin;

-- +goose Down
ALTER TABLE webhook_inbox
    DROP CONSTRAINT webhook_inbox_row_check,
    ADD CONSTRAINT webhook_inbox_delivery_id_check CHECK (length(delivery_id) BETWEEN 1 AND 100),
    ADD CONSTRAINT webhook_inbox_event_check CHECK (event ~ '^[a-z_]{1,64}$'),
    ADD CONSTRAINT webhook_inbox_action_check CHECK (action ~ '^[a-z_]{1,64}$'),
    ADD CONSTRAINT webhook_inbox_installation_id_check CHECK (installation_id > 0),
    ADD CONSTRAINT webhook_inbox_repository_id_check CHECK (repository_id > 0),
    ADD CONSTRAINT webhook_inbox_payload_check CHECK (jsonb_typeof(payload) = 'object' AND pg_column_size(payload) <= 1048576),
    ADD CONSTRAINT webhook_inbox_payload_sha256_check CHECK (length(payload_sha256) = 32),
    ADD CONSTRAINT webhook_inbox_traceparent_check CHECK (traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');
DROP FUNCTION boardreadyops_check_webhook_inbox(text, text, text, bigint, bigint, jsonb, bytea, text);
ALTER TABLE control_plane_jobs
    DROP CONSTRAINT control_plane_jobs_row_check,
    ADD CONSTRAINT control_plane_jobs_kind_check CHECK (kind ~ '^[a-z_]{1,64}$'),
    ADD CONSTRAINT control_plane_jobs_status_check CHECK (status IN ('available', 'leased', 'completed', 'dead_letter')),
    ADD CONSTRAINT control_plane_jobs_attempts_check CHECK (attempts >= 0),
    ADD CONSTRAINT control_plane_jobs_max_attempts_check CHECK (max_attempts BETWEEN 1 AND 1000),
    ADD CONSTRAINT control_plane_jobs_lease_owner_check CHECK (length(lease_owner) BETWEEN 1 AND 200),
    ADD CONSTRAINT control_plane_jobs_last_error_check CHECK (length(last_error) <= 4096),
    ADD CONSTRAINT control_plane_jobs_traceparent_check CHECK (traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'),
    ADD CONSTRAINT control_plane_jobs_lease_check CHECK ((status = 'leased') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)
        AND (status = 'leased' OR (lease_owner IS NULL AND lease_expires_at IS NULL))),
    ADD CONSTRAINT control_plane_jobs_completed_check CHECK ((status = 'completed') = (completed_at IS NOT NULL));
DROP FUNCTION boardreadyops_check_control_plane_jobs(text, text, integer, integer, text, timestamptz, text, timestamptz, text);
ALTER TABLE release_runs
    DROP CONSTRAINT release_runs_row_check,
    ADD CONSTRAINT release_runs_ref_check CHECK (ref ~ '^refs/tags/.+' AND length(ref) <= 512),
    ADD CONSTRAINT release_runs_head_sha_check CHECK (head_sha ~ '^([0-9a-f]{40}|[0-9a-f]{64})$'),
    ADD CONSTRAINT release_runs_workflow_file_check CHECK (workflow_file ~ '^[A-Za-z0-9._-]{1,200}\.ya?ml$'),
    ADD CONSTRAINT release_runs_status_check CHECK (status IN ('requested', 'check_pending', 'dispatching', 'running', 'succeeded', 'failed', 'cancelled')),
    ADD CONSTRAINT release_runs_check_run_id_check CHECK (check_run_id > 0),
    ADD CONSTRAINT release_runs_current_attempt_check CHECK (current_attempt >= 1),
    ADD CONSTRAINT release_runs_completed_check CHECK ((status IN ('succeeded', 'failed', 'cancelled')) = (completed_at IS NOT NULL));
DROP FUNCTION boardreadyops_check_release_runs(text, text, text, text, bigint, integer, timestamptz);
ALTER TABLE execution_attempts
    DROP CONSTRAINT execution_attempts_row_check,
    ADD CONSTRAINT execution_attempts_number_check CHECK (number >= 1),
    ADD CONSTRAINT execution_attempts_status_check CHECK (status IN ('pending', 'dispatching', 'running', 'succeeded', 'failed', 'cancelled')),
    ADD CONSTRAINT execution_attempts_workflow_run_id_check CHECK (workflow_run_id > 0),
    ADD CONSTRAINT execution_attempts_conclusion_check CHECK (length(conclusion) BETWEEN 1 AND 64),
    ADD CONSTRAINT execution_attempts_dispatched_check CHECK ((workflow_run_id IS NULL) = (dispatched_at IS NULL)),
    ADD CONSTRAINT execution_attempts_completed_check CHECK ((status IN ('succeeded', 'failed', 'cancelled')) = (completed_at IS NOT NULL));
DROP FUNCTION boardreadyops_check_execution_attempts(integer, text, bigint, timestamptz, timestamptz, text);
ALTER TABLE control_plane_outbox
    DROP CONSTRAINT control_plane_outbox_row_check,
    ADD CONSTRAINT control_plane_outbox_effect_type_check CHECK (effect_type IN ('github.check_run.create', 'github.workflow.dispatch', 'github.check_run.complete')),
    ADD CONSTRAINT control_plane_outbox_generation_check CHECK (generation >= 0),
    ADD CONSTRAINT control_plane_outbox_payload_check CHECK (jsonb_typeof(payload) = 'object' AND pg_column_size(payload) <= 8192),
    ADD CONSTRAINT control_plane_outbox_status_check CHECK (status IN ('available', 'leased', 'completed', 'dead_letter', 'reconciliation_required')),
    ADD CONSTRAINT control_plane_outbox_attempts_check CHECK (attempts >= 0),
    ADD CONSTRAINT control_plane_outbox_max_attempts_check CHECK (max_attempts BETWEEN 1 AND 1000),
    ADD CONSTRAINT control_plane_outbox_lease_owner_check CHECK (length(lease_owner) BETWEEN 1 AND 200),
    ADD CONSTRAINT control_plane_outbox_last_error_check CHECK (length(last_error) <= 4096),
    ADD CONSTRAINT control_plane_outbox_result_check CHECK (jsonb_typeof(result) = 'object' AND pg_column_size(result) <= 4096),
    ADD CONSTRAINT control_plane_outbox_installation_id_check CHECK (installation_id > 0),
    ADD CONSTRAINT control_plane_outbox_traceparent_check CHECK (traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'),
    ADD CONSTRAINT control_plane_outbox_idempotency_key_check CHECK (idempotency_key = effect_type || ':' || release_run_id::text
            || coalesce(':' || execution_attempt_id::text, '')
            || CASE WHEN generation > 0 THEN ':g' || generation::text ELSE '' END),
    ADD CONSTRAINT control_plane_outbox_attempt_check CHECK ((effect_type = 'github.check_run.create') = (execution_attempt_id IS NULL)),
    ADD CONSTRAINT control_plane_outbox_generation_effect_check CHECK (generation = 0 OR effect_type = 'github.workflow.dispatch'),
    ADD CONSTRAINT control_plane_outbox_lease_check CHECK ((status = 'leased') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)
        AND (status = 'leased' OR (lease_owner IS NULL AND lease_expires_at IS NULL))),
    ADD CONSTRAINT control_plane_outbox_completed_check CHECK ((status = 'completed') = (completed_at IS NOT NULL)),
    ADD CONSTRAINT control_plane_outbox_reconciliation_check CHECK (status <> 'reconciliation_required'
        OR (effect_type = 'github.workflow.dispatch' AND delivery_started_at IS NOT NULL));
DROP FUNCTION boardreadyops_check_control_plane_outbox(text, text, integer, jsonb, text, integer, integer, text, timestamptz, timestamptz, timestamptz, text, jsonb, uuid, uuid, bigint, text);
DROP FUNCTION boardreadyops_check_violation(text, text);
