-- "Re-run all checks" and "Re-run failed checks" on a commit (GitHub's check_suite rerequested,
-- docs/lifecycle.md).
--
-- GitHub sends a check suite's rerequested to the App that owns the suite when someone presses
-- either button on a commit, and resets the suite to queued. Lifecycle did not handle the event,
-- so nothing happened: the release was not re-run and the commit's checks showed "queued" until a
-- check run of the suite changed again.
--
-- boardreadyops_release_run_request_from_check_suite decides, from stored state, what the
-- delivery asks of each release run whose check run is on the suite's commit in the delivery's
-- repository (the newest 100, locked in id order as every other transition locks runs): a failed
-- or cancelled run is re-run (outcome "rerun": the caller starts the next attempt, as for a check
-- run's Re-run); every other run is answered on its check run. A succeeded release is not released
-- again by a suite-wide button, which does not say which checks it meant ("Re-run failed checks"
-- sends the same event): its own check run's Re-run does that. The runs are found through
-- release_runs_repository_created_idx: a repository's runs are read, a rare event's cost.
--
-- Only a new function: no table lock; a previous release's lifecycle never calls it.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_release_run_request_from_check_suite(p_job_id bigint, p_worker text, p_traceparent text DEFAULT NULL, p_now timestamptz DEFAULT NULL)
RETURNS TABLE(outcome text, release_run_id uuid, outbox_id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    j public.control_plane_jobs;
    i public.webhook_inbox;
    run public.release_runs;
    v_sha text;
    v_who text;
    v_unknown boolean;
    v_ids uuid[];
BEGIN
    j := public.boardreadyops_job_lock_leased(p_job_id, p_worker);
    SELECT * INTO i FROM public.webhook_inbox WHERE id = j.inbox_id;
    IF i.event IS DISTINCT FROM 'check_suite' OR i.action IS DISTINCT FROM 'rerequested' OR i.repository_id IS NULL THEN
        RAISE EXCEPTION 'job % is not a check_suite rerequested delivery', p_job_id USING ERRCODE = 'BR005';
    END IF;
    v_sha := i.payload -> 'check_suite' ->> 'head_sha';
    v_who := coalesce('@' || nullif(i.payload -> 'check_suite' ->> 'sender_login', ''), 'someone');
    v_ids := ARRAY(SELECT r.id FROM public.release_runs r
                   WHERE r.repository_id = i.repository_id AND r.head_sha = v_sha AND r.check_run_id IS NOT NULL
                   ORDER BY r.created_at DESC, r.id
                   LIMIT 100);
    -- Locked in key order, as the set-based transitions lock runs, so that two never deadlock.
    PERFORM 1 FROM public.release_runs r WHERE r.id = ANY (v_ids) ORDER BY r.id FOR UPDATE;
    FOR run IN
        SELECT * FROM public.release_runs r WHERE r.id = ANY (v_ids) ORDER BY r.created_at DESC, r.id
    LOOP
        IF run.status IN ('failed', 'cancelled') THEN
            RETURN QUERY SELECT 'rerun'::text, run.id, NULL::bigint;
            CONTINUE;
        END IF;
        v_unknown := EXISTS (SELECT 1 FROM public.control_plane_outbox o
                             WHERE o.release_run_id = run.id AND o.status = 'reconciliation_required');
        RETURN QUERY SELECT 'answered'::text, run.id, public.boardreadyops_release_run_enqueue_check_run(run.id, NULL,
            CASE WHEN run.status = 'succeeded'
                 THEN format('Re-run of the commit''s checks requested by %s: this release succeeded, so it is not released again. Press Re-run on this check run to release it again.', v_who)
                 ELSE format('Re-run of the commit''s checks requested by %s while the release is %s: nothing new was started.%s', v_who,
                             CASE run.status WHEN 'blocked' THEN 'blocked' WHEN 'running' THEN 'still running' ELSE 'still starting' END,
                             CASE WHEN run.status = 'blocked' AND NOT v_unknown THEN ' Press Retry to start it again.' ELSE '' END) END,
            p_traceparent, v_now);
    END LOOP;
END;
$$;
-- +goose StatementEnd
ALTER FUNCTION public.boardreadyops_release_run_request_from_check_suite(bigint, text, text, timestamptz) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_release_run_request_from_check_suite(bigint, text, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_release_run_request_from_check_suite(bigint, text, text, timestamptz) TO boardreadyops_lifecycle, boardreadyops_admin;

-- +goose Down
DROP FUNCTION public.boardreadyops_release_run_request_from_check_suite(bigint, text, text, timestamptz);
