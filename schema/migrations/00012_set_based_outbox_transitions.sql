-- Set-based forms of the dispatcher's two most frequent group-committed transitions. A group
-- commit of n check-run completions (or n workflow-dispatch starts) used to run n statements,
-- each entering a SECURITY DEFINER function that locked and updated one row; these take the ids
-- of one worker's batch and do it in one statement (docs/performance.md: "Set-based
-- transitions").
--
-- They return the ids they transitioned and skip the others instead of raising: the caller runs
-- each skipped id through the single-row function (boardreadyops_complete_check_run_complete,
-- boardreadyops_start_control_plane_outbox_delivery), whose exception names exactly why
-- (not leased by the worker, lease expired, wrong effect type, no such record). The rules are
-- the single-row functions', row for row:
--   * the record is leased by p_worker — lease_owner is set exactly when the record is leased
--     (control_plane_outbox_lease_check), so `lease_owner = p_worker` selects by primary key
--     without naming status, which a generic plan would match to the partial lease index
--     (migration 00010);
--   * completion: the effect type is github.check_run.complete;
--   * start: the lease has not expired at p_now; an already-recorded start is kept.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_complete_check_run_complete_batch(
    p_ids bigint[], p_worker text, p_now timestamptz DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION boardreadyops_start_control_plane_outbox_delivery_batch(
    p_ids bigint[], p_worker text, p_now timestamptz DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
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
$$;
-- +goose StatementEnd

REVOKE EXECUTE ON FUNCTION boardreadyops_complete_check_run_complete_batch(bigint[], text, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION boardreadyops_start_control_plane_outbox_delivery_batch(bigint[], text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    boardreadyops_complete_check_run_complete_batch(bigint[], text, timestamptz),
    boardreadyops_start_control_plane_outbox_delivery_batch(bigint[], text, timestamptz)
TO boardreadyops_dispatcher, boardreadyops_admin;

-- +goose Down
DROP FUNCTION boardreadyops_start_control_plane_outbox_delivery_batch(bigint[], text, timestamptz);
DROP FUNCTION boardreadyops_complete_check_run_complete_batch(bigint[], text, timestamptz);
