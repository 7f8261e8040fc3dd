-- The outbox's oldest-available age leaves out what no claim takes on purpose: dispatches held by
-- a dispatch pause, and effects of an installation GitHub rate-limited, created during its block
-- (docs/operations.md, "Runbook: oldest available age or claim latency high").
--
-- boardreadyops_outbox_stats gave the age of the oldest due available effect, and
-- boardreadyops_outbox_oldest_available_effect_age_seconds comes from it. The claims skip paused
-- dispatches and blocked installations' effects, so BoardReadyOpsOutboxOldestEffectAge (> 30 s for
-- 5 minutes) fired through every pause longer than that and every block during which an
-- installation's work arrived, where its runbook's remedy (more dispatchers) changes nothing. Those
-- have alerts of their own (BoardReadyOpsReleaseRunsStale, BoardReadyOpsGitHubRateLimited). The
-- age is now that of the oldest due effect a claim can take; the counts (available, due) are as
-- before. A paced installation's backlog still counts: its work waits for the pace, which is
-- capacity the operator may want to see.
--
-- Only a function changes: no table lock.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_stats(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(available bigint, due bigint, leased bigint, retrying bigint, dead_letter bigint, reconciliation_required bigint, oldest_available_age_seconds double precision)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT
        a.available,
        a.due,
        (SELECT count(*) FROM public.control_plane_outbox WHERE status = 'leased'),
        a.retrying,
        (SELECT count(*) FROM public.control_plane_outbox WHERE status = 'dead_letter'),
        (SELECT count(*) FROM public.control_plane_outbox WHERE status = 'reconciliation_required'),
        coalesce(extract(epoch FROM n.now - a.oldest_due)::double precision, 0)
    -- The clock read once (OFFSET 0 keeps the subquery from being pulled up into the filters).
    FROM (SELECT public.boardreadyops_clock_now(p_now) AS now OFFSET 0) n
    -- What no claim takes while it lasts (00071), read once: the installations GitHub blocked, and
    -- the dispatch pauses (installation 0: every installation). Few rows each.
    CROSS JOIN LATERAL (
        SELECT coalesce(array_agg(l.installation_id), '{}') AS ids
        FROM public.github_installation_limits l WHERE l.blocked_until > n.now
    ) b
    CROSS JOIN LATERAL (
        SELECT coalesce(array_agg(p.installation_id), '{}') AS ids, coalesce(bool_or(p.installation_id = 0), false) AS every
        FROM public.dispatch_pauses p
    ) p
    CROSS JOIN LATERAL (
        SELECT count(*) AS available,
               count(*) FILTER (WHERE o.available_at <= n.now) AS due,
               count(*) FILTER (WHERE o.attempts > 0) AS retrying,
               -- The oldest due effect a claim can take: a paused dispatch, or an effect of a
               -- blocked installation created during its block, waits on purpose and has alerts
               -- of its own (the stale-run and rate-limit alerts); counted, it made the
               -- oldest-age alert fire through every pause and block.
               min(o.available_at) FILTER (WHERE o.available_at <= n.now AND o.installation_id <> ALL (b.ids)
                   AND NOT (o.effect_type = 'github.workflow.dispatch' AND (p.every OR o.installation_id = ANY (p.ids)))) AS oldest_due
        FROM public.control_plane_outbox o
        WHERE o.status = 'available'
    ) a;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_stats(p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(available bigint, due bigint, leased bigint, retrying bigint, dead_letter bigint, reconciliation_required bigint, oldest_available_age_seconds double precision)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT
        a.available,
        a.due,
        (SELECT count(*) FROM public.control_plane_outbox WHERE status = 'leased'),
        a.retrying,
        (SELECT count(*) FROM public.control_plane_outbox WHERE status = 'dead_letter'),
        (SELECT count(*) FROM public.control_plane_outbox WHERE status = 'reconciliation_required'),
        coalesce(extract(epoch FROM n.now - a.oldest_due)::double precision, 0)
    -- The clock read once (OFFSET 0 keeps the subquery from being pulled up into the filters).
    FROM (SELECT public.boardreadyops_clock_now(p_now) AS now OFFSET 0) n
    CROSS JOIN LATERAL (
        SELECT count(*) AS available,
               count(*) FILTER (WHERE o.available_at <= n.now) AS due,
               count(*) FILTER (WHERE o.attempts > 0) AS retrying,
               min(o.available_at) FILTER (WHERE o.available_at <= n.now) AS oldest_due
        FROM public.control_plane_outbox o
        WHERE o.status = 'available'
    ) a;
$$;
-- +goose StatementEnd
