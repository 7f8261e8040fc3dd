-- The lifecycle queue's state machine (control_plane_jobs), with the same lease discipline as the
-- outbox: claim / complete / retry / dead-letter / release / recover / replay. Same conventions
-- as 00002: optional p_now, project SQLSTATEs BR001..BR006, SECURITY DEFINER, pinned search_path.

-- +goose Up

-- +goose StatementBegin
CREATE FUNCTION boardreadyops_job_lock_leased(p_id bigint, p_worker text)
RETURNS control_plane_jobs
LANGUAGE plpgsql
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION boardreadyops_claim_control_plane_jobs(
    p_worker text, p_limit integer, p_lease interval, p_now timestamptz DEFAULT NULL)
RETURNS SETOF control_plane_jobs
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION boardreadyops_complete_control_plane_job(
    p_id bigint, p_worker text, p_now timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
BEGIN
    PERFORM boardreadyops_job_lock_leased(p_id, p_worker);
    UPDATE control_plane_jobs
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
        updated_at = v_now
    WHERE id = p_id;
END;
$$;
-- +goose StatementEnd

-- Returns the new status: available (retry at p_retry_at) or dead_letter (attempts exhausted).
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_retry_control_plane_job(
    p_id bigint, p_worker text, p_error text, p_retry_at timestamptz, p_now timestamptz DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION boardreadyops_dead_letter_control_plane_job(
    p_id bigint, p_worker text, p_error text, p_now timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- Give a leased job back without spending an attempt (graceful shutdown before it ran).
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_release_control_plane_job(
    p_id bigint, p_worker text, p_now timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- Expired job leases go back to available, or to dead_letter when attempts are exhausted.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_recover_control_plane_job_leases(
    p_now timestamptz DEFAULT NULL, p_limit integer DEFAULT 1000)
RETURNS TABLE (id bigint, kind text, previous_owner text, status text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION boardreadyops_replay_control_plane_job(
    p_id bigint, p_operator text, p_reason text, p_now timestamptz DEFAULT NULL)
RETURNS control_plane_jobs
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION boardreadyops_control_plane_job_stats(p_now timestamptz DEFAULT NULL)
RETURNS TABLE (available bigint, due bigint, leased bigint, retrying bigint, dead_letter bigint,
               oldest_available_age_seconds double precision)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
    SELECT
        (SELECT count(*) FROM control_plane_jobs WHERE status = 'available'),
        (SELECT count(*) FROM control_plane_jobs WHERE status = 'available' AND available_at <= coalesce(p_now, now())),
        (SELECT count(*) FROM control_plane_jobs WHERE status = 'leased'),
        (SELECT count(*) FROM control_plane_jobs WHERE status = 'available' AND attempts > 0),
        (SELECT count(*) FROM control_plane_jobs WHERE status = 'dead_letter'),
        coalesce((SELECT extract(epoch FROM coalesce(p_now, now()) - min(available_at))::double precision
                  FROM control_plane_jobs WHERE status = 'available' AND available_at <= coalesce(p_now, now())), 0);
$$;
-- +goose StatementEnd

-- Bounded, batched retention: removes completed outbox records and completed jobs (with their
-- inbox rows) older than p_older_than, at most p_batch rows of each per call, so that the hot
-- tables stay small. Dead letters and reconciliation records are never swept. The inbox (and so
-- delivery-id deduplication) is kept at least as long as the retention window, which must be
-- longer than GitHub's redelivery window.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_sweep_control_plane_retention(
    p_older_than interval, p_batch integer DEFAULT 1000, p_now timestamptz DEFAULT NULL)
RETURNS TABLE (outbox_deleted bigint, jobs_deleted bigint)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- The applied schema version, readable by every service role for its readiness check without
-- granting access to goose's bookkeeping table.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_schema_version()
RETURNS bigint
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
    SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION boardreadyops_schema_version();
DROP FUNCTION boardreadyops_sweep_control_plane_retention(interval, integer, timestamptz);
DROP FUNCTION boardreadyops_control_plane_job_stats(timestamptz);
DROP FUNCTION boardreadyops_replay_control_plane_job(bigint, text, text, timestamptz);
DROP FUNCTION boardreadyops_recover_control_plane_job_leases(timestamptz, integer);
DROP FUNCTION boardreadyops_release_control_plane_job(bigint, text, timestamptz);
DROP FUNCTION boardreadyops_dead_letter_control_plane_job(bigint, text, text, timestamptz);
DROP FUNCTION boardreadyops_retry_control_plane_job(bigint, text, text, timestamptz, timestamptz);
DROP FUNCTION boardreadyops_complete_control_plane_job(bigint, text, timestamptz);
DROP FUNCTION boardreadyops_claim_control_plane_jobs(text, integer, interval, timestamptz);
DROP FUNCTION boardreadyops_job_lock_leased(bigint, text);
