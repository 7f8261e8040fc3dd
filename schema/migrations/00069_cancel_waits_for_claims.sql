-- brops release-runs cancel no longer succeeds while a claim is taking the run's workflow
-- dispatch (docs/operations.md, "Release runs: show, list, cancel").
--
-- boardreadyops_release_run_cancel refused a run with a leased effect, but looked without locking.
-- A claim that had taken the run's dispatch and not yet committed was invisible to that check; the
-- cancel's UPDATE of the queued effects then waited for the claim, found the dispatch leased and
-- skipped it. The cancel succeeded, the dispatcher sent the dispatch, and the release workflow ran
-- for a cancelled run (its record then went to reconciliation_required). Now the cancel locks the
-- run's available and dead-lettered effects first (FOR UPDATE, in id order): it waits for such a
-- claim, and the check then sees the lease and refuses, as it does for any leased effect. Claims
-- skip the locked rows (SKIP LOCKED) until the cancel commits.
--
-- Only a function changes: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_cancel(p_run_id uuid, p_operator text, p_reason text, p_check_run_name text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(check_run_outbox_id bigint, superseded integer)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now        timestamptz := public.boardreadyops_clock_now(p_now);
    run          public.release_runs;
    att          public.execution_attempts;
    v_outbox     bigint;
    v_superseded integer;
    v_busy       text;
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'cancelling needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'cancelling needs a reason' USING ERRCODE = '22023';
    END IF;
    IF p_check_run_name IS NULL OR length(p_check_run_name) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'check run name must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO run FROM public.release_runs r WHERE r.id = p_run_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'release run % does not exist', p_run_id USING ERRCODE = 'BR006';
    END IF;
    IF run.status IN ('succeeded', 'failed', 'cancelled') THEN
        RAISE EXCEPTION 'release run % is %: only an unfinished run is cancelled', p_run_id, run.status USING ERRCODE = 'BR003';
    END IF;
    -- Lock the run's queued effects before looking for busy ones (00069). A claim that had taken a
    -- dispatch but not yet committed was invisible to the check; the UPDATE below then waited for
    -- it, found the dispatch leased and skipped it, and the cancel succeeded while the dispatch went
    -- out. Now the cancel waits for such a claim here and the check sees the lease; a queued effect
    -- locked here is skipped by every claim (SKIP LOCKED) until the cancel commits. Leased effects
    -- are not locked: their completions lock the run after them.
    PERFORM 1 FROM public.control_plane_outbox o
    WHERE o.release_run_id = run.id AND o.status IN ('available', 'dead_letter')
    ORDER BY o.id
    FOR UPDATE;
    SELECT string_agg(format('effect %s (%s) is %s', o.id, o.effect_type, o.status), '; ' ORDER BY o.id) INTO v_busy
    FROM public.control_plane_outbox o
    WHERE o.release_run_id = run.id AND o.status IN ('leased', 'reconciliation_required');
    IF v_busy IS NOT NULL THEN
        RAISE EXCEPTION 'release run % cannot be cancelled now: %', p_run_id, v_busy USING ERRCODE = 'BR003',
            HINT = 'a leased effect is being delivered: try again in a minute; a dispatch awaiting reconciliation may have started the workflow: brops reconcile inspect it first';
    END IF;

    WITH superseded AS (
        UPDATE public.control_plane_outbox o
        SET status = 'completed', completed_at = v_now, updated_at = v_now,
            result = jsonb_build_object('resolution', 'cancelled', 'previous_status', o.status, 'operator', p_operator)
        WHERE o.release_run_id = run.id AND o.status IN ('available', 'dead_letter')
        RETURNING o.id
    )
    SELECT count(*)::integer INTO v_superseded FROM superseded;

    UPDATE public.execution_attempts a
    SET status = 'cancelled', conclusion = 'cancelled', completed_at = v_now, updated_at = v_now
    WHERE a.release_run_id = run.id AND a.number = run.current_attempt AND a.status NOT IN ('succeeded', 'failed', 'cancelled')
    RETURNING * INTO att;
    UPDATE public.release_runs r SET status = 'cancelled', completed_at = v_now, updated_at = v_now WHERE r.id = run.id;

    -- The check run says so through the run's check-run update (00021): state 'cancelled', the
    -- reason as its notice, the newest update superseding any not sent yet.
    v_outbox := public.boardreadyops_release_run_enqueue_check_run(
        run.id, 'cancelled', left(format('An operator cancelled this release: %s', p_reason), 500), NULL, v_now);
    IF v_outbox IS NOT NULL THEN
        PERFORM pg_notify('boardreadyops_outbox', '');
    END IF;

    INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, release_run_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'release_run.cancel', 'release_run', 0, run.id, p_reason,
            jsonb_build_object('superseded_effects', v_superseded, 'check_run_outbox_id', v_outbox, 'attempt', run.current_attempt),
            run.status, 'cancelled');
    RETURN QUERY SELECT v_outbox, v_superseded;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_cancel(p_run_id uuid, p_operator text, p_reason text, p_check_run_name text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(check_run_outbox_id bigint, superseded integer)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now        timestamptz := public.boardreadyops_clock_now(p_now);
    run          public.release_runs;
    att          public.execution_attempts;
    v_outbox     bigint;
    v_superseded integer;
    v_busy       text;
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'cancelling needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'cancelling needs a reason' USING ERRCODE = '22023';
    END IF;
    IF p_check_run_name IS NULL OR length(p_check_run_name) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'check run name must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO run FROM public.release_runs r WHERE r.id = p_run_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'release run % does not exist', p_run_id USING ERRCODE = 'BR006';
    END IF;
    IF run.status IN ('succeeded', 'failed', 'cancelled') THEN
        RAISE EXCEPTION 'release run % is %: only an unfinished run is cancelled', p_run_id, run.status USING ERRCODE = 'BR003';
    END IF;
    SELECT string_agg(format('effect %s (%s) is %s', o.id, o.effect_type, o.status), '; ' ORDER BY o.id) INTO v_busy
    FROM public.control_plane_outbox o
    WHERE o.release_run_id = run.id AND o.status IN ('leased', 'reconciliation_required');
    IF v_busy IS NOT NULL THEN
        RAISE EXCEPTION 'release run % cannot be cancelled now: %', p_run_id, v_busy USING ERRCODE = 'BR003',
            HINT = 'a leased effect is being delivered: try again in a minute; a dispatch awaiting reconciliation may have started the workflow: brops reconcile inspect it first';
    END IF;

    WITH superseded AS (
        UPDATE public.control_plane_outbox o
        SET status = 'completed', completed_at = v_now, updated_at = v_now,
            result = jsonb_build_object('resolution', 'cancelled', 'previous_status', o.status, 'operator', p_operator)
        WHERE o.release_run_id = run.id AND o.status IN ('available', 'dead_letter')
        RETURNING o.id
    )
    SELECT count(*)::integer INTO v_superseded FROM superseded;

    UPDATE public.execution_attempts a
    SET status = 'cancelled', conclusion = 'cancelled', completed_at = v_now, updated_at = v_now
    WHERE a.release_run_id = run.id AND a.number = run.current_attempt AND a.status NOT IN ('succeeded', 'failed', 'cancelled')
    RETURNING * INTO att;
    UPDATE public.release_runs r SET status = 'cancelled', completed_at = v_now, updated_at = v_now WHERE r.id = run.id;

    -- The check run says so through the run's check-run update (00021): state 'cancelled', the
    -- reason as its notice, the newest update superseding any not sent yet.
    v_outbox := public.boardreadyops_release_run_enqueue_check_run(
        run.id, 'cancelled', left(format('An operator cancelled this release: %s', p_reason), 500), NULL, v_now);
    IF v_outbox IS NOT NULL THEN
        PERFORM pg_notify('boardreadyops_outbox', '');
    END IF;

    INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, release_run_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'release_run.cancel', 'release_run', 0, run.id, p_reason,
            jsonb_build_object('superseded_effects', v_superseded, 'check_run_outbox_id', v_outbox, 'attempt', run.current_attempt),
            run.status, 'cancelled');
    RETURN QUERY SELECT v_outbox, v_superseded;
END;
$$;
-- +goose StatementEnd
