-- The claim records delivery_started_at for the replay-safe effects (check-run creation and
-- completion) as it leases them, saving each of them a transaction. A workflow dispatch still
-- records its start separately, immediately before its request is sent: that moment is the line
-- after which it is never blindly retried.

-- +goose Up

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION boardreadyops_claim_control_plane_outbox(
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
        attempts = o.attempts + 1, updated_at = v_now,
        delivery_started_at = CASE WHEN o.effect_type = 'github.workflow.dispatch' THEN o.delivery_started_at ELSE v_now END
    FROM due
    WHERE o.id = due.id
    RETURNING o.*;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION boardreadyops_claim_control_plane_outbox(
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
