-- The release-run row rule's workflow-file pattern without a backslash.
--
-- boardreadyops_release_run_validate_row and its _pinned twin tested workflow_file against
-- '^[A-Za-z0-9._-]+\.ya?ml$'. A PL/pgSQL body is parsed under the session's
-- standard_conforming_strings: in a session with it off (an operator's direct connection), the
-- literal's backslash is an escape, the pattern becomes '^[A-Za-z0-9._-]+.ya?ml$', and '.'
-- matches any character, so '../yml' or 'release/yml' passed the rule and went into the workflow
-- dispatch's URL path. '[.]' means a dot under either setting. The table CHECKs of the release
-- settings keep their pattern: a CHECK's expression is stored parsed, not re-read per session.
-- pkg/migrate TestWorkflowFileRuleUnderEverySetting is the attack.
--
-- Only function definitions change (CREATE OR REPLACE keeps owner and grants): no table lock,
-- and no constraint is re-validated.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_validate_row_pinned(p_ref text, p_head_sha text, p_workflow_file text, p_status text, p_check_run_id bigint, p_current_attempt integer, p_completed_at timestamp with time zone) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
BEGIN
    -- Every rule in one expression: the common case is a single evaluation.
    IF (p_ref ~ '^refs/tags/.+' AND length(p_ref) <= 512) IS NOT FALSE
        AND (length(p_head_sha) IN (40, 64) AND p_head_sha ~ '^[0-9a-f]+$') IS NOT FALSE
        AND (p_workflow_file ~ '^[A-Za-z0-9._-]+[.]ya?ml$'
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
    IF NOT (p_workflow_file ~ '^[A-Za-z0-9._-]+[.]ya?ml$'
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
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_validate_row(p_ref text, p_head_sha text, p_workflow_file text, p_status text, p_check_run_id bigint, p_current_attempt integer, p_completed_at timestamp with time zone) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $_$
BEGIN
    -- The rules without a SET clause only where the search path is the pinned one (the header).
    IF pg_catalog.current_setting('search_path') OPERATOR(pg_catalog.=) 'pg_catalog, pg_temp' THEN
        IF (p_ref ~ '^refs/tags/.+' AND length(p_ref) <= 512) IS NOT FALSE
            AND (length(p_head_sha) IN (40, 64) AND p_head_sha ~ '^[0-9a-f]+$') IS NOT FALSE
            AND (p_workflow_file ~ '^[A-Za-z0-9._-]+[.]ya?ml$'
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_validate_row_pinned(p_ref text, p_head_sha text, p_workflow_file text, p_status text, p_check_run_id bigint, p_current_attempt integer, p_completed_at timestamp with time zone) RETURNS boolean
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
