-- A check run's identity survives a point-in-time restore (issue 24).
--
-- The external_id of a release run's check run was the run's id. A restore forgets release runs
-- that GitHub remembers; the run that a redelivered push creates afterwards gets a new id, so its
-- check-run creation (list first, create only when absent) did not find the check run the lost
-- run had created, and created a second one: the first stayed in progress on the commit for
-- good. The dispatcher now writes and searches for an identity derived from the release's key
-- (release_runs_identity_key without the head SHA the check run sits on):
-- v2:<repository id>:<first 32 hex digits of SHA-256 of the ref>, at most 55 characters
-- (pkg/checkrun.ExternalID; it is built from the creation payload's repository_id and ref, which
-- every creation payload since 00006 carries, so the creation functions are unchanged).
--
-- boardreadyops_release_run_external_id computes the same string in SQL (a test holds it equal
-- to the Go one). boardreadyops_release_run_of_check_run maps an external_id read from a
-- check_run webhook to its release run in either form, and locks it: a UUID (check runs created
-- before this migration, and during a roll by older dispatchers) by primary key; a v2 identity by
-- the delivery's repository, the check run's head SHA and the ref's digest, over the runs of that
-- repository (release_runs_identity_key's first column). The repository of the identity must be
-- the delivery's. boardreadyops_release_run_request_from_check_run (as 00030 left it) resolves its run
-- through it; nothing else in that function changes.
-- New functions follow docs/operations.md, "Rules for a new function".

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_release_run_external_id(p_repository_id bigint, p_ref text)
RETURNS text
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 'v2:' || p_repository_id::text || ':' || left(encode(sha256(convert_to(p_ref, 'UTF8')), 'hex'), 32)
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_release_run_of_check_run(p_repository_id bigint, p_external_id text, p_head_sha text)
RETURNS public.release_runs
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    run public.release_runs;
BEGIN
    IF p_external_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        SELECT * INTO run FROM public.release_runs r
        WHERE r.id = p_external_id::uuid AND r.repository_id = p_repository_id FOR UPDATE;
    ELSIF p_external_id ~ '^v2:[1-9][0-9]{0,18}:[0-9a-f]{32}$'
          AND split_part(p_external_id, ':', 2) = p_repository_id::text THEN
        SELECT * INTO run FROM public.release_runs r
        WHERE r.repository_id = p_repository_id AND r.head_sha = p_head_sha
          AND public.boardreadyops_release_run_external_id(r.repository_id, r.ref) = p_external_id
        FOR UPDATE;
    END IF;
    RETURN run; -- all NULL when nothing matches
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
    run := public.boardreadyops_release_run_of_check_run(i.repository_id, v_ext, v_cr ->> 'head_sha');
    IF run.id IS NULL OR run.repository_id IS DISTINCT FROM i.repository_id
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

ALTER FUNCTION public.boardreadyops_release_run_external_id(bigint, text) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_release_run_external_id(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_release_run_external_id(bigint, text) TO boardreadyops_lifecycle, boardreadyops_admin;
ALTER FUNCTION public.boardreadyops_release_run_of_check_run(bigint, text, text) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_release_run_of_check_run(bigint, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_release_run_of_check_run(bigint, text, text) TO boardreadyops_admin;

-- +goose Down
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

DROP FUNCTION public.boardreadyops_release_run_of_check_run(bigint, text, text);
DROP FUNCTION public.boardreadyops_release_run_external_id(bigint, text);
