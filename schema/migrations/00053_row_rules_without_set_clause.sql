-- The row rules without a SET clause on the hot path (issue 25, docs/performance.md "Row rules
-- without a search-path switch").
--
-- Each hot table's CHECK calls boardreadyops_<entity>_validate_row once per row version. Its
-- SET search_path clause made every call push a GUC level, parse and set the search path, and
-- restore it afterwards, which also invalidates the cached namespace path that the next lookup
-- recomputes: in BenchmarkQueueMachinery the outbox's row check cost PostgreSQL 8–11 µs per
-- effect (two row versions), of which the SET clause was about half.
--
-- Every hot-path write runs inside a state-machine function whose search path is already pinned
-- to 'pg_catalog, pg_temp'. So each validate_row function now has no SET clause and evaluates
-- its rules itself only when the search path is exactly that one, tested with fully qualified
-- names (pg_catalog.current_setting, OPERATOR(pg_catalog.=)) that no search path can redirect.
-- Its rule expressions are then parsed, planned and cached under the pinned path only: PL/pgSQL
-- plans record the search path they were made under and are made again when it differs. Under
-- any other search path (an operator's direct UPDATE, say), or when a rule fails, the function
-- calls boardreadyops_<entity>_validate_row_pinned, the former function unchanged with its SET
-- clause, which evaluates the rules under the pinned path and names the broken one. The rules
-- are the same, rule for rule (pkg/migrate TestRowRulesWithoutSetClause compares the two
-- expressions and attacks the unpinned path with a hostile operator).
--
-- Only function definitions change: no table lock, and no constraint is re-validated.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_webhook_validate_row_pinned(p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
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
        RETURN public.boardreadyops_row_rule_violation('webhook_inbox', 'webhook_inbox_delivery_id_check');
    END IF;
    IF NOT (length(p_event) BETWEEN 1 AND 64 AND p_event ~ '^[a-z_]+$') THEN
        RETURN public.boardreadyops_row_rule_violation('webhook_inbox', 'webhook_inbox_event_check');
    END IF;
    IF NOT (length(p_action) BETWEEN 1 AND 64 AND p_action ~ '^[a-z_]+$') THEN
        RETURN public.boardreadyops_row_rule_violation('webhook_inbox', 'webhook_inbox_action_check');
    END IF;
    IF NOT (p_installation_id > 0) THEN
        RETURN public.boardreadyops_row_rule_violation('webhook_inbox', 'webhook_inbox_installation_id_check');
    END IF;
    IF NOT (p_repository_id > 0) THEN
        RETURN public.boardreadyops_row_rule_violation('webhook_inbox', 'webhook_inbox_repository_id_check');
    END IF;
    IF NOT (jsonb_typeof(p_payload) = 'object' AND pg_column_size(p_payload) <= 1048576) THEN
        RETURN public.boardreadyops_row_rule_violation('webhook_inbox', 'webhook_inbox_payload_check');
    END IF;
    IF NOT (length(p_payload_sha256) = 32) THEN
        RETURN public.boardreadyops_row_rule_violation('webhook_inbox', 'webhook_inbox_payload_sha256_check');
    END IF;
    IF NOT (length(p_traceparent) = 55 AND substr(p_traceparent, 36, 1) = '-'
            AND p_traceparent ~ '^[0-9a-f][0-9a-f]-[0-9a-f]+-[0-9a-f]+-[0-9a-f][0-9a-f]$') THEN
        RETURN public.boardreadyops_row_rule_violation('webhook_inbox', 'webhook_inbox_traceparent_check');
    END IF;
    RETURN public.boardreadyops_row_rule_violation('webhook_inbox', 'webhook_inbox_row_check');
END;
$_$;
-- +goose StatementEnd
ALTER FUNCTION public.boardreadyops_webhook_validate_row_pinned(p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text) OWNER TO boardreadyops_schema_owner;
REVOKE ALL ON FUNCTION public.boardreadyops_webhook_validate_row_pinned(p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_webhook_validate_row_pinned(p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text) TO boardreadyops_ingest, boardreadyops_lifecycle, boardreadyops_dispatcher, boardreadyops_admin;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_webhook_validate_row(p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $_$
BEGIN
    -- The rules without a SET clause only where the search path is the pinned one (the header).
    IF pg_catalog.current_setting('search_path') OPERATOR(pg_catalog.=) 'pg_catalog, pg_temp' THEN
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
    END IF;
    RETURN public.boardreadyops_webhook_validate_row_pinned(p_delivery_id, p_event, p_action, p_installation_id, p_repository_id, p_payload, p_payload_sha256, p_traceparent);
END;
$_$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_job_validate_row_pinned(p_kind text, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_last_error text, p_completed_at timestamp with time zone, p_traceparent text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
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
        RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_kind_check');
    END IF;
    IF NOT (p_status IN ('available', 'leased', 'completed', 'dead_letter')) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_status_check');
    END IF;
    IF NOT (p_attempts >= 0) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_attempts_check');
    END IF;
    IF NOT (p_max_attempts BETWEEN 1 AND 1000) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_max_attempts_check');
    END IF;
    IF NOT (length(p_lease_owner) BETWEEN 1 AND 200) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_lease_owner_check');
    END IF;
    IF NOT (length(p_last_error) <= 4096) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_last_error_check');
    END IF;
    IF NOT (length(p_traceparent) = 55 AND substr(p_traceparent, 36, 1) = '-'
            AND p_traceparent ~ '^[0-9a-f][0-9a-f]-[0-9a-f]+-[0-9a-f]+-[0-9a-f][0-9a-f]$') THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_traceparent_check');
    END IF;
    IF NOT ((p_status = 'leased') = (p_lease_owner IS NOT NULL AND p_lease_expires_at IS NOT NULL)
            AND (p_status = 'leased' OR (p_lease_owner IS NULL AND p_lease_expires_at IS NULL))) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_lease_check');
    END IF;
    IF NOT ((p_status = 'completed') = (p_completed_at IS NOT NULL)) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_completed_check');
    END IF;
    RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_row_check');
END;
$_$;
-- +goose StatementEnd
ALTER FUNCTION public.boardreadyops_job_validate_row_pinned(p_kind text, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_last_error text, p_completed_at timestamp with time zone, p_traceparent text) OWNER TO boardreadyops_schema_owner;
REVOKE ALL ON FUNCTION public.boardreadyops_job_validate_row_pinned(p_kind text, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_last_error text, p_completed_at timestamp with time zone, p_traceparent text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_job_validate_row_pinned(p_kind text, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_last_error text, p_completed_at timestamp with time zone, p_traceparent text) TO boardreadyops_ingest, boardreadyops_lifecycle, boardreadyops_dispatcher, boardreadyops_admin;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_validate_row(p_kind text, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_last_error text, p_completed_at timestamp with time zone, p_traceparent text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $_$
BEGIN
    -- The rules without a SET clause only where the search path is the pinned one (the header).
    IF pg_catalog.current_setting('search_path') OPERATOR(pg_catalog.=) 'pg_catalog, pg_temp' THEN
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
    END IF;
    RETURN public.boardreadyops_job_validate_row_pinned(p_kind, p_status, p_attempts, p_max_attempts, p_lease_owner, p_lease_expires_at, p_last_error, p_completed_at, p_traceparent);
END;
$_$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_release_run_validate_row_pinned(p_ref text, p_head_sha text, p_workflow_file text, p_status text, p_check_run_id bigint, p_current_attempt integer, p_completed_at timestamp with time zone) RETURNS boolean
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
ALTER FUNCTION public.boardreadyops_release_run_validate_row_pinned(p_ref text, p_head_sha text, p_workflow_file text, p_status text, p_check_run_id bigint, p_current_attempt integer, p_completed_at timestamp with time zone) OWNER TO boardreadyops_schema_owner;
REVOKE ALL ON FUNCTION public.boardreadyops_release_run_validate_row_pinned(p_ref text, p_head_sha text, p_workflow_file text, p_status text, p_check_run_id bigint, p_current_attempt integer, p_completed_at timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_release_run_validate_row_pinned(p_ref text, p_head_sha text, p_workflow_file text, p_status text, p_check_run_id bigint, p_current_attempt integer, p_completed_at timestamp with time zone) TO boardreadyops_ingest, boardreadyops_lifecycle, boardreadyops_dispatcher, boardreadyops_admin;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_validate_row(p_ref text, p_head_sha text, p_workflow_file text, p_status text, p_check_run_id bigint, p_current_attempt integer, p_completed_at timestamp with time zone) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $_$
BEGIN
    -- The rules without a SET clause only where the search path is the pinned one (the header).
    IF pg_catalog.current_setting('search_path') OPERATOR(pg_catalog.=) 'pg_catalog, pg_temp' THEN
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
    END IF;
    RETURN public.boardreadyops_release_run_validate_row_pinned(p_ref, p_head_sha, p_workflow_file, p_status, p_check_run_id, p_current_attempt, p_completed_at);
END;
$_$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_execution_attempt_validate_row_pinned(p_number integer, p_status text, p_workflow_run_id bigint, p_dispatched_at timestamp with time zone, p_completed_at timestamp with time zone, p_conclusion text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
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
        RETURN public.boardreadyops_row_rule_violation('execution_attempts', 'execution_attempts_number_check');
    END IF;
    IF NOT (p_status IN ('pending', 'dispatching', 'running', 'succeeded', 'failed', 'cancelled')) THEN
        RETURN public.boardreadyops_row_rule_violation('execution_attempts', 'execution_attempts_status_check');
    END IF;
    IF NOT (p_workflow_run_id > 0) THEN
        RETURN public.boardreadyops_row_rule_violation('execution_attempts', 'execution_attempts_workflow_run_id_check');
    END IF;
    IF NOT (length(p_conclusion) BETWEEN 1 AND 64) THEN
        RETURN public.boardreadyops_row_rule_violation('execution_attempts', 'execution_attempts_conclusion_check');
    END IF;
    IF NOT ((p_workflow_run_id IS NULL) = (p_dispatched_at IS NULL)) THEN
        RETURN public.boardreadyops_row_rule_violation('execution_attempts', 'execution_attempts_dispatched_check');
    END IF;
    IF NOT ((p_status IN ('succeeded', 'failed', 'cancelled')) = (p_completed_at IS NOT NULL)) THEN
        RETURN public.boardreadyops_row_rule_violation('execution_attempts', 'execution_attempts_completed_check');
    END IF;
    RETURN public.boardreadyops_row_rule_violation('execution_attempts', 'execution_attempts_row_check');
END;
$$;
-- +goose StatementEnd
ALTER FUNCTION public.boardreadyops_execution_attempt_validate_row_pinned(p_number integer, p_status text, p_workflow_run_id bigint, p_dispatched_at timestamp with time zone, p_completed_at timestamp with time zone, p_conclusion text) OWNER TO boardreadyops_schema_owner;
REVOKE ALL ON FUNCTION public.boardreadyops_execution_attempt_validate_row_pinned(p_number integer, p_status text, p_workflow_run_id bigint, p_dispatched_at timestamp with time zone, p_completed_at timestamp with time zone, p_conclusion text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_execution_attempt_validate_row_pinned(p_number integer, p_status text, p_workflow_run_id bigint, p_dispatched_at timestamp with time zone, p_completed_at timestamp with time zone, p_conclusion text) TO boardreadyops_ingest, boardreadyops_lifecycle, boardreadyops_dispatcher, boardreadyops_admin;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_validate_row(p_number integer, p_status text, p_workflow_run_id bigint, p_dispatched_at timestamp with time zone, p_completed_at timestamp with time zone, p_conclusion text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
BEGIN
    -- The rules without a SET clause only where the search path is the pinned one (the header).
    IF pg_catalog.current_setting('search_path') OPERATOR(pg_catalog.=) 'pg_catalog, pg_temp' THEN
        IF (p_number >= 1) IS NOT FALSE
            AND (p_status IN ('pending', 'dispatching', 'running', 'succeeded', 'failed', 'cancelled')) IS NOT FALSE
            AND (p_workflow_run_id > 0) IS NOT FALSE
            AND (length(p_conclusion) BETWEEN 1 AND 64) IS NOT FALSE
            AND ((p_workflow_run_id IS NULL) = (p_dispatched_at IS NULL)) IS NOT FALSE
            AND ((p_status IN ('succeeded', 'failed', 'cancelled')) = (p_completed_at IS NOT NULL)) IS NOT FALSE THEN
            RETURN true;
        END IF;
    END IF;
    RETURN public.boardreadyops_execution_attempt_validate_row_pinned(p_number, p_status, p_workflow_run_id, p_dispatched_at, p_completed_at, p_conclusion);
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_validate_row_pinned(p_effect_type text, p_idempotency_key text, p_generation integer, p_payload jsonb, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_delivery_started_at timestamp with time zone, p_completed_at timestamp with time zone, p_last_error text, p_result jsonb, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_traceparent text) RETURNS boolean
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
ALTER FUNCTION public.boardreadyops_outbox_validate_row_pinned(p_effect_type text, p_idempotency_key text, p_generation integer, p_payload jsonb, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_delivery_started_at timestamp with time zone, p_completed_at timestamp with time zone, p_last_error text, p_result jsonb, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_traceparent text) OWNER TO boardreadyops_schema_owner;
REVOKE ALL ON FUNCTION public.boardreadyops_outbox_validate_row_pinned(p_effect_type text, p_idempotency_key text, p_generation integer, p_payload jsonb, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_delivery_started_at timestamp with time zone, p_completed_at timestamp with time zone, p_last_error text, p_result jsonb, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_traceparent text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_validate_row_pinned(p_effect_type text, p_idempotency_key text, p_generation integer, p_payload jsonb, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_delivery_started_at timestamp with time zone, p_completed_at timestamp with time zone, p_last_error text, p_result jsonb, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_traceparent text) TO boardreadyops_ingest, boardreadyops_lifecycle, boardreadyops_dispatcher, boardreadyops_admin;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_validate_row(p_effect_type text, p_idempotency_key text, p_generation integer, p_payload jsonb, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_delivery_started_at timestamp with time zone, p_completed_at timestamp with time zone, p_last_error text, p_result jsonb, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_traceparent text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $_$
BEGIN
    -- The rules without a SET clause only where the search path is the pinned one (the header).
    IF pg_catalog.current_setting('search_path') OPERATOR(pg_catalog.=) 'pg_catalog, pg_temp' THEN
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
    END IF;
    RETURN public.boardreadyops_outbox_validate_row_pinned(p_effect_type, p_idempotency_key, p_generation, p_payload, p_status, p_attempts, p_max_attempts, p_lease_owner, p_lease_expires_at, p_delivery_started_at, p_completed_at, p_last_error, p_result, p_release_run_id, p_execution_attempt_id, p_installation_id, p_traceparent);
END;
$_$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_webhook_validate_row(p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
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
        RETURN public.boardreadyops_row_rule_violation('webhook_inbox', 'webhook_inbox_delivery_id_check');
    END IF;
    IF NOT (length(p_event) BETWEEN 1 AND 64 AND p_event ~ '^[a-z_]+$') THEN
        RETURN public.boardreadyops_row_rule_violation('webhook_inbox', 'webhook_inbox_event_check');
    END IF;
    IF NOT (length(p_action) BETWEEN 1 AND 64 AND p_action ~ '^[a-z_]+$') THEN
        RETURN public.boardreadyops_row_rule_violation('webhook_inbox', 'webhook_inbox_action_check');
    END IF;
    IF NOT (p_installation_id > 0) THEN
        RETURN public.boardreadyops_row_rule_violation('webhook_inbox', 'webhook_inbox_installation_id_check');
    END IF;
    IF NOT (p_repository_id > 0) THEN
        RETURN public.boardreadyops_row_rule_violation('webhook_inbox', 'webhook_inbox_repository_id_check');
    END IF;
    IF NOT (jsonb_typeof(p_payload) = 'object' AND pg_column_size(p_payload) <= 1048576) THEN
        RETURN public.boardreadyops_row_rule_violation('webhook_inbox', 'webhook_inbox_payload_check');
    END IF;
    IF NOT (length(p_payload_sha256) = 32) THEN
        RETURN public.boardreadyops_row_rule_violation('webhook_inbox', 'webhook_inbox_payload_sha256_check');
    END IF;
    IF NOT (length(p_traceparent) = 55 AND substr(p_traceparent, 36, 1) = '-'
            AND p_traceparent ~ '^[0-9a-f][0-9a-f]-[0-9a-f]+-[0-9a-f]+-[0-9a-f][0-9a-f]$') THEN
        RETURN public.boardreadyops_row_rule_violation('webhook_inbox', 'webhook_inbox_traceparent_check');
    END IF;
    RETURN public.boardreadyops_row_rule_violation('webhook_inbox', 'webhook_inbox_row_check');
END;
$_$;
-- +goose StatementEnd
DROP FUNCTION public.boardreadyops_webhook_validate_row_pinned(p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_validate_row(p_kind text, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_last_error text, p_completed_at timestamp with time zone, p_traceparent text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
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
        RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_kind_check');
    END IF;
    IF NOT (p_status IN ('available', 'leased', 'completed', 'dead_letter')) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_status_check');
    END IF;
    IF NOT (p_attempts >= 0) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_attempts_check');
    END IF;
    IF NOT (p_max_attempts BETWEEN 1 AND 1000) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_max_attempts_check');
    END IF;
    IF NOT (length(p_lease_owner) BETWEEN 1 AND 200) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_lease_owner_check');
    END IF;
    IF NOT (length(p_last_error) <= 4096) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_last_error_check');
    END IF;
    IF NOT (length(p_traceparent) = 55 AND substr(p_traceparent, 36, 1) = '-'
            AND p_traceparent ~ '^[0-9a-f][0-9a-f]-[0-9a-f]+-[0-9a-f]+-[0-9a-f][0-9a-f]$') THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_traceparent_check');
    END IF;
    IF NOT ((p_status = 'leased') = (p_lease_owner IS NOT NULL AND p_lease_expires_at IS NOT NULL)
            AND (p_status = 'leased' OR (p_lease_owner IS NULL AND p_lease_expires_at IS NULL))) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_lease_check');
    END IF;
    IF NOT ((p_status = 'completed') = (p_completed_at IS NOT NULL)) THEN
        RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_completed_check');
    END IF;
    RETURN public.boardreadyops_row_rule_violation('control_plane_jobs', 'control_plane_jobs_row_check');
END;
$_$;
-- +goose StatementEnd
DROP FUNCTION public.boardreadyops_job_validate_row_pinned(p_kind text, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_last_error text, p_completed_at timestamp with time zone, p_traceparent text);

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
DROP FUNCTION public.boardreadyops_release_run_validate_row_pinned(p_ref text, p_head_sha text, p_workflow_file text, p_status text, p_check_run_id bigint, p_current_attempt integer, p_completed_at timestamp with time zone);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_validate_row(p_number integer, p_status text, p_workflow_run_id bigint, p_dispatched_at timestamp with time zone, p_completed_at timestamp with time zone, p_conclusion text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
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
        RETURN public.boardreadyops_row_rule_violation('execution_attempts', 'execution_attempts_number_check');
    END IF;
    IF NOT (p_status IN ('pending', 'dispatching', 'running', 'succeeded', 'failed', 'cancelled')) THEN
        RETURN public.boardreadyops_row_rule_violation('execution_attempts', 'execution_attempts_status_check');
    END IF;
    IF NOT (p_workflow_run_id > 0) THEN
        RETURN public.boardreadyops_row_rule_violation('execution_attempts', 'execution_attempts_workflow_run_id_check');
    END IF;
    IF NOT (length(p_conclusion) BETWEEN 1 AND 64) THEN
        RETURN public.boardreadyops_row_rule_violation('execution_attempts', 'execution_attempts_conclusion_check');
    END IF;
    IF NOT ((p_workflow_run_id IS NULL) = (p_dispatched_at IS NULL)) THEN
        RETURN public.boardreadyops_row_rule_violation('execution_attempts', 'execution_attempts_dispatched_check');
    END IF;
    IF NOT ((p_status IN ('succeeded', 'failed', 'cancelled')) = (p_completed_at IS NOT NULL)) THEN
        RETURN public.boardreadyops_row_rule_violation('execution_attempts', 'execution_attempts_completed_check');
    END IF;
    RETURN public.boardreadyops_row_rule_violation('execution_attempts', 'execution_attempts_row_check');
END;
$$;
-- +goose StatementEnd
DROP FUNCTION public.boardreadyops_execution_attempt_validate_row_pinned(p_number integer, p_status text, p_workflow_run_id bigint, p_dispatched_at timestamp with time zone, p_completed_at timestamp with time zone, p_conclusion text);

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
DROP FUNCTION public.boardreadyops_outbox_validate_row_pinned(p_effect_type text, p_idempotency_key text, p_generation integer, p_payload jsonb, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_delivery_started_at timestamp with time zone, p_completed_at timestamp with time zone, p_last_error text, p_result jsonb, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_traceparent text);
