-- Lifecycle's outbox-side transitions. Lifecycle writes installation, repository and release-run
-- state directly (its role may), but every outbox write goes through a function, so the payload of
-- a workflow dispatch is built in one place (boardreadyops_outbox_enqueue_attempt_dispatch, 00002,
-- shared with the check-run completion) and the outbox table stays closed to the service.

-- +goose Up

-- A person pressed "Re-run" on the check run of a finished release run: start the next execution
-- attempt and enqueue its dispatch. Raises BR005 when the run has not finished (a running run is
-- not re-run) or has no check run yet. Returns the new attempt and the dispatch effect.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_start_next_execution_attempt(
    p_run_id uuid, p_traceparent text DEFAULT NULL, p_now timestamptz DEFAULT NULL)
RETURNS TABLE (attempt_id uuid, attempt_number integer, outbox_id bigint)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- A deleted or suspended installation: dead-letter its effects that have not started delivery
-- (available ones; leased ones finish or fail on their own), with the reason. Unsuspending does not
-- bring them back by itself: an operator replays them (brops outbox replay). Returns the count.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_dead_letter_installation_outbox(
    p_installation_id bigint, p_reason text, p_now timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- A release-tag push: the release run (check_pending), its attempt 1 and the run's
-- github.check_run.create effect, atomically. Returns the run id, or NULL when this tag at this
-- commit already has its run (nothing is written then).
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_create_release_run(
    p_repository_id bigint, p_installation_id bigint, p_ref text, p_head_sha text, p_workflow_file text,
    p_check_run_name text, p_traceparent text DEFAULT NULL, p_now timestamptz DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
    PERFORM boardreadyops_enqueue_control_plane_outbox(
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
$$;
-- +goose StatementEnd

-- Complete a batch of leased jobs in one call. Raises BR001 (and completes none) when any of them
-- is not leased by p_worker. Returns the number completed.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_complete_control_plane_jobs(
    p_ids bigint[], p_worker text, p_now timestamptz DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    v_count integer;
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) > 10000 THEN
        RAISE EXCEPTION 'between 0 and 10000 job ids per call' USING ERRCODE = '22023';
    END IF;
    UPDATE control_plane_jobs
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL, updated_at = v_now
    WHERE id = ANY(p_ids) AND status = 'leased' AND lease_owner = p_worker;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count <> cardinality(ARRAY(SELECT DISTINCT unnest(p_ids))) THEN
        RAISE EXCEPTION '% of % jobs are not leased by worker %', cardinality(p_ids) - v_count, cardinality(p_ids), p_worker
            USING ERRCODE = 'BR001';
    END IF;
    RETURN v_count;
END;
$$;
-- +goose StatementEnd

-- Put a leased job back until p_until without spending an attempt: a workflow_run that arrived
-- before its dispatch completion was committed waits for it by time (bounded by lifecycle's match
-- window), not by attempts.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_defer_control_plane_job(
    p_id bigint, p_worker text, p_until timestamptz, p_reason text, p_now timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

REVOKE EXECUTE ON FUNCTION boardreadyops_defer_control_plane_job(bigint, text, timestamptz, text, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION boardreadyops_create_release_run(bigint, bigint, text, text, text, text, text, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION boardreadyops_complete_control_plane_jobs(bigint[], text, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION boardreadyops_start_next_execution_attempt(uuid, text, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION boardreadyops_dead_letter_installation_outbox(bigint, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    boardreadyops_create_release_run(bigint, bigint, text, text, text, text, text, timestamptz),
    boardreadyops_complete_control_plane_jobs(bigint[], text, timestamptz),
    boardreadyops_defer_control_plane_job(bigint, text, timestamptz, text, timestamptz),
    boardreadyops_start_next_execution_attempt(uuid, text, timestamptz),
    boardreadyops_dead_letter_installation_outbox(bigint, text, timestamptz)
TO boardreadyops_lifecycle, boardreadyops_admin;

-- +goose Down
DROP FUNCTION boardreadyops_complete_control_plane_jobs(bigint[], text, timestamptz);
DROP FUNCTION boardreadyops_create_release_run(bigint, bigint, text, text, text, text, text, timestamptz);
DROP FUNCTION boardreadyops_defer_control_plane_job(bigint, text, timestamptz, text, timestamptz);
DROP FUNCTION boardreadyops_dead_letter_installation_outbox(bigint, text, timestamptz);
DROP FUNCTION boardreadyops_start_next_execution_attempt(uuid, text, timestamptz);
