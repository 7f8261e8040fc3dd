-- Nothing waits forever for a lost webhook (issue 20): a release run whose workflow run has been
-- quiet for a while is read back from GitHub.
--
-- 00022 reads a workflow run back only when a repaired reconciliation finds no stored
-- completion. A run whose workflow_run.completed webhook never arrived (GitHub gave up, the
-- delivery was refused during an outage and never redelivered) stayed 'running' for good.
-- boardreadyops_release_run_read_back_quiet, called by lifecycle's upkeep every minute, enqueues
-- the github.workflow_run.read effect of 00022 (replay-safe GET, key with a generation per read,
-- one read of an attempt pending at a time) for the oldest running runs whose current attempt has
-- a known workflow run and has not changed, nor been read, for p_quiet. The dispatcher performs
-- the GET and, when the run has finished, finishes the attempt from GitHub's answer; a run still
-- in progress changes nothing and is read again after another p_quiet. Lifecycle makes no GitHub
-- request itself. The runs are found by one range of release_runs_status_created_idx (00023),
-- the reads already made by control_plane_outbox_execution_attempt_idx (00026). Every lifecycle
-- replica sweeps; the attempts are locked SKIP LOCKED, so two sweeps never read one attempt twice.
-- New functions follow docs/operations.md, "Rules for a new function".

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_release_run_read_back_quiet(p_quiet interval, p_limit integer, p_now timestamptz DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now   timestamptz := public.boardreadyops_clock_now(p_now);
    v_count integer := 0;
    a       record;
BEGIN
    IF p_quiet IS NULL OR p_quiet < interval '5 minutes' THEN
        RAISE EXCEPTION 'read-back quiet period must be at least 5 minutes, got %', p_quiet USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'read-back limit must be 1 to 1000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    FOR a IN
        SELECT x.id
        FROM public.release_runs r
        JOIN public.execution_attempts x ON x.release_run_id = r.id AND x.number = r.current_attempt
        WHERE r.status = 'running' AND r.created_at < v_now - p_quiet
          AND x.status = 'running' AND x.workflow_run_id IS NOT NULL AND x.updated_at < v_now - p_quiet
          AND NOT EXISTS (SELECT 1 FROM public.control_plane_outbox o
                          WHERE o.execution_attempt_id = x.id AND o.effect_type = 'github.workflow_run.read'
                            AND o.created_at > v_now - p_quiet)
        ORDER BY r.created_at
        LIMIT p_limit
        FOR UPDATE OF x SKIP LOCKED -- another replica's sweep has these: it reads them
    LOOP
        IF public.boardreadyops_outbox_enqueue_workflow_run_read(a.id, v_now) IS NOT NULL THEN
            v_count := v_count + 1;
        END IF;
    END LOOP;
    RETURN v_count;
END;
$$;
-- +goose StatementEnd

ALTER FUNCTION public.boardreadyops_release_run_read_back_quiet(interval, integer, timestamptz) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_release_run_read_back_quiet(interval, integer, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_release_run_read_back_quiet(interval, integer, timestamptz) TO boardreadyops_lifecycle, boardreadyops_admin;

-- +goose Down
DROP FUNCTION public.boardreadyops_release_run_read_back_quiet(interval, integer, timestamptz);
