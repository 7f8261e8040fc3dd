-- Fewer row versions per release run. Measured under the end-to-end load (pg_stat_statements,
-- docs/performance.md): completing a check-run creation updated the release run twice (check
-- run id, then status), and every update of release_runs and execution_attempts was a non-HOT
-- update, because pages filled by sequential inserts had no room for the new version: each one
-- inserted fresh entries into every index of the table.
--
-- 1. Leave room on each page so that updates which change no indexed column (status,
--    check_run_id, timestamps) stay on the page as HOT updates, with no index insertions.
-- 2. Record the check run id and advance the run to dispatching in one update.

-- +goose Up
ALTER TABLE release_runs SET (fillfactor = 70);
ALTER TABLE execution_attempts SET (fillfactor = 70);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION boardreadyops_complete_check_run_create(
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
$$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE release_runs RESET (fillfactor);
ALTER TABLE execution_attempts RESET (fillfactor);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION boardreadyops_complete_check_run_create(
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
