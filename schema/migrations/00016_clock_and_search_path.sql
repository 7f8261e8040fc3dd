-- Every function works at the database's time and on a fixed search path (issue 17 §3 b, d).
--
-- (b) The clock. Until now every function took an optional p_now, "NULL means now()", so any
--     service could choose the time: the dispatcher recovered a live lease by passing a time a
--     day ahead and claimed past every backoff by passing a year ahead; lifecycle could do the same
--     with jobs, ingest could date a delivery. Now the time is boardreadyops_clock_now(p_now):
--     p_now only when the session's login (session_user, which SET ROLE does not change) is a
--     member of boardreadyops_clock or boardreadyops_admin, now() for everyone else. The tests
--     keep their injectable clock (their superuser is a member of every role; a test login may
--     be granted boardreadyops_clock); no service login is a member of either. The signatures
--     stay, so binaries of the previous release keep working during a roll.
-- (d) The search path. Every function — SECURITY DEFINER, row rule, helper and deprecated
--     wrapper alike — now runs with search_path = pg_catalog, pg_temp and names our tables and
--     functions as public.<name>. With public on the path, an object planted there (possible
--     wherever PUBLIC kept CREATE on schema public, i.e. databases upgraded from PostgreSQL 14 or
--     older; 00015 revokes it) could win function resolution inside a definer function — e.g. a
--     jsonb_build_object(text, bigint) is a closer match than pg_catalog's variadic one — and run
--     as the owner. pg_temp is last, so temporary objects never shadow anything.
--
-- The bodies are the previous definitions word for word, with only those two changes (generated
-- from pg_get_functiondef of the schema at 00015; the Down section restores those definitions).
-- The row rules pay for the SET clause with a configuration save and restore per call (measured
-- in docs/performance.md, "Pinned search paths").
--
-- Rules for every function added after this migration: docs/operations.md, "Rules for a new
-- function".

-- +goose Up

-- The one clock of every function. SQL, not PL/pgSQL, every name qualified and no SET clause, so
-- that it is inlined into its callers' expressions.
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_clock_now(p_now timestamptz)
RETURNS timestamptz
LANGUAGE sql
STABLE
AS $$
    SELECT CASE
        WHEN p_now IS NULL THEN pg_catalog.now()
        WHEN pg_catalog.pg_has_role(session_user, 'boardreadyops_clock', 'MEMBER')
          OR pg_catalog.pg_has_role(session_user, 'boardreadyops_admin', 'MEMBER') THEN p_now
        ELSE pg_catalog.now()
    END;
$$;
-- +goose StatementEnd
ALTER FUNCTION public.boardreadyops_clock_now(timestamptz) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_clock_now(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_clock_now(timestamptz) TO boardreadyops_admin;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_accept_webhook(p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(inbox_id bigint, job_id bigint, duplicate boolean)
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_webhook_accept($1, $2, $3, $4, $5, $6, $7, $8, $9)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_accept_webhooks(p_delivery_ids text[], p_events text[], p_actions text[], p_installation_ids bigint[], p_repository_ids bigint[], p_payloads jsonb[], p_payload_sha256s bytea[], p_traceparents text[], p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(delivery_id text, inbox_id bigint, job_id bigint)
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_webhook_accept_batch($1, $2, $3, $4, $5, $6, $7, $8, $9)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_check_control_plane_jobs(p_kind text, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_last_error text, p_completed_at timestamp with time zone, p_traceparent text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_job_validate_row($1, $2, $3, $4, $5, $6, $7, $8, $9)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_check_control_plane_outbox(p_effect_type text, p_idempotency_key text, p_generation integer, p_payload jsonb, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_delivery_started_at timestamp with time zone, p_completed_at timestamp with time zone, p_last_error text, p_result jsonb, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_traceparent text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_outbox_validate_row($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_check_execution_attempts(p_number integer, p_status text, p_workflow_run_id bigint, p_dispatched_at timestamp with time zone, p_completed_at timestamp with time zone, p_conclusion text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_execution_attempt_validate_row($1, $2, $3, $4, $5, $6)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_check_release_runs(p_ref text, p_head_sha text, p_workflow_file text, p_status text, p_check_run_id bigint, p_current_attempt integer, p_completed_at timestamp with time zone)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_release_run_validate_row($1, $2, $3, $4, $5, $6, $7)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_check_violation(p_table text, p_constraint text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_row_rule_violation($1, $2)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_check_webhook_inbox(p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_webhook_validate_row($1, $2, $3, $4, $5, $6, $7, $8)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_claim_control_plane_jobs(p_worker text, p_limit integer, p_lease interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF control_plane_jobs
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_job_claim($1, $2, $3, $4)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_claim_control_plane_outbox(p_worker text, p_limit integer, p_lease interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF control_plane_outbox
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_outbox_claim($1, $2, $3, $4)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_complete_check_run_complete(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_outbox_complete_check_run_complete($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_complete_check_run_complete_batch(p_ids bigint[], p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF bigint
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_outbox_complete_check_run_complete_batch($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_complete_check_run_create(p_id bigint, p_worker text, p_check_run_id bigint, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS bigint
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_outbox_complete_check_run_create($1, $2, $3, $4)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_complete_control_plane_job(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_job_complete($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_complete_control_plane_jobs(p_ids bigint[], p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS integer
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_job_complete_batch($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_complete_workflow_dispatch(p_id bigint, p_worker text, p_workflow_run_id bigint, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_outbox_complete_workflow_dispatch($1, $2, $3, $4)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_control_plane_job_stats(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(available bigint, due bigint, leased bigint, retrying bigint, dead_letter bigint, oldest_available_age_seconds double precision)
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_job_stats($1)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_control_plane_outbox_stats(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(available bigint, due bigint, leased bigint, retrying bigint, dead_letter bigint, reconciliation_required bigint, oldest_available_age_seconds double precision)
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_outbox_stats($1)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_create_release_run(p_repository_id bigint, p_installation_id bigint, p_ref text, p_head_sha text, p_workflow_file text, p_check_run_name text, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS uuid
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_release_run_create($1, $2, $3, $4, $5, $6, $7, $8)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_dead_letter_control_plane_job(p_id bigint, p_worker text, p_error text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_job_dead_letter($1, $2, $3, $4)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_dead_letter_control_plane_outbox(p_id bigint, p_worker text, p_error text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_outbox_dead_letter($1, $2, $3, $4)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_dead_letter_installation_outbox(p_installation_id bigint, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS bigint
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_outbox_dead_letter_installation($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_defer_control_plane_job(p_id bigint, p_worker text, p_until timestamp with time zone, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_job_defer($1, $2, $3, $4, $5)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_defer_control_plane_outbox(p_id bigint, p_worker text, p_until timestamp with time zone, p_reason text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_outbox_defer($1, $2, $3, $4, $5)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_enqueue_control_plane_outbox(p_effect_type text, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_payload jsonb, p_traceparent text DEFAULT NULL::text, p_max_attempts integer DEFAULT 10, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS bigint
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_outbox_enqueue($1, $2, $3, $4, $5, $6, $7, $8)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_start_next(p_run_id uuid, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(attempt_id uuid, attempt_number integer, outbox_id bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_validate_row(p_number integer, p_status text, p_workflow_run_id bigint, p_dispatched_at timestamp with time zone, p_completed_at timestamp with time zone, p_conclusion text)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_claim(p_worker text, p_limit integer, p_lease interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF control_plane_jobs
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_worker IS NULL OR length(p_worker) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'worker must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'claim limit must be between 1 and 1000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'lease must be between 1 second and 1 hour, got %', p_lease USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH due AS (
        SELECT j.id FROM public.control_plane_jobs j
        WHERE j.status = 'available' AND j.available_at <= v_now
        ORDER BY j.available_at, j.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE public.control_plane_jobs j
    SET status = 'leased', lease_owner = p_worker, lease_expires_at = v_now + p_lease,
        attempts = j.attempts + 1, updated_at = v_now
    FROM due
    WHERE j.id = due.id
    RETURNING j.*;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_complete(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    PERFORM public.boardreadyops_job_lock_leased(p_id, p_worker);
    UPDATE public.control_plane_jobs
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
        updated_at = v_now
    WHERE id = p_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_complete_batch(p_ids bigint[], p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    v_count integer;
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 10000 THEN
        RAISE EXCEPTION 'between 0 and 10000 job ids per call' USING ERRCODE = '22023';
    END IF;
    UPDATE public.control_plane_jobs
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL, updated_at = v_now
    -- lease_owner is set exactly when the job is leased (control_plane_jobs_lease_check), so this
    -- selects the caller's leased jobs without naming status: a `status = 'leased'` here matched
    -- the partial lease index, which the generic plan preferred to the primary key.
    WHERE id = ANY(p_ids) AND lease_owner = p_worker;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count <> cardinality(ARRAY(SELECT DISTINCT unnest(p_ids))) THEN
        RAISE EXCEPTION '% of % jobs are not leased by worker %', cardinality(p_ids) - v_count, cardinality(p_ids), p_worker
            USING ERRCODE = 'BR001';
    END IF;
    RETURN v_count;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_dead_letter(p_id bigint, p_worker text, p_error text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_error IS NULL OR btrim(p_error) = '' THEN
        RAISE EXCEPTION 'dead-lettering needs an error description' USING ERRCODE = '22023';
    END IF;
    PERFORM public.boardreadyops_job_lock_leased(p_id, p_worker);
    UPDATE public.control_plane_jobs
    SET status = 'dead_letter', lease_owner = NULL, lease_expires_at = NULL,
        last_error = left(p_error, 4096), updated_at = v_now
    WHERE id = p_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_defer(p_id bigint, p_worker text, p_until timestamp with time zone, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_jobs;
BEGIN
    IF p_until IS NULL OR p_until > v_now + interval '1 hour' THEN
        RAISE EXCEPTION 'defer time must be set and at most 1 hour ahead, got %', p_until USING ERRCODE = '22023';
    END IF;
    r := public.boardreadyops_job_lock_leased(p_id, p_worker);
    UPDATE public.control_plane_jobs
    SET status = 'available', available_at = greatest(p_until, v_now), attempts = greatest(r.attempts - 1, 0),
        lease_owner = NULL, lease_expires_at = NULL, last_error = left(coalesce(p_reason, 'deferred'), 4096),
        updated_at = v_now
    WHERE id = p_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_lock_leased(p_id bigint, p_worker text)
 RETURNS control_plane_jobs
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    r public.control_plane_jobs;
BEGIN
    SELECT * INTO r FROM public.control_plane_jobs WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % does not exist', p_id USING ERRCODE = 'BR006';
    END IF;
    IF r.status <> 'leased' OR r.lease_owner IS DISTINCT FROM p_worker THEN
        RAISE EXCEPTION 'job % is not leased by worker %', p_id, p_worker
            USING ERRCODE = 'BR001',
                  DETAIL = format('status is %s, lease owner is %s', r.status, coalesce(r.lease_owner, 'none'));
    END IF;
    RETURN r;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_recover_leases(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, p_limit integer DEFAULT 1000)
 RETURNS TABLE(id bigint, kind text, previous_owner text, status text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'recovery limit must be between 1 and 10000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH expired AS (
        SELECT j.id, j.lease_owner,
               CASE WHEN j.attempts >= j.max_attempts THEN 'dead_letter' ELSE 'available' END AS next_status
        FROM public.control_plane_jobs j
        WHERE j.status = 'leased' AND j.lease_expires_at <= v_now
        ORDER BY j.lease_expires_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE public.control_plane_jobs j
    SET status = e.next_status,
        available_at = CASE WHEN e.next_status = 'available' THEN v_now ELSE j.available_at END,
        lease_owner = NULL, lease_expires_at = NULL,
        last_error = left(format('lease of worker %s expired at %s; %s', e.lease_owner, j.lease_expires_at,
                                 CASE e.next_status WHEN 'dead_letter'
                                      THEN format('attempts exhausted (%s of %s)', j.attempts, j.max_attempts)
                                      ELSE 'returned to the queue' END), 4096),
        updated_at = v_now
    FROM expired e
    WHERE j.id = e.id
    RETURNING j.id, j.kind, e.lease_owner, j.status;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_release(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_jobs;
BEGIN
    r := public.boardreadyops_job_lock_leased(p_id, p_worker);
    UPDATE public.control_plane_jobs
    SET status = 'available', available_at = v_now, attempts = greatest(r.attempts - 1, 0),
        lease_owner = NULL, lease_expires_at = NULL, updated_at = v_now
    WHERE id = p_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_replay(p_id bigint, p_operator text, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS control_plane_jobs
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_jobs;
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'replay needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'replay needs a reason' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO r FROM public.control_plane_jobs WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % does not exist', p_id USING ERRCODE = 'BR006';
    END IF;
    IF r.status <> 'dead_letter' THEN
        RAISE EXCEPTION 'job % is %, only dead letters can be replayed', p_id, r.status USING ERRCODE = 'BR003';
    END IF;
    INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'job.replay', 'job', p_id, p_reason,
            jsonb_build_object('last_error', r.last_error, 'attempts', r.attempts), r.status, 'available');
    UPDATE public.control_plane_jobs
    SET status = 'available', available_at = v_now, attempts = 0, updated_at = v_now
    WHERE public.control_plane_jobs.id = p_id
    RETURNING * INTO r;
    PERFORM pg_notify('boardreadyops_jobs', '');
    RETURN r;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_retry(p_id bigint, p_worker text, p_error text, p_retry_at timestamp with time zone, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_jobs;
    v_status text;
BEGIN
    IF p_error IS NULL OR btrim(p_error) = '' THEN
        RAISE EXCEPTION 'retry needs an error description' USING ERRCODE = '22023';
    END IF;
    r := public.boardreadyops_job_lock_leased(p_id, p_worker);
    v_status := CASE WHEN r.attempts >= r.max_attempts THEN 'dead_letter' ELSE 'available' END;
    UPDATE public.control_plane_jobs
    SET status = v_status,
        available_at = CASE WHEN v_status = 'available' THEN greatest(coalesce(p_retry_at, v_now), v_now) ELSE available_at END,
        lease_owner = NULL, lease_expires_at = NULL,
        last_error = left(CASE WHEN v_status = 'dead_letter'
                               THEN format('attempts exhausted (%s of %s): %s', r.attempts, r.max_attempts, p_error)
                               ELSE p_error END, 4096),
        updated_at = v_now
    WHERE id = p_id;
    RETURN v_status;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_stats(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(available bigint, due bigint, leased bigint, retrying bigint, dead_letter bigint, oldest_available_age_seconds double precision)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT
        (SELECT count(*) FROM public.control_plane_jobs WHERE status = 'available'),
        (SELECT count(*) FROM public.control_plane_jobs WHERE status = 'available' AND available_at <= public.boardreadyops_clock_now(p_now)),
        (SELECT count(*) FROM public.control_plane_jobs WHERE status = 'leased'),
        (SELECT count(*) FROM public.control_plane_jobs WHERE status = 'available' AND attempts > 0),
        (SELECT count(*) FROM public.control_plane_jobs WHERE status = 'dead_letter'),
        coalesce((SELECT extract(epoch FROM public.boardreadyops_clock_now(p_now) - min(available_at))::double precision
                  FROM public.control_plane_jobs WHERE status = 'available' AND available_at <= public.boardreadyops_clock_now(p_now)), 0);
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_validate_row(p_kind text, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_last_error text, p_completed_at timestamp with time zone, p_traceparent text)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_advance_dispatched_attempt(r control_plane_outbox, p_workflow_run_id bigint, p_now timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_claim(p_worker text, p_limit integer, p_lease interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF control_plane_outbox
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_worker IS NULL OR length(p_worker) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'worker must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'claim limit must be between 1 and 1000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'lease must be between 1 second and 1 hour, got %', p_lease USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH due AS (
        SELECT o.id FROM public.control_plane_outbox o
        WHERE o.status = 'available' AND o.available_at <= v_now
        ORDER BY o.available_at, o.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE public.control_plane_outbox o
    SET status = 'leased', lease_owner = p_worker, lease_expires_at = v_now + p_lease,
        attempts = o.attempts + 1, updated_at = v_now,
        delivery_started_at = CASE WHEN o.effect_type = 'github.workflow.dispatch' THEN o.delivery_started_at ELSE v_now END
    FROM due
    WHERE o.id = due.id
    RETURNING o.*;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_check_run_complete(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, 'github.check_run.complete');
    UPDATE public.control_plane_outbox
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
        result = jsonb_build_object('check_run_id', r.payload -> 'check_run_id'), last_error = NULL,
        updated_at = v_now
    WHERE id = p_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_check_run_complete_batch(p_ids bigint[], p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 10000 THEN
        RAISE EXCEPTION 'between 0 and 10000 outbox ids per call' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    UPDATE public.control_plane_outbox o
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
        result = jsonb_build_object('check_run_id', o.payload -> 'check_run_id'), last_error = NULL,
        updated_at = v_now
    WHERE o.id = ANY(p_ids) AND o.lease_owner = p_worker AND o.effect_type = 'github.check_run.complete'
    RETURNING o.id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_check_run_create(p_id bigint, p_worker text, p_check_run_id bigint, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_workflow_dispatch(p_id bigint, p_worker text, p_workflow_run_id bigint, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, 'github.workflow.dispatch');
    IF r.delivery_started_at IS NULL THEN
        RAISE EXCEPTION 'outbox record %: delivery was never started', p_id USING ERRCODE = 'BR003';
    END IF;
    PERFORM public.boardreadyops_outbox_advance_dispatched_attempt(r, p_workflow_run_id, v_now);
    UPDATE public.control_plane_outbox
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
        result = jsonb_build_object('workflow_run_id', p_workflow_run_id), last_error = NULL, updated_at = v_now
    WHERE id = p_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_dead_letter(p_id bigint, p_worker text, p_error text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_dead_letter_installation(p_installation_id bigint, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_count bigint;
BEGIN
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'dead-lettering needs a reason' USING ERRCODE = '22023';
    END IF;
    UPDATE public.control_plane_outbox
    SET status = 'dead_letter', last_error = left(p_reason, 4096), updated_at = public.boardreadyops_clock_now(p_now)
    WHERE installation_id = p_installation_id AND status = 'available';
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_defer(p_id bigint, p_worker text, p_until timestamp with time zone, p_reason text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    IF p_until IS NULL OR p_until > v_now + interval '2 hours' THEN
        RAISE EXCEPTION 'defer time must be set and at most 2 hours ahead, got %', p_until USING ERRCODE = '22023';
    END IF;
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    UPDATE public.control_plane_outbox
    SET status = 'available', available_at = greatest(p_until, v_now),
        attempts = greatest(r.attempts - 1, 0),
        lease_owner = NULL, lease_expires_at = NULL, delivery_started_at = NULL,
        last_error = left(coalesce(p_reason, 'deferred'), 4096), updated_at = v_now
    WHERE id = p_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_enqueue(p_effect_type text, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_payload jsonb, p_traceparent text DEFAULT NULL::text, p_max_attempts integer DEFAULT 10, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    v_id  bigint;
BEGIN
    INSERT INTO public.control_plane_outbox (
        effect_type, idempotency_key, payload, max_attempts, available_at,
        release_run_id, execution_attempt_id, installation_id, traceparent, created_at, updated_at)
    VALUES (
        p_effect_type,
        p_effect_type || ':' || p_release_run_id::text || coalesce(':' || p_execution_attempt_id::text, ''),
        p_payload, p_max_attempts, v_now,
        p_release_run_id, p_execution_attempt_id, p_installation_id, p_traceparent, v_now, v_now)
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id INTO v_id;
    RETURN v_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_enqueue_attempt_dispatch(p_run_id uuid, p_attempt_id uuid, p_traceparent text, p_now timestamp with time zone)
 RETURNS bigint
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    run  public.release_runs;
    att  public.execution_attempts;
    repo public.repositories;
BEGIN
    SELECT * INTO run FROM public.release_runs WHERE id = p_run_id;
    SELECT * INTO att FROM public.execution_attempts WHERE id = p_attempt_id AND release_run_id = p_run_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'release run % has no attempt %', p_run_id, p_attempt_id USING ERRCODE = 'BR006';
    END IF;
    SELECT * INTO repo FROM public.repositories WHERE id = run.repository_id;
    RETURN public.boardreadyops_outbox_enqueue(
        'github.workflow.dispatch', run.id, att.id, run.installation_id,
        jsonb_build_object(
            'release_run_id', run.id,
            'execution_attempt_id', att.id,
            'attempt_number', att.number,
            'installation_id', run.installation_id,
            'repository_id', run.repository_id,
            'repository_full_name', repo.full_name,
            'workflow_file', run.workflow_file,
            'ref', run.ref,
            'head_sha', run.head_sha,
            'check_run_id', run.check_run_id),
        p_traceparent, 10, p_now);
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_lock_leased(p_id bigint, p_worker text, p_effect_type text)
 RETURNS control_plane_outbox
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    r public.control_plane_outbox;
BEGIN
    SELECT * INTO r FROM public.control_plane_outbox WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'outbox record % does not exist', p_id USING ERRCODE = 'BR006';
    END IF;
    IF r.status <> 'leased' OR r.lease_owner IS DISTINCT FROM p_worker THEN
        RAISE EXCEPTION 'outbox record % is not leased by worker %', p_id, p_worker
            USING ERRCODE = 'BR001',
                  DETAIL = format('status is %s, lease owner is %s', r.status, coalesce(r.lease_owner, 'none'));
    END IF;
    IF p_effect_type IS NOT NULL AND r.effect_type <> p_effect_type THEN
        RAISE EXCEPTION 'outbox record % is a %, not a %', p_id, r.effect_type, p_effect_type
            USING ERRCODE = 'BR002';
    END IF;
    RETURN r;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_recover_leases(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, p_limit integer DEFAULT 1000)
 RETURNS TABLE(id bigint, effect_type text, previous_owner text, status text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_release(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    IF r.effect_type = 'github.workflow.dispatch' AND r.delivery_started_at IS NOT NULL THEN
        RAISE EXCEPTION 'outbox record %: a workflow dispatch whose delivery started cannot be released', p_id
            USING ERRCODE = 'BR003', HINT = 'complete it, or require reconciliation';
    END IF;
    UPDATE public.control_plane_outbox
    SET status = 'available', available_at = v_now, attempts = greatest(r.attempts - 1, 0),
        lease_owner = NULL, lease_expires_at = NULL, delivery_started_at = NULL, updated_at = v_now
    WHERE id = p_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_replay(p_id bigint, p_operator text, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS control_plane_outbox
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_require_reconciliation(p_id bigint, p_worker text, p_error text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_resolve_reconciliation(p_id bigint, p_operator text, p_workflow_run_id bigint, p_evidence text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_retry(p_id bigint, p_worker text, p_error text, p_retry_at timestamp with time zone, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_start_delivery(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    IF r.lease_expires_at <= v_now THEN
        RAISE EXCEPTION 'outbox record %: lease of worker % expired at %', p_id, p_worker, r.lease_expires_at
            USING ERRCODE = 'BR001';
    END IF;
    UPDATE public.control_plane_outbox
    SET delivery_started_at = coalesce(delivery_started_at, v_now), updated_at = v_now
    WHERE id = p_id
    RETURNING delivery_started_at INTO r.delivery_started_at;
    RETURN r.delivery_started_at;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_start_delivery_batch(p_ids bigint[], p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 10000 THEN
        RAISE EXCEPTION 'between 0 and 10000 outbox ids per call' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    UPDATE public.control_plane_outbox o
    SET delivery_started_at = coalesce(o.delivery_started_at, v_now), updated_at = v_now
    WHERE o.id = ANY(p_ids) AND o.lease_owner = p_worker AND o.lease_expires_at > v_now
    RETURNING o.id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_stats(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(available bigint, due bigint, leased bigint, retrying bigint, dead_letter bigint, reconciliation_required bigint, oldest_available_age_seconds double precision)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT
        (SELECT count(*) FROM public.control_plane_outbox WHERE status = 'available'),
        (SELECT count(*) FROM public.control_plane_outbox WHERE status = 'available' AND available_at <= public.boardreadyops_clock_now(p_now)),
        (SELECT count(*) FROM public.control_plane_outbox WHERE status = 'leased'),
        (SELECT count(*) FROM public.control_plane_outbox WHERE status = 'available' AND attempts > 0),
        (SELECT count(*) FROM public.control_plane_outbox WHERE status = 'dead_letter'),
        (SELECT count(*) FROM public.control_plane_outbox WHERE status = 'reconciliation_required'),
        coalesce((SELECT extract(epoch FROM public.boardreadyops_clock_now(p_now) - min(available_at))::double precision
                  FROM public.control_plane_outbox WHERE status = 'available' AND available_at <= public.boardreadyops_clock_now(p_now)), 0);
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_validate_row(p_effect_type text, p_idempotency_key text, p_generation integer, p_payload jsonb, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_delivery_started_at timestamp with time zone, p_completed_at timestamp with time zone, p_last_error text, p_result jsonb, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_traceparent text)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_recover_control_plane_job_leases(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, p_limit integer DEFAULT 1000)
 RETURNS TABLE(id bigint, kind text, previous_owner text, status text)
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_job_recover_leases($1, $2)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_recover_control_plane_outbox_leases(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, p_limit integer DEFAULT 1000)
 RETURNS TABLE(id bigint, effect_type text, previous_owner text, status text)
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_outbox_recover_leases($1, $2)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_control_plane_job(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_job_release($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_control_plane_outbox(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_outbox_release($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_create(p_repository_id bigint, p_installation_id bigint, p_ref text, p_head_sha text, p_workflow_file text, p_check_run_name text, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS uuid
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    v_run uuid;
    v_full_name text;
BEGIN
    IF p_check_run_name IS NULL OR length(p_check_run_name) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'check run name must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    INSERT INTO public.release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status, created_at, updated_at)
    VALUES (p_repository_id, p_installation_id, p_ref, p_head_sha, p_workflow_file, 'check_pending', v_now, v_now)
    ON CONFLICT ON CONSTRAINT release_runs_identity_key DO NOTHING
    RETURNING id INTO v_run;
    IF v_run IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO public.execution_attempts (release_run_id, number, created_at, updated_at) VALUES (v_run, 1, v_now, v_now);
    SELECT full_name INTO v_full_name FROM public.repositories WHERE id = p_repository_id;
    PERFORM public.boardreadyops_outbox_enqueue(
        'github.check_run.create', v_run, NULL, p_installation_id,
        jsonb_build_object(
            'release_run_id', v_run,
            'installation_id', p_installation_id,
            'repository_id', p_repository_id,
            'repository_full_name', v_full_name,
            'head_sha', p_head_sha,
            'ref', p_ref,
            'tag', substr(p_ref, length('refs/tags/') + 1),
            'name', p_check_run_name,
            'external_id', v_run),
        p_traceparent, 10, v_now);
    RETURN v_run;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_validate_row(p_ref text, p_head_sha text, p_workflow_file text, p_status text, p_check_run_id bigint, p_current_attempt integer, p_completed_at timestamp with time zone)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_replay_control_plane_job(p_id bigint, p_operator text, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS control_plane_jobs
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_job_replay($1, $2, $3, $4)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_replay_control_plane_outbox(p_id bigint, p_operator text, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS control_plane_outbox
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_outbox_replay($1, $2, $3, $4)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_require_control_plane_outbox_reconciliation(p_id bigint, p_worker text, p_error text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_outbox_require_reconciliation($1, $2, $3, $4)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_resolve_workflow_dispatch_reconciliation(p_id bigint, p_operator text, p_workflow_run_id bigint, p_evidence text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS bigint
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_outbox_resolve_reconciliation($1, $2, $3, $4, $5)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_retention_sweep(p_older_than interval, p_batch integer DEFAULT 1000, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(outbox_deleted bigint, jobs_deleted bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_cutoff timestamptz := public.boardreadyops_clock_now(p_now) - p_older_than;
    v_outbox bigint;
    v_jobs bigint;
BEGIN
    IF p_older_than IS NULL OR p_older_than < interval '1 day' THEN
        RAISE EXCEPTION 'retention must be at least 1 day, got %', p_older_than USING ERRCODE = '22023';
    END IF;
    IF p_batch IS NULL OR p_batch NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'batch must be between 1 and 100000, got %', p_batch USING ERRCODE = '22023';
    END IF;
    WITH doomed AS (
        SELECT o.id FROM public.control_plane_outbox o
        WHERE o.status = 'completed' AND o.completed_at < v_cutoff
        ORDER BY o.completed_at
        LIMIT p_batch
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM public.control_plane_outbox o USING doomed WHERE o.id = doomed.id;
    GET DIAGNOSTICS v_outbox = ROW_COUNT;

    -- Deleting the inbox row cascades to its job.
    WITH doomed AS (
        SELECT j.inbox_id FROM public.control_plane_jobs j
        WHERE j.status = 'completed' AND j.completed_at < v_cutoff
        ORDER BY j.completed_at
        LIMIT p_batch
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM public.webhook_inbox i USING doomed WHERE i.id = doomed.inbox_id;
    GET DIAGNOSTICS v_jobs = ROW_COUNT;

    RETURN QUERY SELECT v_outbox, v_jobs;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_retry_control_plane_job(p_id bigint, p_worker text, p_error text, p_retry_at timestamp with time zone, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS text
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_job_retry($1, $2, $3, $4, $5)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_retry_control_plane_outbox(p_id bigint, p_worker text, p_error text, p_retry_at timestamp with time zone, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS text
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_outbox_retry($1, $2, $3, $4, $5)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_row_rule_violation(p_table text, p_constraint text)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RAISE EXCEPTION 'new row for relation "%" violates check constraint "%"', p_table, p_constraint
        USING ERRCODE = 'check_violation', TABLE = p_table, CONSTRAINT = p_constraint, SCHEMA = 'public';
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_schema_version()
 RETURNS bigint
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT coalesce(max(version_id), 0) FROM public.goose_db_version WHERE is_applied;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_start_control_plane_outbox_delivery(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS timestamp with time zone
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_outbox_start_delivery($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_start_control_plane_outbox_delivery_batch(p_ids bigint[], p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF bigint
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_outbox_start_delivery_batch($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_start_next_execution_attempt(p_run_id uuid, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(attempt_id uuid, attempt_number integer, outbox_id bigint)
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_execution_attempt_start_next($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_sweep_control_plane_retention(p_older_than interval, p_batch integer DEFAULT 1000, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(outbox_deleted bigint, jobs_deleted bigint)
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_retention_sweep($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_webhook_accept(p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(inbox_id bigint, job_id bigint, duplicate boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    v_inbox bigint;
    v_job bigint;
BEGIN
    INSERT INTO public.webhook_inbox (delivery_id, event, action, installation_id, repository_id, payload,
                               payload_sha256, received_at, traceparent)
    VALUES (p_delivery_id, p_event, p_action, p_installation_id, p_repository_id, p_payload,
            p_payload_sha256, v_now, p_traceparent)
    ON CONFLICT ON CONSTRAINT webhook_inbox_delivery_id_key DO NOTHING
    RETURNING id INTO v_inbox;
    IF v_inbox IS NULL THEN
        SELECT i.id INTO v_inbox FROM public.webhook_inbox i WHERE i.delivery_id = p_delivery_id;
        RETURN QUERY SELECT v_inbox, NULL::bigint, true;
        RETURN;
    END IF;
    INSERT INTO public.control_plane_jobs (kind, inbox_id, available_at, created_at, updated_at, traceparent)
    VALUES (p_event, v_inbox, v_now, v_now, v_now, p_traceparent)
    RETURNING id INTO v_job;
    RETURN QUERY SELECT v_inbox, v_job, false;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_webhook_accept_batch(p_delivery_ids text[], p_events text[], p_actions text[], p_installation_ids bigint[], p_repository_ids bigint[], p_payloads jsonb[], p_payload_sha256s bytea[], p_traceparents text[], p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(delivery_id text, inbox_id bigint, job_id bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    v_n integer := cardinality(p_delivery_ids);
BEGIN
    IF v_n IS NULL OR v_n > 10000 THEN
        RAISE EXCEPTION 'between 0 and 10000 deliveries per call' USING ERRCODE = '22023';
    END IF;
    IF cardinality(p_events) IS DISTINCT FROM v_n OR cardinality(p_actions) IS DISTINCT FROM v_n
        OR cardinality(p_installation_ids) IS DISTINCT FROM v_n OR cardinality(p_repository_ids) IS DISTINCT FROM v_n
        OR cardinality(p_payloads) IS DISTINCT FROM v_n OR cardinality(p_payload_sha256s) IS DISTINCT FROM v_n
        OR cardinality(p_traceparents) IS DISTINCT FROM v_n THEN
        RAISE EXCEPTION 'the delivery arrays must have the same length' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH d AS (
        SELECT * FROM unnest(p_delivery_ids, p_events, p_actions, p_installation_ids, p_repository_ids,
                             p_payloads, p_payload_sha256s, p_traceparents) WITH ORDINALITY
            AS d(delivery_id, event, action, installation_id, repository_id, payload, payload_sha256, traceparent, ord)
    ), i AS (
        INSERT INTO public.webhook_inbox (delivery_id, event, action, installation_id, repository_id, payload,
                                   payload_sha256, received_at, traceparent)
        SELECT d.delivery_id, d.event, d.action, d.installation_id, d.repository_id, d.payload,
               d.payload_sha256, v_now, d.traceparent
        FROM d ORDER BY d.ord
        ON CONFLICT ON CONSTRAINT webhook_inbox_delivery_id_key DO NOTHING
        RETURNING public.webhook_inbox.id, public.webhook_inbox.delivery_id, public.webhook_inbox.event, public.webhook_inbox.traceparent
    ), j AS (
        INSERT INTO public.control_plane_jobs (kind, inbox_id, available_at, created_at, updated_at, traceparent)
        SELECT i.event, i.id, v_now, v_now, v_now, i.traceparent FROM i ORDER BY i.id
        RETURNING public.control_plane_jobs.id, public.control_plane_jobs.inbox_id
    )
    SELECT i.delivery_id, i.id, j.id FROM i JOIN j ON j.inbox_id = i.id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_webhook_validate_row(p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_accept_webhook(p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(inbox_id bigint, job_id bigint, duplicate boolean)
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_webhook_accept($1, $2, $3, $4, $5, $6, $7, $8, $9)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_accept_webhooks(p_delivery_ids text[], p_events text[], p_actions text[], p_installation_ids bigint[], p_repository_ids bigint[], p_payloads jsonb[], p_payload_sha256s bytea[], p_traceparents text[], p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(delivery_id text, inbox_id bigint, job_id bigint)
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_webhook_accept_batch($1, $2, $3, $4, $5, $6, $7, $8, $9)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_check_control_plane_jobs(p_kind text, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_last_error text, p_completed_at timestamp with time zone, p_traceparent text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$SELECT * FROM public.boardreadyops_job_validate_row($1, $2, $3, $4, $5, $6, $7, $8, $9)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_check_control_plane_outbox(p_effect_type text, p_idempotency_key text, p_generation integer, p_payload jsonb, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_delivery_started_at timestamp with time zone, p_completed_at timestamp with time zone, p_last_error text, p_result jsonb, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_traceparent text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$SELECT * FROM public.boardreadyops_outbox_validate_row($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_check_execution_attempts(p_number integer, p_status text, p_workflow_run_id bigint, p_dispatched_at timestamp with time zone, p_completed_at timestamp with time zone, p_conclusion text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$SELECT * FROM public.boardreadyops_execution_attempt_validate_row($1, $2, $3, $4, $5, $6)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_check_release_runs(p_ref text, p_head_sha text, p_workflow_file text, p_status text, p_check_run_id bigint, p_current_attempt integer, p_completed_at timestamp with time zone)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$SELECT * FROM public.boardreadyops_release_run_validate_row($1, $2, $3, $4, $5, $6, $7)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_check_violation(p_table text, p_constraint text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE
AS $function$SELECT * FROM public.boardreadyops_row_rule_violation($1, $2)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_check_webhook_inbox(p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$SELECT * FROM public.boardreadyops_webhook_validate_row($1, $2, $3, $4, $5, $6, $7, $8)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_claim_control_plane_jobs(p_worker text, p_limit integer, p_lease interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF control_plane_jobs
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_job_claim($1, $2, $3, $4)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_claim_control_plane_outbox(p_worker text, p_limit integer, p_lease interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF control_plane_outbox
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_outbox_claim($1, $2, $3, $4)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_complete_check_run_complete(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_outbox_complete_check_run_complete($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_complete_check_run_complete_batch(p_ids bigint[], p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF bigint
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_outbox_complete_check_run_complete_batch($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_complete_check_run_create(p_id bigint, p_worker text, p_check_run_id bigint, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS bigint
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_outbox_complete_check_run_create($1, $2, $3, $4)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_complete_control_plane_job(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_job_complete($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_complete_control_plane_jobs(p_ids bigint[], p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS integer
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_job_complete_batch($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_complete_workflow_dispatch(p_id bigint, p_worker text, p_workflow_run_id bigint, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_outbox_complete_workflow_dispatch($1, $2, $3, $4)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_control_plane_job_stats(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(available bigint, due bigint, leased bigint, retrying bigint, dead_letter bigint, oldest_available_age_seconds double precision)
 LANGUAGE sql
 STABLE
AS $function$SELECT * FROM public.boardreadyops_job_stats($1)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_control_plane_outbox_stats(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(available bigint, due bigint, leased bigint, retrying bigint, dead_letter bigint, reconciliation_required bigint, oldest_available_age_seconds double precision)
 LANGUAGE sql
 STABLE
AS $function$SELECT * FROM public.boardreadyops_outbox_stats($1)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_create_release_run(p_repository_id bigint, p_installation_id bigint, p_ref text, p_head_sha text, p_workflow_file text, p_check_run_name text, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS uuid
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_release_run_create($1, $2, $3, $4, $5, $6, $7, $8)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_dead_letter_control_plane_job(p_id bigint, p_worker text, p_error text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_job_dead_letter($1, $2, $3, $4)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_dead_letter_control_plane_outbox(p_id bigint, p_worker text, p_error text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_outbox_dead_letter($1, $2, $3, $4)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_dead_letter_installation_outbox(p_installation_id bigint, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS bigint
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_outbox_dead_letter_installation($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_defer_control_plane_job(p_id bigint, p_worker text, p_until timestamp with time zone, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_job_defer($1, $2, $3, $4, $5)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_defer_control_plane_outbox(p_id bigint, p_worker text, p_until timestamp with time zone, p_reason text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_outbox_defer($1, $2, $3, $4, $5)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_enqueue_control_plane_outbox(p_effect_type text, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_payload jsonb, p_traceparent text DEFAULT NULL::text, p_max_attempts integer DEFAULT 10, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS bigint
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_outbox_enqueue($1, $2, $3, $4, $5, $6, $7, $8)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_start_next(p_run_id uuid, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(attempt_id uuid, attempt_number integer, outbox_id bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    run release_runs;
    att execution_attempts;
BEGIN
    SELECT * INTO run FROM release_runs WHERE id = p_run_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'release run % does not exist', p_run_id USING ERRCODE = 'BR006';
    END IF;
    IF run.status NOT IN ('succeeded', 'failed', 'cancelled') OR run.check_run_id IS NULL THEN
        RAISE EXCEPTION 'release run % is %, only a finished run is re-run', p_run_id, run.status
            USING ERRCODE = 'BR005';
    END IF;
    INSERT INTO execution_attempts (release_run_id, number, status, created_at, updated_at)
    VALUES (run.id, run.current_attempt + 1, 'dispatching', v_now, v_now)
    RETURNING * INTO att;
    UPDATE release_runs
    SET current_attempt = att.number, status = 'dispatching', completed_at = NULL, updated_at = v_now
    WHERE id = run.id;
    RETURN QUERY SELECT att.id, att.number,
        boardreadyops_outbox_enqueue_attempt_dispatch(run.id, att.id, p_traceparent, v_now);
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_execution_attempt_validate_row(p_number integer, p_status text, p_workflow_run_id bigint, p_dispatched_at timestamp with time zone, p_completed_at timestamp with time zone, p_conclusion text)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_claim(p_worker text, p_limit integer, p_lease interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF control_plane_jobs
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
BEGIN
    IF p_worker IS NULL OR length(p_worker) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'worker must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'claim limit must be between 1 and 1000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'lease must be between 1 second and 1 hour, got %', p_lease USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH due AS (
        SELECT j.id FROM control_plane_jobs j
        WHERE j.status = 'available' AND j.available_at <= v_now
        ORDER BY j.available_at, j.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE control_plane_jobs j
    SET status = 'leased', lease_owner = p_worker, lease_expires_at = v_now + p_lease,
        attempts = j.attempts + 1, updated_at = v_now
    FROM due
    WHERE j.id = due.id
    RETURNING j.*;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_complete(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
BEGIN
    PERFORM boardreadyops_job_lock_leased(p_id, p_worker);
    UPDATE control_plane_jobs
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
        updated_at = v_now
    WHERE id = p_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_complete_batch(p_ids bigint[], p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    v_count integer;
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 10000 THEN
        RAISE EXCEPTION 'between 0 and 10000 job ids per call' USING ERRCODE = '22023';
    END IF;
    UPDATE control_plane_jobs
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL, updated_at = v_now
    -- lease_owner is set exactly when the job is leased (control_plane_jobs_lease_check), so this
    -- selects the caller's leased jobs without naming status: a `status = 'leased'` here matched
    -- the partial lease index, which the generic plan preferred to the primary key.
    WHERE id = ANY(p_ids) AND lease_owner = p_worker;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count <> cardinality(ARRAY(SELECT DISTINCT unnest(p_ids))) THEN
        RAISE EXCEPTION '% of % jobs are not leased by worker %', cardinality(p_ids) - v_count, cardinality(p_ids), p_worker
            USING ERRCODE = 'BR001';
    END IF;
    RETURN v_count;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_dead_letter(p_id bigint, p_worker text, p_error text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
BEGIN
    IF p_error IS NULL OR btrim(p_error) = '' THEN
        RAISE EXCEPTION 'dead-lettering needs an error description' USING ERRCODE = '22023';
    END IF;
    PERFORM boardreadyops_job_lock_leased(p_id, p_worker);
    UPDATE control_plane_jobs
    SET status = 'dead_letter', lease_owner = NULL, lease_expires_at = NULL,
        last_error = left(p_error, 4096), updated_at = v_now
    WHERE id = p_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_defer(p_id bigint, p_worker text, p_until timestamp with time zone, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    r control_plane_jobs;
BEGIN
    IF p_until IS NULL OR p_until > v_now + interval '1 hour' THEN
        RAISE EXCEPTION 'defer time must be set and at most 1 hour ahead, got %', p_until USING ERRCODE = '22023';
    END IF;
    r := boardreadyops_job_lock_leased(p_id, p_worker);
    UPDATE control_plane_jobs
    SET status = 'available', available_at = greatest(p_until, v_now), attempts = greatest(r.attempts - 1, 0),
        lease_owner = NULL, lease_expires_at = NULL, last_error = left(coalesce(p_reason, 'deferred'), 4096),
        updated_at = v_now
    WHERE id = p_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_lock_leased(p_id bigint, p_worker text)
 RETURNS control_plane_jobs
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    r control_plane_jobs;
BEGIN
    SELECT * INTO r FROM control_plane_jobs WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % does not exist', p_id USING ERRCODE = 'BR006';
    END IF;
    IF r.status <> 'leased' OR r.lease_owner IS DISTINCT FROM p_worker THEN
        RAISE EXCEPTION 'job % is not leased by worker %', p_id, p_worker
            USING ERRCODE = 'BR001',
                  DETAIL = format('status is %s, lease owner is %s', r.status, coalesce(r.lease_owner, 'none'));
    END IF;
    RETURN r;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_recover_leases(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, p_limit integer DEFAULT 1000)
 RETURNS TABLE(id bigint, kind text, previous_owner text, status text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'recovery limit must be between 1 and 10000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH expired AS (
        SELECT j.id, j.lease_owner,
               CASE WHEN j.attempts >= j.max_attempts THEN 'dead_letter' ELSE 'available' END AS next_status
        FROM control_plane_jobs j
        WHERE j.status = 'leased' AND j.lease_expires_at <= v_now
        ORDER BY j.lease_expires_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE control_plane_jobs j
    SET status = e.next_status,
        available_at = CASE WHEN e.next_status = 'available' THEN v_now ELSE j.available_at END,
        lease_owner = NULL, lease_expires_at = NULL,
        last_error = left(format('lease of worker %s expired at %s; %s', e.lease_owner, j.lease_expires_at,
                                 CASE e.next_status WHEN 'dead_letter'
                                      THEN format('attempts exhausted (%s of %s)', j.attempts, j.max_attempts)
                                      ELSE 'returned to the queue' END), 4096),
        updated_at = v_now
    FROM expired e
    WHERE j.id = e.id
    RETURNING j.id, j.kind, e.lease_owner, j.status;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_release(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    r control_plane_jobs;
BEGIN
    r := boardreadyops_job_lock_leased(p_id, p_worker);
    UPDATE control_plane_jobs
    SET status = 'available', available_at = v_now, attempts = greatest(r.attempts - 1, 0),
        lease_owner = NULL, lease_expires_at = NULL, updated_at = v_now
    WHERE id = p_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_replay(p_id bigint, p_operator text, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS control_plane_jobs
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    r control_plane_jobs;
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'replay needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'replay needs a reason' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO r FROM control_plane_jobs WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % does not exist', p_id USING ERRCODE = 'BR006';
    END IF;
    IF r.status <> 'dead_letter' THEN
        RAISE EXCEPTION 'job % is %, only dead letters can be replayed', p_id, r.status USING ERRCODE = 'BR003';
    END IF;
    INSERT INTO control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'job.replay', 'job', p_id, p_reason,
            jsonb_build_object('last_error', r.last_error, 'attempts', r.attempts), r.status, 'available');
    UPDATE control_plane_jobs
    SET status = 'available', available_at = v_now, attempts = 0, updated_at = v_now
    WHERE control_plane_jobs.id = p_id
    RETURNING * INTO r;
    PERFORM pg_notify('boardreadyops_jobs', '');
    RETURN r;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_retry(p_id bigint, p_worker text, p_error text, p_retry_at timestamp with time zone, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    r control_plane_jobs;
    v_status text;
BEGIN
    IF p_error IS NULL OR btrim(p_error) = '' THEN
        RAISE EXCEPTION 'retry needs an error description' USING ERRCODE = '22023';
    END IF;
    r := boardreadyops_job_lock_leased(p_id, p_worker);
    v_status := CASE WHEN r.attempts >= r.max_attempts THEN 'dead_letter' ELSE 'available' END;
    UPDATE control_plane_jobs
    SET status = v_status,
        available_at = CASE WHEN v_status = 'available' THEN greatest(coalesce(p_retry_at, v_now), v_now) ELSE available_at END,
        lease_owner = NULL, lease_expires_at = NULL,
        last_error = left(CASE WHEN v_status = 'dead_letter'
                               THEN format('attempts exhausted (%s of %s): %s', r.attempts, r.max_attempts, p_error)
                               ELSE p_error END, 4096),
        updated_at = v_now
    WHERE id = p_id;
    RETURN v_status;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_stats(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(available bigint, due bigint, leased bigint, retrying bigint, dead_letter bigint, oldest_available_age_seconds double precision)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
    SELECT
        (SELECT count(*) FROM control_plane_jobs WHERE status = 'available'),
        (SELECT count(*) FROM control_plane_jobs WHERE status = 'available' AND available_at <= coalesce(p_now, now())),
        (SELECT count(*) FROM control_plane_jobs WHERE status = 'leased'),
        (SELECT count(*) FROM control_plane_jobs WHERE status = 'available' AND attempts > 0),
        (SELECT count(*) FROM control_plane_jobs WHERE status = 'dead_letter'),
        coalesce((SELECT extract(epoch FROM coalesce(p_now, now()) - min(available_at))::double precision
                  FROM control_plane_jobs WHERE status = 'available' AND available_at <= coalesce(p_now, now())), 0);
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_job_validate_row(p_kind text, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_last_error text, p_completed_at timestamp with time zone, p_traceparent text)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_advance_dispatched_attempt(r control_plane_outbox, p_workflow_run_id bigint, p_now timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    run release_runs;
    att execution_attempts;
BEGIN
    IF p_workflow_run_id IS NULL OR p_workflow_run_id <= 0 THEN
        RAISE EXCEPTION 'workflow run id must be positive, got %', p_workflow_run_id USING ERRCODE = '22023';
    END IF;
    SELECT * INTO run FROM release_runs WHERE id = r.release_run_id FOR UPDATE;
    SELECT * INTO att FROM execution_attempts WHERE id = r.execution_attempt_id FOR UPDATE;
    IF run.status <> 'dispatching' OR att.status <> 'dispatching' OR att.number <> run.current_attempt
       OR att.workflow_run_id IS NOT NULL THEN
        RAISE EXCEPTION 'release run % attempt % cannot advance to running', run.id, att.number
            USING ERRCODE = 'BR005',
                  DETAIL = format('run status %s (current attempt %s), attempt status %s, workflow run %s',
                                  run.status, run.current_attempt, att.status, coalesce(att.workflow_run_id::text, 'none'));
    END IF;
    IF EXISTS (SELECT 1 FROM execution_attempts WHERE workflow_run_id = p_workflow_run_id) THEN
        RAISE EXCEPTION 'workflow run % already belongs to another execution attempt', p_workflow_run_id
            USING ERRCODE = 'BR005';
    END IF;
    UPDATE execution_attempts
    SET status = 'running', workflow_run_id = p_workflow_run_id, dispatched_at = p_now, updated_at = p_now
    WHERE id = att.id;
    UPDATE release_runs SET status = 'running', updated_at = p_now WHERE id = run.id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_claim(p_worker text, p_limit integer, p_lease interval, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF control_plane_outbox
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
BEGIN
    IF p_worker IS NULL OR length(p_worker) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'worker must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'claim limit must be between 1 and 1000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'lease must be between 1 second and 1 hour, got %', p_lease USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH due AS (
        SELECT o.id FROM control_plane_outbox o
        WHERE o.status = 'available' AND o.available_at <= v_now
        ORDER BY o.available_at, o.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE control_plane_outbox o
    SET status = 'leased', lease_owner = p_worker, lease_expires_at = v_now + p_lease,
        attempts = o.attempts + 1, updated_at = v_now,
        delivery_started_at = CASE WHEN o.effect_type = 'github.workflow.dispatch' THEN o.delivery_started_at ELSE v_now END
    FROM due
    WHERE o.id = due.id
    RETURNING o.*;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_check_run_complete(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    r control_plane_outbox;
BEGIN
    r := boardreadyops_outbox_lock_leased(p_id, p_worker, 'github.check_run.complete');
    UPDATE control_plane_outbox
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
        result = jsonb_build_object('check_run_id', r.payload -> 'check_run_id'), last_error = NULL,
        updated_at = v_now
    WHERE id = p_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_check_run_complete_batch(p_ids bigint[], p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 10000 THEN
        RAISE EXCEPTION 'between 0 and 10000 outbox ids per call' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    UPDATE control_plane_outbox o
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
        result = jsonb_build_object('check_run_id', o.payload -> 'check_run_id'), last_error = NULL,
        updated_at = v_now
    WHERE o.id = ANY(p_ids) AND o.lease_owner = p_worker AND o.effect_type = 'github.check_run.complete'
    RETURNING o.id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_check_run_create(p_id bigint, p_worker text, p_check_run_id bigint, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    r   control_plane_outbox;
    run release_runs;
    att execution_attempts;
    v_dispatch_id bigint;
BEGIN
    IF p_check_run_id IS NULL OR p_check_run_id <= 0 THEN
        RAISE EXCEPTION 'check run id must be positive, got %', p_check_run_id USING ERRCODE = '22023';
    END IF;
    r := boardreadyops_outbox_lock_leased(p_id, p_worker, 'github.check_run.create');

    SELECT * INTO run FROM release_runs WHERE id = r.release_run_id FOR UPDATE;
    IF run.check_run_id IS NOT NULL AND run.check_run_id <> p_check_run_id THEN
        RAISE EXCEPTION 'release run % already has check run %, not %', run.id, run.check_run_id, p_check_run_id
            USING ERRCODE = 'BR005';
    END IF;

    IF run.status = 'check_pending' THEN
        UPDATE execution_attempts SET status = 'dispatching', updated_at = v_now
        WHERE release_run_id = run.id AND number = run.current_attempt AND status = 'pending'
        RETURNING * INTO att;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'release run %: attempt % is not pending', run.id, run.current_attempt
                USING ERRCODE = 'BR005';
        END IF;
        UPDATE release_runs SET check_run_id = p_check_run_id, status = 'dispatching', updated_at = v_now
        WHERE id = run.id;
        v_dispatch_id := boardreadyops_outbox_enqueue_attempt_dispatch(run.id, att.id, r.traceparent, v_now);
    ELSE
        UPDATE release_runs SET check_run_id = p_check_run_id, updated_at = v_now WHERE id = run.id;
    END IF;

    UPDATE control_plane_outbox
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
        result = jsonb_build_object('check_run_id', p_check_run_id), last_error = NULL, updated_at = v_now
    WHERE id = p_id;
    RETURN v_dispatch_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_complete_workflow_dispatch(p_id bigint, p_worker text, p_workflow_run_id bigint, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    r control_plane_outbox;
BEGIN
    r := boardreadyops_outbox_lock_leased(p_id, p_worker, 'github.workflow.dispatch');
    IF r.delivery_started_at IS NULL THEN
        RAISE EXCEPTION 'outbox record %: delivery was never started', p_id USING ERRCODE = 'BR003';
    END IF;
    PERFORM boardreadyops_outbox_advance_dispatched_attempt(r, p_workflow_run_id, v_now);
    UPDATE control_plane_outbox
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
        result = jsonb_build_object('workflow_run_id', p_workflow_run_id), last_error = NULL, updated_at = v_now
    WHERE id = p_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_dead_letter(p_id bigint, p_worker text, p_error text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
BEGIN
    IF p_error IS NULL OR btrim(p_error) = '' THEN
        RAISE EXCEPTION 'dead-lettering needs an error description' USING ERRCODE = '22023';
    END IF;
    PERFORM boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    UPDATE control_plane_outbox
    SET status = 'dead_letter', lease_owner = NULL, lease_expires_at = NULL,
        last_error = left(p_error, 4096), updated_at = v_now
    WHERE id = p_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_dead_letter_installation(p_installation_id bigint, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_count bigint;
BEGIN
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'dead-lettering needs a reason' USING ERRCODE = '22023';
    END IF;
    UPDATE control_plane_outbox
    SET status = 'dead_letter', last_error = left(p_reason, 4096), updated_at = coalesce(p_now, now())
    WHERE installation_id = p_installation_id AND status = 'available';
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_defer(p_id bigint, p_worker text, p_until timestamp with time zone, p_reason text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    r control_plane_outbox;
BEGIN
    IF p_until IS NULL OR p_until > v_now + interval '2 hours' THEN
        RAISE EXCEPTION 'defer time must be set and at most 2 hours ahead, got %', p_until USING ERRCODE = '22023';
    END IF;
    r := boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    UPDATE control_plane_outbox
    SET status = 'available', available_at = greatest(p_until, v_now),
        attempts = greatest(r.attempts - 1, 0),
        lease_owner = NULL, lease_expires_at = NULL, delivery_started_at = NULL,
        last_error = left(coalesce(p_reason, 'deferred'), 4096), updated_at = v_now
    WHERE id = p_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_enqueue(p_effect_type text, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_payload jsonb, p_traceparent text DEFAULT NULL::text, p_max_attempts integer DEFAULT 10, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    v_id  bigint;
BEGIN
    INSERT INTO control_plane_outbox (
        effect_type, idempotency_key, payload, max_attempts, available_at,
        release_run_id, execution_attempt_id, installation_id, traceparent, created_at, updated_at)
    VALUES (
        p_effect_type,
        p_effect_type || ':' || p_release_run_id::text || coalesce(':' || p_execution_attempt_id::text, ''),
        p_payload, p_max_attempts, v_now,
        p_release_run_id, p_execution_attempt_id, p_installation_id, p_traceparent, v_now, v_now)
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id INTO v_id;
    RETURN v_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_enqueue_attempt_dispatch(p_run_id uuid, p_attempt_id uuid, p_traceparent text, p_now timestamp with time zone)
 RETURNS bigint
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    run  release_runs;
    att  execution_attempts;
    repo repositories;
BEGIN
    SELECT * INTO run FROM release_runs WHERE id = p_run_id;
    SELECT * INTO att FROM execution_attempts WHERE id = p_attempt_id AND release_run_id = p_run_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'release run % has no attempt %', p_run_id, p_attempt_id USING ERRCODE = 'BR006';
    END IF;
    SELECT * INTO repo FROM repositories WHERE id = run.repository_id;
    RETURN boardreadyops_outbox_enqueue(
        'github.workflow.dispatch', run.id, att.id, run.installation_id,
        jsonb_build_object(
            'release_run_id', run.id,
            'execution_attempt_id', att.id,
            'attempt_number', att.number,
            'installation_id', run.installation_id,
            'repository_id', run.repository_id,
            'repository_full_name', repo.full_name,
            'workflow_file', run.workflow_file,
            'ref', run.ref,
            'head_sha', run.head_sha,
            'check_run_id', run.check_run_id),
        p_traceparent, 10, p_now);
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_lock_leased(p_id bigint, p_worker text, p_effect_type text)
 RETURNS control_plane_outbox
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    r control_plane_outbox;
BEGIN
    SELECT * INTO r FROM control_plane_outbox WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'outbox record % does not exist', p_id USING ERRCODE = 'BR006';
    END IF;
    IF r.status <> 'leased' OR r.lease_owner IS DISTINCT FROM p_worker THEN
        RAISE EXCEPTION 'outbox record % is not leased by worker %', p_id, p_worker
            USING ERRCODE = 'BR001',
                  DETAIL = format('status is %s, lease owner is %s', r.status, coalesce(r.lease_owner, 'none'));
    END IF;
    IF p_effect_type IS NOT NULL AND r.effect_type <> p_effect_type THEN
        RAISE EXCEPTION 'outbox record % is a %, not a %', p_id, r.effect_type, p_effect_type
            USING ERRCODE = 'BR002';
    END IF;
    RETURN r;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_recover_leases(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, p_limit integer DEFAULT 1000)
 RETURNS TABLE(id bigint, effect_type text, previous_owner text, status text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
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
        FROM control_plane_outbox o
        WHERE o.status = 'leased' AND o.lease_expires_at <= v_now
        ORDER BY o.lease_expires_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE control_plane_outbox o
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_release(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    r control_plane_outbox;
BEGIN
    r := boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    IF r.effect_type = 'github.workflow.dispatch' AND r.delivery_started_at IS NOT NULL THEN
        RAISE EXCEPTION 'outbox record %: a workflow dispatch whose delivery started cannot be released', p_id
            USING ERRCODE = 'BR003', HINT = 'complete it, or require reconciliation';
    END IF;
    UPDATE control_plane_outbox
    SET status = 'available', available_at = v_now, attempts = greatest(r.attempts - 1, 0),
        lease_owner = NULL, lease_expires_at = NULL, delivery_started_at = NULL, updated_at = v_now
    WHERE id = p_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_replay(p_id bigint, p_operator text, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS control_plane_outbox
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    r control_plane_outbox;
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'replay needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'replay needs a reason' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO r FROM control_plane_outbox WHERE id = p_id FOR UPDATE;
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
    INSERT INTO control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'outbox.replay', 'outbox', p_id, p_reason,
            jsonb_build_object('last_error', r.last_error, 'attempts', r.attempts), r.status, 'available');
    UPDATE control_plane_outbox
    SET status = 'available', available_at = v_now, attempts = 0, delivery_started_at = NULL, updated_at = v_now
    WHERE control_plane_outbox.id = p_id
    RETURNING * INTO r;
    PERFORM pg_notify('boardreadyops_outbox', '');
    RETURN r;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_require_reconciliation(p_id bigint, p_worker text, p_error text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    r control_plane_outbox;
BEGIN
    IF p_error IS NULL OR btrim(p_error) = '' THEN
        RAISE EXCEPTION 'reconciliation needs an error description' USING ERRCODE = '22023';
    END IF;
    r := boardreadyops_outbox_lock_leased(p_id, p_worker, 'github.workflow.dispatch');
    IF r.delivery_started_at IS NULL THEN
        RAISE EXCEPTION 'outbox record %: delivery never started, so it cannot need reconciliation', p_id
            USING ERRCODE = 'BR003', HINT = 'retry it instead';
    END IF;
    UPDATE control_plane_outbox
    SET status = 'reconciliation_required', lease_owner = NULL, lease_expires_at = NULL,
        last_error = left(p_error, 4096), updated_at = v_now
    WHERE id = p_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_resolve_reconciliation(p_id bigint, p_operator text, p_workflow_run_id bigint, p_evidence text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    r control_plane_outbox;
    v_generation integer;
    v_new_id bigint;
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'resolution needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_evidence IS NULL OR btrim(p_evidence) = '' THEN
        RAISE EXCEPTION 'resolution needs evidence of what GitHub did' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO r FROM control_plane_outbox WHERE id = p_id FOR UPDATE;
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
        PERFORM boardreadyops_outbox_advance_dispatched_attempt(r, p_workflow_run_id, v_now);
        UPDATE control_plane_outbox
        SET status = 'completed', completed_at = v_now, updated_at = v_now,
            result = jsonb_build_object('workflow_run_id', p_workflow_run_id, 'resolution', 'repair')
        WHERE id = p_id;
        INSERT INTO control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
        VALUES (v_now, p_operator, 'outbox.reconciliation.repair', 'outbox', p_id, p_evidence,
                jsonb_build_object('workflow_run_id', p_workflow_run_id, 'delivery_started_at', r.delivery_started_at,
                                   'last_error', r.last_error),
                r.status, 'completed');
        RETURN NULL;
    END IF;

    SELECT max(o.generation) + 1 INTO v_generation
    FROM control_plane_outbox o
    WHERE o.effect_type = 'github.workflow.dispatch' AND o.execution_attempt_id = r.execution_attempt_id;
    INSERT INTO control_plane_outbox (
        effect_type, idempotency_key, generation, payload, max_attempts, available_at,
        release_run_id, execution_attempt_id, installation_id, traceparent, created_at, updated_at)
    VALUES (
        r.effect_type,
        r.effect_type || ':' || r.release_run_id::text || ':' || r.execution_attempt_id::text || ':g' || v_generation::text,
        v_generation, r.payload, r.max_attempts, v_now,
        r.release_run_id, r.execution_attempt_id, r.installation_id, r.traceparent, v_now, v_now)
    RETURNING id INTO v_new_id;
    UPDATE control_plane_outbox
    SET status = 'completed', completed_at = v_now, superseded_by = v_new_id, updated_at = v_now,
        result = jsonb_build_object('superseded_by', v_new_id, 'resolution', 'supersede')
    WHERE id = p_id;
    INSERT INTO control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'outbox.reconciliation.supersede', 'outbox', p_id, p_evidence,
            jsonb_build_object('superseded_by', v_new_id, 'delivery_started_at', r.delivery_started_at,
                               'last_error', r.last_error),
            r.status, 'completed');
    PERFORM pg_notify('boardreadyops_outbox', '');
    RETURN v_new_id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_retry(p_id bigint, p_worker text, p_error text, p_retry_at timestamp with time zone, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    r control_plane_outbox;
    v_status text;
BEGIN
    IF p_error IS NULL OR btrim(p_error) = '' THEN
        RAISE EXCEPTION 'retry needs an error description' USING ERRCODE = '22023';
    END IF;
    r := boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    v_status := CASE WHEN r.attempts >= r.max_attempts THEN 'dead_letter' ELSE 'available' END;
    UPDATE control_plane_outbox
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_start_delivery(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    r control_plane_outbox;
BEGIN
    r := boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    IF r.lease_expires_at <= v_now THEN
        RAISE EXCEPTION 'outbox record %: lease of worker % expired at %', p_id, p_worker, r.lease_expires_at
            USING ERRCODE = 'BR001';
    END IF;
    UPDATE control_plane_outbox
    SET delivery_started_at = coalesce(delivery_started_at, v_now), updated_at = v_now
    WHERE id = p_id
    RETURNING delivery_started_at INTO r.delivery_started_at;
    RETURN r.delivery_started_at;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_start_delivery_batch(p_ids bigint[], p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 10000 THEN
        RAISE EXCEPTION 'between 0 and 10000 outbox ids per call' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    UPDATE control_plane_outbox o
    SET delivery_started_at = coalesce(o.delivery_started_at, v_now), updated_at = v_now
    WHERE o.id = ANY(p_ids) AND o.lease_owner = p_worker AND o.lease_expires_at > v_now
    RETURNING o.id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_stats(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(available bigint, due bigint, leased bigint, retrying bigint, dead_letter bigint, reconciliation_required bigint, oldest_available_age_seconds double precision)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
    SELECT
        (SELECT count(*) FROM control_plane_outbox WHERE status = 'available'),
        (SELECT count(*) FROM control_plane_outbox WHERE status = 'available' AND available_at <= coalesce(p_now, now())),
        (SELECT count(*) FROM control_plane_outbox WHERE status = 'leased'),
        (SELECT count(*) FROM control_plane_outbox WHERE status = 'available' AND attempts > 0),
        (SELECT count(*) FROM control_plane_outbox WHERE status = 'dead_letter'),
        (SELECT count(*) FROM control_plane_outbox WHERE status = 'reconciliation_required'),
        coalesce((SELECT extract(epoch FROM coalesce(p_now, now()) - min(available_at))::double precision
                  FROM control_plane_outbox WHERE status = 'available' AND available_at <= coalesce(p_now, now())), 0);
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_validate_row(p_effect_type text, p_idempotency_key text, p_generation integer, p_payload jsonb, p_status text, p_attempts integer, p_max_attempts integer, p_lease_owner text, p_lease_expires_at timestamp with time zone, p_delivery_started_at timestamp with time zone, p_completed_at timestamp with time zone, p_last_error text, p_result jsonb, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_traceparent text)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_recover_control_plane_job_leases(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, p_limit integer DEFAULT 1000)
 RETURNS TABLE(id bigint, kind text, previous_owner text, status text)
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_job_recover_leases($1, $2)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_recover_control_plane_outbox_leases(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, p_limit integer DEFAULT 1000)
 RETURNS TABLE(id bigint, effect_type text, previous_owner text, status text)
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_outbox_recover_leases($1, $2)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_control_plane_job(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_job_release($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_control_plane_outbox(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_outbox_release($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_create(p_repository_id bigint, p_installation_id bigint, p_ref text, p_head_sha text, p_workflow_file text, p_check_run_name text, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS uuid
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    v_run uuid;
    v_full_name text;
BEGIN
    IF p_check_run_name IS NULL OR length(p_check_run_name) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'check run name must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status, created_at, updated_at)
    VALUES (p_repository_id, p_installation_id, p_ref, p_head_sha, p_workflow_file, 'check_pending', v_now, v_now)
    ON CONFLICT ON CONSTRAINT release_runs_identity_key DO NOTHING
    RETURNING id INTO v_run;
    IF v_run IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO execution_attempts (release_run_id, number, created_at, updated_at) VALUES (v_run, 1, v_now, v_now);
    SELECT full_name INTO v_full_name FROM repositories WHERE id = p_repository_id;
    PERFORM boardreadyops_outbox_enqueue(
        'github.check_run.create', v_run, NULL, p_installation_id,
        jsonb_build_object(
            'release_run_id', v_run,
            'installation_id', p_installation_id,
            'repository_id', p_repository_id,
            'repository_full_name', v_full_name,
            'head_sha', p_head_sha,
            'ref', p_ref,
            'tag', substr(p_ref, length('refs/tags/') + 1),
            'name', p_check_run_name,
            'external_id', v_run),
        p_traceparent, 10, v_now);
    RETURN v_run;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_validate_row(p_ref text, p_head_sha text, p_workflow_file text, p_status text, p_check_run_id bigint, p_current_attempt integer, p_completed_at timestamp with time zone)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $function$
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
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_replay_control_plane_job(p_id bigint, p_operator text, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS control_plane_jobs
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_job_replay($1, $2, $3, $4)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_replay_control_plane_outbox(p_id bigint, p_operator text, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS control_plane_outbox
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_outbox_replay($1, $2, $3, $4)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_require_control_plane_outbox_reconciliation(p_id bigint, p_worker text, p_error text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_outbox_require_reconciliation($1, $2, $3, $4)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_resolve_workflow_dispatch_reconciliation(p_id bigint, p_operator text, p_workflow_run_id bigint, p_evidence text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS bigint
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_outbox_resolve_reconciliation($1, $2, $3, $4, $5)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_retention_sweep(p_older_than interval, p_batch integer DEFAULT 1000, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(outbox_deleted bigint, jobs_deleted bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_cutoff timestamptz := coalesce(p_now, now()) - p_older_than;
    v_outbox bigint;
    v_jobs bigint;
BEGIN
    IF p_older_than IS NULL OR p_older_than < interval '1 day' THEN
        RAISE EXCEPTION 'retention must be at least 1 day, got %', p_older_than USING ERRCODE = '22023';
    END IF;
    IF p_batch IS NULL OR p_batch NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'batch must be between 1 and 100000, got %', p_batch USING ERRCODE = '22023';
    END IF;
    WITH doomed AS (
        SELECT o.id FROM control_plane_outbox o
        WHERE o.status = 'completed' AND o.completed_at < v_cutoff
        ORDER BY o.completed_at
        LIMIT p_batch
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM control_plane_outbox o USING doomed WHERE o.id = doomed.id;
    GET DIAGNOSTICS v_outbox = ROW_COUNT;

    -- Deleting the inbox row cascades to its job.
    WITH doomed AS (
        SELECT j.inbox_id FROM control_plane_jobs j
        WHERE j.status = 'completed' AND j.completed_at < v_cutoff
        ORDER BY j.completed_at
        LIMIT p_batch
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM webhook_inbox i USING doomed WHERE i.id = doomed.inbox_id;
    GET DIAGNOSTICS v_jobs = ROW_COUNT;

    RETURN QUERY SELECT v_outbox, v_jobs;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_retry_control_plane_job(p_id bigint, p_worker text, p_error text, p_retry_at timestamp with time zone, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS text
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_job_retry($1, $2, $3, $4, $5)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_retry_control_plane_outbox(p_id bigint, p_worker text, p_error text, p_retry_at timestamp with time zone, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS text
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_outbox_retry($1, $2, $3, $4, $5)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_row_rule_violation(p_table text, p_constraint text)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
    RAISE EXCEPTION 'new row for relation "%" violates check constraint "%"', p_table, p_constraint
        USING ERRCODE = 'check_violation', TABLE = p_table, CONSTRAINT = p_constraint, SCHEMA = 'public';
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_schema_version()
 RETURNS bigint
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
    SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_start_control_plane_outbox_delivery(p_id bigint, p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS timestamp with time zone
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_outbox_start_delivery($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_start_control_plane_outbox_delivery_batch(p_ids bigint[], p_worker text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF bigint
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_outbox_start_delivery_batch($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_start_next_execution_attempt(p_run_id uuid, p_traceparent text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(attempt_id uuid, attempt_number integer, outbox_id bigint)
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_execution_attempt_start_next($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_sweep_control_plane_retention(p_older_than interval, p_batch integer DEFAULT 1000, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(outbox_deleted bigint, jobs_deleted bigint)
 LANGUAGE sql
AS $function$SELECT * FROM public.boardreadyops_retention_sweep($1, $2, $3)$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_webhook_accept(p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(inbox_id bigint, job_id bigint, duplicate boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    v_inbox bigint;
    v_job bigint;
BEGIN
    INSERT INTO webhook_inbox (delivery_id, event, action, installation_id, repository_id, payload,
                               payload_sha256, received_at, traceparent)
    VALUES (p_delivery_id, p_event, p_action, p_installation_id, p_repository_id, p_payload,
            p_payload_sha256, v_now, p_traceparent)
    ON CONFLICT ON CONSTRAINT webhook_inbox_delivery_id_key DO NOTHING
    RETURNING id INTO v_inbox;
    IF v_inbox IS NULL THEN
        SELECT i.id INTO v_inbox FROM webhook_inbox i WHERE i.delivery_id = p_delivery_id;
        RETURN QUERY SELECT v_inbox, NULL::bigint, true;
        RETURN;
    END IF;
    INSERT INTO control_plane_jobs (kind, inbox_id, available_at, created_at, updated_at, traceparent)
    VALUES (p_event, v_inbox, v_now, v_now, v_now, p_traceparent)
    RETURNING id INTO v_job;
    RETURN QUERY SELECT v_inbox, v_job, false;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_webhook_accept_batch(p_delivery_ids text[], p_events text[], p_actions text[], p_installation_ids bigint[], p_repository_ids bigint[], p_payloads jsonb[], p_payload_sha256s bytea[], p_traceparents text[], p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(delivery_id text, inbox_id bigint, job_id bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    v_n integer := cardinality(p_delivery_ids);
BEGIN
    IF v_n IS NULL OR v_n > 10000 THEN
        RAISE EXCEPTION 'between 0 and 10000 deliveries per call' USING ERRCODE = '22023';
    END IF;
    IF cardinality(p_events) IS DISTINCT FROM v_n OR cardinality(p_actions) IS DISTINCT FROM v_n
        OR cardinality(p_installation_ids) IS DISTINCT FROM v_n OR cardinality(p_repository_ids) IS DISTINCT FROM v_n
        OR cardinality(p_payloads) IS DISTINCT FROM v_n OR cardinality(p_payload_sha256s) IS DISTINCT FROM v_n
        OR cardinality(p_traceparents) IS DISTINCT FROM v_n THEN
        RAISE EXCEPTION 'the delivery arrays must have the same length' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH d AS (
        SELECT * FROM unnest(p_delivery_ids, p_events, p_actions, p_installation_ids, p_repository_ids,
                             p_payloads, p_payload_sha256s, p_traceparents) WITH ORDINALITY
            AS d(delivery_id, event, action, installation_id, repository_id, payload, payload_sha256, traceparent, ord)
    ), i AS (
        INSERT INTO webhook_inbox (delivery_id, event, action, installation_id, repository_id, payload,
                                   payload_sha256, received_at, traceparent)
        SELECT d.delivery_id, d.event, d.action, d.installation_id, d.repository_id, d.payload,
               d.payload_sha256, v_now, d.traceparent
        FROM d ORDER BY d.ord
        ON CONFLICT ON CONSTRAINT webhook_inbox_delivery_id_key DO NOTHING
        RETURNING webhook_inbox.id, webhook_inbox.delivery_id, webhook_inbox.event, webhook_inbox.traceparent
    ), j AS (
        INSERT INTO control_plane_jobs (kind, inbox_id, available_at, created_at, updated_at, traceparent)
        SELECT i.event, i.id, v_now, v_now, v_now, i.traceparent FROM i ORDER BY i.id
        RETURNING control_plane_jobs.id, control_plane_jobs.inbox_id
    )
    SELECT i.delivery_id, i.id, j.id FROM i JOIN j ON j.inbox_id = i.id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_webhook_validate_row(p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $function$
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
$function$;
-- +goose StatementEnd

DROP FUNCTION public.boardreadyops_clock_now(timestamptz);
