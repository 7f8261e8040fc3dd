-- The outbox state machine. Every transition of control_plane_outbox is one of these functions,
-- so no client (a service, brops, or a person in psql) can break an invariant.
--
-- Conventions:
--   * p_now is optional everywhere: NULL means now(). Tests pass explicit times so that lease
--     expiry is tested without sleeping.
--   * Errors carry a project SQLSTATE so clients can tell them apart without parsing messages:
--       BR001 lease not held (not leased, or leased by another worker)
--       BR002 wrong effect type for this operation
--       BR003 illegal state for this operation
--       BR004 refused: the record requires reconciliation, not replay
--       BR005 the release run / execution attempt cannot advance
--       BR006 no such record
--     and 22023 (invalid_parameter_value) for bad arguments.
--   * Functions are SECURITY DEFINER with a pinned search_path, and EXECUTE is granted per
--     service role in a later migration (never to PUBLIC).

-- +goose Up

-- +goose StatementBegin
CREATE FUNCTION boardreadyops_outbox_lock_leased(p_id bigint, p_worker text, p_effect_type text)
RETURNS control_plane_outbox
LANGUAGE plpgsql
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- Enqueue an effect under its deterministic idempotency key. Returns the new record's id, or
-- NULL when a record with that key already exists (ON CONFLICT DO NOTHING).
-- It does not NOTIFY: a NOTIFY in every writing transaction serializes their commits on the
-- notification queue lock (measured: half the throughput). The writing process notifies
-- 'boardreadyops_outbox' after its commit instead (pkg/notify), and dispatchers also poll.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_enqueue_control_plane_outbox(
    p_effect_type text,
    p_release_run_id uuid,
    p_execution_attempt_id uuid,
    p_installation_id bigint,
    p_payload jsonb,
    p_traceparent text DEFAULT NULL,
    p_max_attempts integer DEFAULT 10,
    p_now timestamptz DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- Claim up to p_limit due effects for p_worker. Rows locked by another claimer are skipped, so
-- any number of dispatchers claim disjoint batches. Each claim spends one attempt.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_claim_control_plane_outbox(
    p_worker text, p_limit integer, p_lease interval, p_now timestamptz DEFAULT NULL)
RETURNS SETOF control_plane_outbox
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
        SELECT o.id FROM control_plane_outbox o
        WHERE o.status = 'available' AND o.available_at <= v_now
        ORDER BY o.available_at, o.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE control_plane_outbox o
    SET status = 'leased', lease_owner = p_worker, lease_expires_at = v_now + p_lease,
        attempts = o.attempts + 1, updated_at = v_now
    FROM due
    WHERE o.id = due.id
    RETURNING o.*;
END;
$$;
-- +goose StatementEnd

-- Record, durably, that the request for this effect is about to be sent. From this moment a
-- workflow dispatch is no longer blindly retryable. Refused when the lease has already expired,
-- so a worker that stalled past its lease never starts a delivery another worker may own.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_start_control_plane_outbox_delivery(
    p_id bigint, p_worker text, p_now timestamptz DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- Build and enqueue the workflow dispatch of one execution attempt. Internal: not granted.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_outbox_enqueue_attempt_dispatch(
    p_run_id uuid, p_attempt_id uuid, p_traceparent text, p_now timestamptz)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, public, pg_temp
AS $$
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
    RETURN boardreadyops_enqueue_control_plane_outbox(
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
$$;
-- +goose StatementEnd

-- Check Run created (or found): store its id on the release run, advance the run from
-- check_pending to dispatching and enqueue the current attempt's workflow dispatch.
-- Returns the id of the enqueued dispatch effect (NULL when the run was not waiting for its check
-- run any more, e.g. it was cancelled, in which case the check run id is still recorded).
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_complete_check_run_create(
    p_id bigint, p_worker text, p_check_run_id bigint, p_now timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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

    UPDATE release_runs SET check_run_id = p_check_run_id, updated_at = v_now WHERE id = run.id;

    IF run.status = 'check_pending' THEN
        UPDATE execution_attempts SET status = 'dispatching', updated_at = v_now
        WHERE release_run_id = run.id AND number = run.current_attempt AND status = 'pending'
        RETURNING * INTO att;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'release run %: attempt % is not pending', run.id, run.current_attempt
                USING ERRCODE = 'BR005';
        END IF;
        UPDATE release_runs SET status = 'dispatching', updated_at = v_now WHERE id = run.id;
        v_dispatch_id := boardreadyops_outbox_enqueue_attempt_dispatch(run.id, att.id, r.traceparent, v_now);
    END IF;

    UPDATE control_plane_outbox
    SET status = 'completed', completed_at = v_now, lease_owner = NULL, lease_expires_at = NULL,
        result = jsonb_build_object('check_run_id', p_check_run_id), last_error = NULL, updated_at = v_now
    WHERE id = p_id;
    RETURN v_dispatch_id;
END;
$$;
-- +goose StatementEnd

-- Shared by the dispatch completion and the reconciliation repair: record the workflow run on
-- the attempt and advance attempt and run to running. Raises BR005 unless both advance.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_outbox_advance_dispatched_attempt(
    r control_plane_outbox, p_workflow_run_id bigint, p_now timestamptz)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- Workflow dispatched: persist the workflow_run_id GitHub returned and advance the attempt and
-- the run. When they cannot advance nothing completes: the record stays leased, its lease
-- expires, and recovery sends it to reconciliation_required.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_complete_workflow_dispatch(
    p_id bigint, p_worker text, p_workflow_run_id bigint, p_now timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- Check Run completed on GitHub.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_complete_check_run_complete(
    p_id bigint, p_worker text, p_now timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- Transient failure: back to available at p_retry_at, or dead_letter when attempts are
-- exhausted. For a workflow dispatch the caller asserts that the request provably never reached
-- GitHub (dial error, rate limit); delivery_started_at is cleared accordingly.
-- Returns the new status.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_retry_control_plane_outbox(
    p_id bigint, p_worker text, p_error text, p_retry_at timestamptz, p_now timestamptz DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- Rate limited: back to available at p_until without spending an attempt.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_defer_control_plane_outbox(
    p_id bigint, p_worker text, p_until timestamptz, p_reason text DEFAULT NULL, p_now timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- Give a leased effect back without spending an attempt (graceful shutdown). Refused for a
-- workflow dispatch whose delivery has started: that one may have reached GitHub.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_release_control_plane_outbox(
    p_id bigint, p_worker text, p_now timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- Permanent failure (404, 422, credentials refused after a refresh, ...).
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_dead_letter_control_plane_outbox(
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
    PERFORM boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    UPDATE control_plane_outbox
    SET status = 'dead_letter', lease_owner = NULL, lease_expires_at = NULL,
        last_error = left(p_error, 4096), updated_at = v_now
    WHERE id = p_id;
END;
$$;
-- +goose StatementEnd

-- A workflow dispatch whose outcome is unknown (timeout or connection lost after the request
-- was written, 5xx): delivery may have happened, so blind replay is unsafe.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_require_control_plane_outbox_reconciliation(
    p_id bigint, p_worker text, p_error text, p_now timestamptz DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- Recover expired leases (a worker died or stalled). A workflow dispatch whose delivery started
-- goes to reconciliation_required; anything else back to available, or dead_letter when its
-- attempts are exhausted. Bounded per call; rows another transaction holds are skipped.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_recover_control_plane_outbox_leases(
    p_now timestamptz DEFAULT NULL, p_limit integer DEFAULT 1000)
RETURNS TABLE (id bigint, effect_type text, previous_owner text, status text)
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
$$;
-- +goose StatementEnd

-- Operator replay of an ordinary dead letter. Refuses reconciliation_required (the seed's rule:
-- find out what GitHub did first) and anything not dead-lettered. Audited.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_replay_control_plane_outbox(
    p_id bigint, p_operator text, p_reason text, p_now timestamptz DEFAULT NULL)
RETURNS control_plane_outbox
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- Resolve a reconciliation_required workflow dispatch once the operator knows what GitHub did:
--   p_workflow_run_id set  -> repair: GitHub did create the run; record it and advance, exactly
--                             as the completion would have;
--   p_workflow_run_id NULL -> supersede: it did not; close this record (completed, superseded_by)
--                             and enqueue a fresh dispatch for the same attempt under a new key.
-- Audited with the evidence. Returns the id of the replacement record when superseding.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_resolve_workflow_dispatch_reconciliation(
    p_id bigint, p_operator text, p_workflow_run_id bigint, p_evidence text, p_now timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- Aggregate queue figures for metrics and brops stats: one cheap statement whose every part is
-- served by a partial index. No per-installation or per-repository dimension, by design.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_control_plane_outbox_stats(p_now timestamptz DEFAULT NULL)
RETURNS TABLE (available bigint, due bigint, leased bigint, retrying bigint, dead_letter bigint,
               reconciliation_required bigint, oldest_available_age_seconds double precision)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
    SELECT
        (SELECT count(*) FROM control_plane_outbox WHERE status = 'available'),
        (SELECT count(*) FROM control_plane_outbox WHERE status = 'available' AND available_at <= coalesce(p_now, now())),
        (SELECT count(*) FROM control_plane_outbox WHERE status = 'leased'),
        (SELECT count(*) FROM control_plane_outbox WHERE status = 'available' AND attempts > 0),
        (SELECT count(*) FROM control_plane_outbox WHERE status = 'dead_letter'),
        (SELECT count(*) FROM control_plane_outbox WHERE status = 'reconciliation_required'),
        coalesce((SELECT extract(epoch FROM coalesce(p_now, now()) - min(available_at))::double precision
                  FROM control_plane_outbox WHERE status = 'available' AND available_at <= coalesce(p_now, now())), 0);
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION boardreadyops_control_plane_outbox_stats(timestamptz);
DROP FUNCTION boardreadyops_resolve_workflow_dispatch_reconciliation(bigint, text, bigint, text, timestamptz);
DROP FUNCTION boardreadyops_replay_control_plane_outbox(bigint, text, text, timestamptz);
DROP FUNCTION boardreadyops_recover_control_plane_outbox_leases(timestamptz, integer);
DROP FUNCTION boardreadyops_require_control_plane_outbox_reconciliation(bigint, text, text, timestamptz);
DROP FUNCTION boardreadyops_dead_letter_control_plane_outbox(bigint, text, text, timestamptz);
DROP FUNCTION boardreadyops_release_control_plane_outbox(bigint, text, timestamptz);
DROP FUNCTION boardreadyops_defer_control_plane_outbox(bigint, text, timestamptz, text, timestamptz);
DROP FUNCTION boardreadyops_retry_control_plane_outbox(bigint, text, text, timestamptz, timestamptz);
DROP FUNCTION boardreadyops_complete_check_run_complete(bigint, text, timestamptz);
DROP FUNCTION boardreadyops_complete_workflow_dispatch(bigint, text, bigint, timestamptz);
DROP FUNCTION boardreadyops_outbox_advance_dispatched_attempt(control_plane_outbox, bigint, timestamptz);
DROP FUNCTION boardreadyops_complete_check_run_create(bigint, text, bigint, timestamptz);
DROP FUNCTION boardreadyops_outbox_enqueue_attempt_dispatch(uuid, uuid, text, timestamptz);
DROP FUNCTION boardreadyops_start_control_plane_outbox_delivery(bigint, text, timestamptz);
DROP FUNCTION boardreadyops_claim_control_plane_outbox(text, integer, interval, timestamptz);
DROP FUNCTION boardreadyops_enqueue_control_plane_outbox(text, uuid, uuid, bigint, jsonb, text, integer, timestamptz);
DROP FUNCTION boardreadyops_outbox_lock_leased(bigint, text, text);
