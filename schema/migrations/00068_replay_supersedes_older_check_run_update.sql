-- Replaying a dead-lettered check-run update whose run has a newer update completes it as
-- superseded instead of sending it (docs/operations.md, "Runbook: dead letters").
--
-- boardreadyops_outbox_replay set every dead letter back to available. A newer check-run update
-- supersedes only updates still available, so a dead-lettered older one stayed beside it; replayed
-- (by brops outbox replay, --all-dead-letters, or a developer's Retry press through the permission
-- read, which replays a blocked run's dead letters), it was claimed and sent after the newer one,
-- and the check run went back to an older state ("running" after "succeeded"). An installation's
-- suspension dead-letters every effect it has queued, so this happened after every such pause with
-- more than one update per run. Now such a replay completes the record as superseded by the newest
-- update (superseded_by, result.resolution = superseded), as a retry, a deferral or a release of it
-- does (boardreadyops_outbox_supersede_check_run_update), audited with to_status completed, and
-- unblocks its run as any replay does when nothing else blocks it. Every other replay is as before.
--
-- Only a function changes: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_replay(p_id bigint, p_operator text, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS public.control_plane_outbox
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
    v_window timestamptz;
    v_newer bigint;
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
                                  to_char(r.delivery_started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')),
                  HINT = 'find out whether the run exists (brops reconcile inspect), then resolve the record '
                         '(brops reconcile resolve) with the evidence';
    END IF;
    IF r.status <> 'dead_letter' THEN
        RAISE EXCEPTION 'outbox record % is %, only dead letters can be replayed', p_id, r.status
            USING ERRCODE = 'BR003';
    END IF;
    -- A check-run update whose run has a newer one is never sent again (00068): sent after the
    -- newer one, it would put an older state back on the check run. Replayed, it completes as
    -- superseded, as a retry, a deferral or a release of it does, and the audit row says so.
    IF r.effect_type = 'github.check_run.complete' THEN
        v_newer := public.boardreadyops_outbox_newer_check_run_update(r.id, r.release_run_id);
        IF v_newer IS NOT NULL THEN
            INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
            VALUES (v_now, p_operator, 'outbox.replay', 'outbox', p_id, p_reason,
                    jsonb_build_object('last_error', r.last_error, 'attempts', r.attempts, 'superseded_by', v_newer),
                    r.status, 'completed');
            PERFORM public.boardreadyops_outbox_supersede_check_run_update(r, 'replayed by ' || p_operator, v_now);
            SELECT * INTO r FROM public.control_plane_outbox WHERE id = p_id;
            -- No longer a dead letter: if it was the last thing keeping its run blocked (a Retry
            -- replays the run's dead letters in id order, the dispatch first), the run goes on.
            PERFORM public.boardreadyops_release_run_unblock(r, p_operator, v_now);
            RETURN r;
        END IF;
    END IF;
    -- While a restore fence's hold is open, a dead-lettered workflow dispatch may have been
    -- replayed and sent by the old deployment after the restore point (00067): replayed again
    -- (by an operator, or by a redelivered Retry press), it waits in reconciliation_required as a
    -- new dispatch does, instead of going out a second time.
    IF r.effect_type = 'github.workflow.dispatch' THEN
        SELECT f.window_start INTO v_window FROM public.restore_fences f WHERE f.closed_at IS NULL ORDER BY f.id DESC LIMIT 1;
        IF FOUND THEN
            INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
            VALUES (v_now, p_operator, 'outbox.replay', 'outbox', p_id, p_reason,
                    jsonb_build_object('last_error', r.last_error, 'attempts', r.attempts, 'restore_fence_window', v_window),
                    r.status, 'reconciliation_required');
            UPDATE public.control_plane_outbox
            SET status = 'reconciliation_required', available_at = v_now, attempts = 0, delivery_started_at = v_window,
                last_error = 'restore fence open since ' || to_char(v_window AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
                    || ': replayed while held; the old deployment may have replayed and sent it after the restore point; inspect and resolve',
                updated_at = v_now
            WHERE public.control_plane_outbox.id = p_id
            RETURNING * INTO r;
            PERFORM public.boardreadyops_release_run_block(p_id, v_now);
            RETURN r;
        END IF;
    END IF;
    INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'outbox.replay', 'outbox', p_id, p_reason,
            jsonb_build_object('last_error', r.last_error, 'attempts', r.attempts), r.status, 'available');
    UPDATE public.control_plane_outbox
    SET status = 'available', available_at = v_now, attempts = 0, delivery_started_at = NULL, updated_at = v_now
    WHERE public.control_plane_outbox.id = p_id
    RETURNING * INTO r;
    PERFORM public.boardreadyops_release_run_unblock(r, p_operator, v_now);
    PERFORM pg_notify('boardreadyops_outbox', '');
    RETURN r;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_replay(p_id bigint, p_operator text, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS public.control_plane_outbox
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
    v_window timestamptz;
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
                                  to_char(r.delivery_started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')),
                  HINT = 'find out whether the run exists (brops reconcile inspect), then resolve the record '
                         '(brops reconcile resolve) with the evidence';
    END IF;
    IF r.status <> 'dead_letter' THEN
        RAISE EXCEPTION 'outbox record % is %, only dead letters can be replayed', p_id, r.status
            USING ERRCODE = 'BR003';
    END IF;
    -- While a restore fence's hold is open, a dead-lettered workflow dispatch may have been
    -- replayed and sent by the old deployment after the restore point (00067): replayed again
    -- (by an operator, or by a redelivered Retry press), it waits in reconciliation_required as a
    -- new dispatch does, instead of going out a second time.
    IF r.effect_type = 'github.workflow.dispatch' THEN
        SELECT f.window_start INTO v_window FROM public.restore_fences f WHERE f.closed_at IS NULL ORDER BY f.id DESC LIMIT 1;
        IF FOUND THEN
            INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
            VALUES (v_now, p_operator, 'outbox.replay', 'outbox', p_id, p_reason,
                    jsonb_build_object('last_error', r.last_error, 'attempts', r.attempts, 'restore_fence_window', v_window),
                    r.status, 'reconciliation_required');
            UPDATE public.control_plane_outbox
            SET status = 'reconciliation_required', available_at = v_now, attempts = 0, delivery_started_at = v_window,
                last_error = 'restore fence open since ' || to_char(v_window AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
                    || ': replayed while held; the old deployment may have replayed and sent it after the restore point; inspect and resolve',
                updated_at = v_now
            WHERE public.control_plane_outbox.id = p_id
            RETURNING * INTO r;
            PERFORM public.boardreadyops_release_run_block(p_id, v_now);
            RETURN r;
        END IF;
    END IF;
    INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'outbox.replay', 'outbox', p_id, p_reason,
            jsonb_build_object('last_error', r.last_error, 'attempts', r.attempts), r.status, 'available');
    UPDATE public.control_plane_outbox
    SET status = 'available', available_at = v_now, attempts = 0, delivery_started_at = NULL, updated_at = v_now
    WHERE public.control_plane_outbox.id = p_id
    RETURNING * INTO r;
    PERFORM public.boardreadyops_release_run_unblock(r, p_operator, v_now);
    PERFORM pg_notify('boardreadyops_outbox', '');
    RETURN r;
END;
$$;
-- +goose StatementEnd

