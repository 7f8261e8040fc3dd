-- The retention gauges' oldest finishable run is found by a probe per run.
--
-- Every lifecycle replica calls boardreadyops_retention_status(…, p_count => false) every 10 s
-- (pkg/retention Service.observe, a third of the lease) for the oldest-expired gauges. Its
-- release_runs row takes the oldest finished run with no unfinished effect. That NOT EXISTS was
-- planned as an anti join against the outbox; with few unfinished effects, as in service, the
-- planner materialized a sequential scan of the whole outbox to find them, and read it at every
-- call: on a scratch database of 10,000 runs (0.2 % unfinished) and 20,000 effects, 607 buffers
-- (the outbox's 604 pages) for one row, against 7 with the subquery kept as a probe. The query has
-- no parameter, so custom and generic plans alike had it. Migration 00061 fixed the same subquery in
-- boardreadyops_retention_delete's pick.
--
-- OFFSET 0 keeps the subquery from being pulled up into a join: the runs are read in
-- release_runs_completed_idx's order, each probed through control_plane_outbox_effect_key, until
-- the first one found. The count (p_count, `brops retention status`) is unchanged. Nothing else
-- changes; the Down section restores 00032's definition.
--
-- Locks: CREATE OR REPLACE FUNCTION; nothing on the tables.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_retention_status(p_jobs interval, p_effects interval, p_release_runs interval,
    p_audit interval, p_count boolean DEFAULT true, p_now timestamptz DEFAULT NULL, p_digests interval DEFAULT NULL)
RETURNS TABLE(table_name text, retention interval, expired bigint, oldest_expired_at timestamptz, oldest_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    v_cutoff timestamptz;
BEGIN
    -- A NULL period is "never": the row says so with NULL expired and oldest_expired_at.
    table_name := 'control_plane_jobs'; retention := p_jobs;
    v_cutoff := v_now - p_jobs;
    SELECT min(j.completed_at) INTO oldest_at FROM public.control_plane_jobs j WHERE j.status = 'completed';
    oldest_expired_at := CASE WHEN oldest_at < v_cutoff THEN oldest_at END;
    expired := CASE WHEN p_count AND v_cutoff IS NOT NULL THEN
        (SELECT count(*) FROM public.control_plane_jobs j WHERE j.status = 'completed' AND j.completed_at < v_cutoff) END;
    RETURN NEXT;

    -- oldest_at is the oldest digest at all (its delivery may still be in the inbox: a minimum of
    -- the index); the oldest expired one is the first past the cutoff whose delivery has left it.
    table_name := 'webhook_body_digests'; retention := p_digests;
    v_cutoff := v_now - p_digests;
    SELECT min(g.received_at) INTO oldest_at FROM public.webhook_body_digests g;
    oldest_expired_at := NULL;
    IF v_cutoff IS NOT NULL THEN
        SELECT g.received_at INTO oldest_expired_at FROM public.webhook_body_digests g
        WHERE g.received_at < v_cutoff
          AND NOT EXISTS (SELECT 1 FROM public.webhook_inbox i WHERE i.delivery_id = g.delivery_id)
        ORDER BY g.received_at LIMIT 1;
    END IF;
    expired := CASE WHEN p_count AND v_cutoff IS NOT NULL THEN
        (SELECT count(*) FROM public.webhook_body_digests g
         WHERE g.received_at < v_cutoff
           AND NOT EXISTS (SELECT 1 FROM public.webhook_inbox i WHERE i.delivery_id = g.delivery_id)) END;
    RETURN NEXT;

    table_name := 'control_plane_outbox'; retention := p_effects;
    v_cutoff := v_now - p_effects;
    SELECT o.completed_at INTO oldest_at FROM public.control_plane_outbox o
    WHERE o.status = 'completed'
      AND EXISTS (SELECT 1 FROM public.release_runs r WHERE r.id = o.release_run_id AND r.status IN ('succeeded', 'failed', 'cancelled'))
    ORDER BY o.completed_at LIMIT 1;
    IF NOT FOUND THEN oldest_at := NULL; END IF;
    oldest_expired_at := CASE WHEN oldest_at < v_cutoff THEN oldest_at END;
    expired := CASE WHEN p_count AND v_cutoff IS NOT NULL THEN
        (SELECT count(*) FROM public.control_plane_outbox o
         WHERE o.status = 'completed' AND o.completed_at < v_cutoff
           AND EXISTS (SELECT 1 FROM public.release_runs r WHERE r.id = o.release_run_id AND r.status IN ('succeeded', 'failed', 'cancelled'))) END;
    RETURN NEXT;

    table_name := 'release_runs'; retention := p_release_runs;
    v_cutoff := v_now - p_release_runs;
    -- OFFSET 0 keeps the NOT EXISTS a probe of control_plane_outbox_effect_key per run, in
    -- release_runs_completed_idx's order until the first run that has none unfinished (00062).
    SELECT r.completed_at INTO oldest_at FROM public.release_runs r
    WHERE r.status IN ('succeeded', 'failed', 'cancelled')
      AND NOT EXISTS (SELECT 1 FROM public.control_plane_outbox o WHERE o.release_run_id = r.id AND o.status <> 'completed' OFFSET 0)
    ORDER BY r.completed_at LIMIT 1;
    IF NOT FOUND THEN oldest_at := NULL; END IF;
    oldest_expired_at := CASE WHEN oldest_at < v_cutoff THEN oldest_at END;
    expired := CASE WHEN p_count AND v_cutoff IS NOT NULL THEN
        (SELECT count(*) FROM public.release_runs r
         WHERE r.status IN ('succeeded', 'failed', 'cancelled') AND r.completed_at < v_cutoff
           AND NOT EXISTS (SELECT 1 FROM public.control_plane_outbox o WHERE o.release_run_id = r.id AND o.status <> 'completed')) END;
    RETURN NEXT;

    table_name := 'control_plane_audit'; retention := p_audit;
    v_cutoff := v_now - p_audit;
    SELECT min(a.occurred_at) INTO oldest_at FROM public.control_plane_audit a;
    oldest_expired_at := CASE WHEN oldest_at < v_cutoff THEN oldest_at END;
    expired := CASE WHEN p_count AND v_cutoff IS NOT NULL THEN
        (SELECT count(*) FROM public.control_plane_audit a WHERE a.occurred_at < v_cutoff) END;
    RETURN NEXT;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_retention_status(p_jobs interval, p_effects interval, p_release_runs interval,
    p_audit interval, p_count boolean DEFAULT true, p_now timestamptz DEFAULT NULL, p_digests interval DEFAULT NULL)
RETURNS TABLE(table_name text, retention interval, expired bigint, oldest_expired_at timestamptz, oldest_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    v_cutoff timestamptz;
BEGIN
    -- A NULL period is "never": the row says so with NULL expired and oldest_expired_at.
    table_name := 'control_plane_jobs'; retention := p_jobs;
    v_cutoff := v_now - p_jobs;
    SELECT min(j.completed_at) INTO oldest_at FROM public.control_plane_jobs j WHERE j.status = 'completed';
    oldest_expired_at := CASE WHEN oldest_at < v_cutoff THEN oldest_at END;
    expired := CASE WHEN p_count AND v_cutoff IS NOT NULL THEN
        (SELECT count(*) FROM public.control_plane_jobs j WHERE j.status = 'completed' AND j.completed_at < v_cutoff) END;
    RETURN NEXT;

    -- oldest_at is the oldest digest at all (its delivery may still be in the inbox: a minimum of
    -- the index); the oldest expired one is the first past the cutoff whose delivery has left it.
    table_name := 'webhook_body_digests'; retention := p_digests;
    v_cutoff := v_now - p_digests;
    SELECT min(g.received_at) INTO oldest_at FROM public.webhook_body_digests g;
    oldest_expired_at := NULL;
    IF v_cutoff IS NOT NULL THEN
        SELECT g.received_at INTO oldest_expired_at FROM public.webhook_body_digests g
        WHERE g.received_at < v_cutoff
          AND NOT EXISTS (SELECT 1 FROM public.webhook_inbox i WHERE i.delivery_id = g.delivery_id)
        ORDER BY g.received_at LIMIT 1;
    END IF;
    expired := CASE WHEN p_count AND v_cutoff IS NOT NULL THEN
        (SELECT count(*) FROM public.webhook_body_digests g
         WHERE g.received_at < v_cutoff
           AND NOT EXISTS (SELECT 1 FROM public.webhook_inbox i WHERE i.delivery_id = g.delivery_id)) END;
    RETURN NEXT;

    table_name := 'control_plane_outbox'; retention := p_effects;
    v_cutoff := v_now - p_effects;
    SELECT o.completed_at INTO oldest_at FROM public.control_plane_outbox o
    WHERE o.status = 'completed'
      AND EXISTS (SELECT 1 FROM public.release_runs r WHERE r.id = o.release_run_id AND r.status IN ('succeeded', 'failed', 'cancelled'))
    ORDER BY o.completed_at LIMIT 1;
    IF NOT FOUND THEN oldest_at := NULL; END IF;
    oldest_expired_at := CASE WHEN oldest_at < v_cutoff THEN oldest_at END;
    expired := CASE WHEN p_count AND v_cutoff IS NOT NULL THEN
        (SELECT count(*) FROM public.control_plane_outbox o
         WHERE o.status = 'completed' AND o.completed_at < v_cutoff
           AND EXISTS (SELECT 1 FROM public.release_runs r WHERE r.id = o.release_run_id AND r.status IN ('succeeded', 'failed', 'cancelled'))) END;
    RETURN NEXT;

    table_name := 'release_runs'; retention := p_release_runs;
    v_cutoff := v_now - p_release_runs;
    SELECT r.completed_at INTO oldest_at FROM public.release_runs r
    WHERE r.status IN ('succeeded', 'failed', 'cancelled')
      AND NOT EXISTS (SELECT 1 FROM public.control_plane_outbox o WHERE o.release_run_id = r.id AND o.status <> 'completed')
    ORDER BY r.completed_at LIMIT 1;
    IF NOT FOUND THEN oldest_at := NULL; END IF;
    oldest_expired_at := CASE WHEN oldest_at < v_cutoff THEN oldest_at END;
    expired := CASE WHEN p_count AND v_cutoff IS NOT NULL THEN
        (SELECT count(*) FROM public.release_runs r
         WHERE r.status IN ('succeeded', 'failed', 'cancelled') AND r.completed_at < v_cutoff
           AND NOT EXISTS (SELECT 1 FROM public.control_plane_outbox o WHERE o.release_run_id = r.id AND o.status <> 'completed')) END;
    RETURN NEXT;

    table_name := 'control_plane_audit'; retention := p_audit;
    v_cutoff := v_now - p_audit;
    SELECT min(a.occurred_at) INTO oldest_at FROM public.control_plane_audit a;
    oldest_expired_at := CASE WHEN oldest_at < v_cutoff THEN oldest_at END;
    expired := CASE WHEN p_count AND v_cutoff IS NOT NULL THEN
        (SELECT count(*) FROM public.control_plane_audit a WHERE a.occurred_at < v_cutoff) END;
    RETURN NEXT;
END;
$$;
-- +goose StatementEnd
