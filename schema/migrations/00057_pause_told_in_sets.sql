-- A dispatch pause is told on the check runs it holds with set-based calls (issue 25,
-- docs/performance.md "Check-run updates and release runs in sets").
--
-- boardreadyops_release_run_tell_pause (00028) enqueued each waiting run's check-run update with
-- one call of boardreadyops_release_run_enqueue_check_run, in one transaction however many runs
-- the pause holds. Since 00055 that single-run call goes through the set-based builder's plan,
-- about 0.5 ms of PostgreSQL's CPU per run. The runs are now told with calls of at most 5,000 runs
-- each to boardreadyops_release_run_enqueue_check_runs: the same updates, the same notices, the
-- runs locked in id order as before, the same count returned. The runs are locked before the
-- pauses are read, so a pause committed while this one waited for them is seen by every run (the
-- single-run loop read it run by run, after the first run it waited for).
--
-- Only a function replaced: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_tell_pause(p_scope bigint, p_resumed boolean, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now     timestamptz := public.boardreadyops_clock_now(p_now);
    v_runs    uuid[];
    v_notices text[];
    v_count   integer;
    v_from    integer := 1;
    v_n       integer;
BEGIN
    -- The runs waiting for their workflow dispatch in the pause's scope that already have a
    -- check run (one range of release_runs_status_created_idx), locked in id order so that two
    -- pauses lock them in the same order, before the pauses are read: a pause or resume that
    -- held some of them has committed by then, and the next statement sees it.
    PERFORM FROM public.release_runs x
    WHERE x.status = 'dispatching' AND x.check_run_id IS NOT NULL AND (p_scope = 0 OR x.installation_id = p_scope)
    ORDER BY x.id
    FOR UPDATE;
    -- Each run's notice from the pauses now in force; a resume skips the runs another pause (the
    -- global one, or the installation's) still holds.
    SELECT coalesce(array_agg(t.id ORDER BY t.id), '{}'), coalesce(array_agg(t.notice ORDER BY t.id), '{}')
    INTO v_runs, v_notices
    FROM (
        SELECT x.id, p.reason,
               CASE WHEN p.reason IS NULL
                    THEN 'Workflow dispatches resumed: the release workflow is being started.'
                    ELSE format('The release is paused: an operator paused workflow dispatches (%s). The release workflow starts when they resume.', p.reason)
               END AS notice
        FROM public.release_runs x
        -- OFFSET 0: the reason is read once per run, not once per use.
        CROSS JOIN LATERAL (SELECT public.boardreadyops_outbox_dispatch_pause_reason(x.installation_id) AS reason OFFSET 0) p
        WHERE x.status = 'dispatching' AND x.check_run_id IS NOT NULL
          AND (p_scope = 0 OR x.installation_id = p_scope)
    ) t
    WHERE (p_resumed AND t.reason IS NOT NULL) IS NOT TRUE;
    v_count := cardinality(v_runs);
    WHILE v_from <= v_count LOOP
        v_n := least(5000, v_count - v_from + 1);
        PERFORM FROM public.boardreadyops_release_run_enqueue_check_runs(v_runs[v_from:v_from + v_n - 1],
            array_fill('dispatching'::text, ARRAY[v_n]), v_notices[v_from:v_from + v_n - 1], array_fill(NULL::text, ARRAY[v_n]), v_now);
        v_from := v_from + v_n;
    END LOOP;
    IF v_count > 0 THEN
        PERFORM pg_notify('boardreadyops_outbox', '');
    END IF;
    RETURN v_count;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_tell_pause(p_scope bigint, p_resumed boolean, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now    timestamptz := public.boardreadyops_clock_now(p_now);
    v_count  integer := 0;
    v_reason text;
    r        record;
BEGIN
    -- The runs waiting for their workflow dispatch in the pause's scope that already have a
    -- check run (one range of release_runs_status_created_idx), in id order so that two pauses
    -- lock them in the same order.
    FOR r IN
        SELECT x.id, x.installation_id FROM public.release_runs x
        WHERE x.status = 'dispatching' AND x.check_run_id IS NOT NULL
          AND (p_scope = 0 OR x.installation_id = p_scope)
        ORDER BY x.id
    LOOP
        v_reason := public.boardreadyops_outbox_dispatch_pause_reason(r.installation_id);
        IF p_resumed AND v_reason IS NOT NULL THEN
            CONTINUE; -- another pause (the global one, or the installation's) still holds it
        END IF;
        PERFORM public.boardreadyops_release_run_enqueue_check_run(r.id, 'dispatching',
            CASE WHEN v_reason IS NULL
                 THEN 'Workflow dispatches resumed: the release workflow is being started.'
                 ELSE format('The release is paused: an operator paused workflow dispatches (%s). The release workflow starts when they resume.', v_reason)
            END, NULL, v_now);
        v_count := v_count + 1;
    END LOOP;
    IF v_count > 0 THEN
        PERFORM pg_notify('boardreadyops_outbox', '');
    END IF;
    RETURN v_count;
END;
$$;
-- +goose StatementEnd
