-- Completing a batch of jobs read every leased job. Under the end-to-end load
-- boardreadyops_complete_control_plane_jobs was PostgreSQL's most expensive statement (2.8 ms per
-- call of ~8 jobs, pg_stat_statements): once PL/pgSQL switched to a generic plan, the planner
-- matched `status = 'leased'` to the partial index control_plane_jobs_lease_idx, estimated one
-- row, and scanned every leased job (and their dead index entries) filtering on id = ANY(ids),
-- instead of looking the ids up by primary key. Same semantics, primary-key plan.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION boardreadyops_complete_control_plane_jobs(
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
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION boardreadyops_complete_control_plane_jobs(
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
