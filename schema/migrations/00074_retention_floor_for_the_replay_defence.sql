-- Jobs and body digests cannot be deleted younger than 72 hours by any login but a clock login
-- (docs/security.md, "The replay window").
--
-- boardreadyops_retention_delete, which lifecycle may call, accepted any period of a second or more
-- for completed jobs (and their inbox rows) and body digests. The 72-hour floor was only in
-- lifecycle's settings (pkg/retention), so a leaked lifecycle credential could take the retention
-- lease and delete every digest older than a second, and every captured body became replayable
-- under a fresh delivery id. The function now refuses a period under 72 hours for those two tables
-- unless the session's login is a member of boardreadyops_clock (load tests with
-- BOARDREADYOPS_RETENTION_ALLOW_SHORT run as one; superusers are members of every role), as the
-- audit trail's year is kept in the function (00027).
--
-- Only a function changes: no table lock; a previous release's lifecycle calls it unchanged.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_retention_delete(p_table text, p_owner text, p_older_than interval, p_batch integer DEFAULT 1000, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    v_cutoff timestamptz;
    v_runs uuid[];
    v_deleted bigint;
BEGIN
    IF p_older_than IS NULL OR p_older_than < interval '1 second' THEN
        RAISE EXCEPTION 'retention must be at least 1 second, got %', p_older_than USING ERRCODE = '22023';
    END IF;
    -- A completed job's inbox row and a body's digest are the replay defence (00019, 00073): no
    -- login may shorten them below GitHub's redelivery window, as settings.go refuses it (00074).
    -- Only a clock login (load tests' BOARDREADYOPS_RETENTION_ALLOW_SHORT) may.
    IF p_table IN ('control_plane_jobs', 'webhook_body_digests') AND p_older_than < interval '72 hours'
       AND NOT pg_catalog.pg_has_role(session_user, 'boardreadyops_clock', 'MEMBER') THEN
        RAISE EXCEPTION '% retention must be at least 72 hours (GitHub''s redelivery window), got %', p_table, p_older_than
            USING ERRCODE = '22023';
    END IF;
    IF p_batch IS NULL OR p_batch NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'batch must be between 1 and 10000, got %', p_batch USING ERRCODE = '22023';
    END IF;
    v_cutoff := v_now - p_older_than;
    PERFORM 1 FROM public.retention_leases l
    WHERE l.name = 'retention' AND l.owner = p_owner AND l.expires_at > v_now
    FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the retention lease is not held by %', p_owner USING ERRCODE = 'BR001';
    END IF;

    CASE p_table
    WHEN 'control_plane_jobs' THEN
        -- Deleting the inbox row cascades to its job. The ids are collected into an array, so
        -- that the delete looks each one up by primary key: a join with the batch would be
        -- planned (generic plan, unknown batch size) as a hash join over the whole table.
        DELETE FROM public.webhook_inbox i WHERE i.id = ANY (ARRAY(
            SELECT j.inbox_id FROM public.control_plane_jobs j
            WHERE j.status = 'completed' AND j.completed_at < v_cutoff
            ORDER BY j.completed_at
            LIMIT p_batch
            FOR UPDATE SKIP LOCKED));
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
    WHEN 'webhook_body_digests' THEN
        -- A digest is its body's replay defence (00019): it goes once it is older than the period
        -- and its delivery has left the inbox, so never before the inbox row's own retention.
        -- webhook_body_digests_received_at_idx (00019) gives the oldest first; the inbox's
        -- delivery_id key answers each NOT EXISTS. Ingest inserts digests ON CONFLICT DO NOTHING
        -- and never locks one: an insert of a body whose expired digest a batch is deleting
        -- waits for that batch, then stores the body as new.
        DELETE FROM public.webhook_body_digests d WHERE d.payload_sha256 = ANY (ARRAY(
            SELECT g.payload_sha256 FROM public.webhook_body_digests g
            WHERE g.received_at < v_cutoff
              AND NOT EXISTS (SELECT 1 FROM public.webhook_inbox i WHERE i.delivery_id = g.delivery_id)
            ORDER BY g.received_at
            LIMIT p_batch
            FOR UPDATE SKIP LOCKED));
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
    WHEN 'control_plane_outbox' THEN
        DELETE FROM public.control_plane_outbox d WHERE d.id = ANY (ARRAY(
            SELECT o.id FROM public.control_plane_outbox o
            WHERE o.status = 'completed' AND o.completed_at < v_cutoff
              AND EXISTS (SELECT 1 FROM public.release_runs r
                          WHERE r.id = o.release_run_id AND r.status IN ('succeeded', 'failed', 'cancelled'))
            ORDER BY o.completed_at
            LIMIT p_batch
            FOR UPDATE OF o SKIP LOCKED));
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
    WHEN 'release_runs' THEN
        -- Locking the runs first keeps new effects and attempts off them (inserting one takes
        -- FOR KEY SHARE on its run). Each later statement takes a new snapshot, and deletes a run
        -- only once nothing refers to it any more: an effect that appeared between the pick and
        -- the lock keeps its run.
        SELECT array_agg(d.id) INTO v_runs FROM (
            SELECT r.id FROM public.release_runs r
            WHERE r.status IN ('succeeded', 'failed', 'cancelled') AND r.completed_at < v_cutoff
              -- OFFSET 0 keeps this a probe of control_plane_outbox_effect_key per candidate
              -- run: as an anti join it could read the whole outbox for its few unfinished
              -- effects, once per batch (00061).
              AND NOT EXISTS (SELECT 1 FROM public.control_plane_outbox o
                              WHERE o.release_run_id = r.id AND o.status <> 'completed' OFFSET 0)
            ORDER BY r.completed_at
            LIMIT p_batch
            FOR UPDATE OF r SKIP LOCKED
        ) d;
        IF v_runs IS NULL THEN
            RETURN 0;
        END IF;
        DELETE FROM public.control_plane_outbox o
        WHERE o.release_run_id = ANY (v_runs) AND o.status = 'completed'
          AND NOT EXISTS (SELECT 1 FROM public.control_plane_outbox k
                          WHERE k.release_run_id = o.release_run_id AND k.status <> 'completed');
        DELETE FROM public.execution_attempts a
        WHERE a.release_run_id = ANY (v_runs)
          AND NOT EXISTS (SELECT 1 FROM public.control_plane_outbox o WHERE o.release_run_id = a.release_run_id);
        DELETE FROM public.release_runs r
        WHERE r.id = ANY (v_runs)
          AND NOT EXISTS (SELECT 1 FROM public.control_plane_outbox o WHERE o.release_run_id = r.id)
          AND NOT EXISTS (SELECT 1 FROM public.execution_attempts a WHERE a.release_run_id = r.id);
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
    WHEN 'control_plane_audit' THEN
        -- The audit trail proves what operators did: no login (the admin and lifecycle roles
        -- may call this function) can shorten it below a year.
        IF p_older_than < interval '365 days' THEN
            RAISE EXCEPTION 'audit retention must be at least 365 days, got %', p_older_than USING ERRCODE = '22023';
        END IF;
        PERFORM pg_catalog.set_config('boardreadyops.audit_retention', 'on', true);
        DELETE FROM public.control_plane_audit d WHERE d.id = ANY (ARRAY(
            SELECT a.id FROM public.control_plane_audit a
            WHERE a.occurred_at < v_cutoff
            ORDER BY a.occurred_at
            LIMIT p_batch));
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
        PERFORM pg_catalog.set_config('boardreadyops.audit_retention', '', true);
    ELSE
        RAISE EXCEPTION 'no retention for table %', p_table USING ERRCODE = '22023';
    END CASE;
    RETURN v_deleted;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_retention_delete(p_table text, p_owner text, p_older_than interval, p_batch integer DEFAULT 1000, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    v_cutoff timestamptz;
    v_runs uuid[];
    v_deleted bigint;
BEGIN
    IF p_older_than IS NULL OR p_older_than < interval '1 second' THEN
        RAISE EXCEPTION 'retention must be at least 1 second, got %', p_older_than USING ERRCODE = '22023';
    END IF;
    IF p_batch IS NULL OR p_batch NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'batch must be between 1 and 10000, got %', p_batch USING ERRCODE = '22023';
    END IF;
    v_cutoff := v_now - p_older_than;
    PERFORM 1 FROM public.retention_leases l
    WHERE l.name = 'retention' AND l.owner = p_owner AND l.expires_at > v_now
    FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the retention lease is not held by %', p_owner USING ERRCODE = 'BR001';
    END IF;

    CASE p_table
    WHEN 'control_plane_jobs' THEN
        -- Deleting the inbox row cascades to its job. The ids are collected into an array, so
        -- that the delete looks each one up by primary key: a join with the batch would be
        -- planned (generic plan, unknown batch size) as a hash join over the whole table.
        DELETE FROM public.webhook_inbox i WHERE i.id = ANY (ARRAY(
            SELECT j.inbox_id FROM public.control_plane_jobs j
            WHERE j.status = 'completed' AND j.completed_at < v_cutoff
            ORDER BY j.completed_at
            LIMIT p_batch
            FOR UPDATE SKIP LOCKED));
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
    WHEN 'webhook_body_digests' THEN
        -- A digest is its body's replay defence (00019): it goes once it is older than the period
        -- and its delivery has left the inbox, so never before the inbox row's own retention.
        -- webhook_body_digests_received_at_idx (00019) gives the oldest first; the inbox's
        -- delivery_id key answers each NOT EXISTS. Ingest inserts digests ON CONFLICT DO NOTHING
        -- and never locks one: an insert of a body whose expired digest a batch is deleting
        -- waits for that batch, then stores the body as new.
        DELETE FROM public.webhook_body_digests d WHERE d.payload_sha256 = ANY (ARRAY(
            SELECT g.payload_sha256 FROM public.webhook_body_digests g
            WHERE g.received_at < v_cutoff
              AND NOT EXISTS (SELECT 1 FROM public.webhook_inbox i WHERE i.delivery_id = g.delivery_id)
            ORDER BY g.received_at
            LIMIT p_batch
            FOR UPDATE SKIP LOCKED));
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
    WHEN 'control_plane_outbox' THEN
        DELETE FROM public.control_plane_outbox d WHERE d.id = ANY (ARRAY(
            SELECT o.id FROM public.control_plane_outbox o
            WHERE o.status = 'completed' AND o.completed_at < v_cutoff
              AND EXISTS (SELECT 1 FROM public.release_runs r
                          WHERE r.id = o.release_run_id AND r.status IN ('succeeded', 'failed', 'cancelled'))
            ORDER BY o.completed_at
            LIMIT p_batch
            FOR UPDATE OF o SKIP LOCKED));
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
    WHEN 'release_runs' THEN
        -- Locking the runs first keeps new effects and attempts off them (inserting one takes
        -- FOR KEY SHARE on its run). Each later statement takes a new snapshot, and deletes a run
        -- only once nothing refers to it any more: an effect that appeared between the pick and
        -- the lock keeps its run.
        SELECT array_agg(d.id) INTO v_runs FROM (
            SELECT r.id FROM public.release_runs r
            WHERE r.status IN ('succeeded', 'failed', 'cancelled') AND r.completed_at < v_cutoff
              -- OFFSET 0 keeps this a probe of control_plane_outbox_effect_key per candidate
              -- run: as an anti join it could read the whole outbox for its few unfinished
              -- effects, once per batch (00061).
              AND NOT EXISTS (SELECT 1 FROM public.control_plane_outbox o
                              WHERE o.release_run_id = r.id AND o.status <> 'completed' OFFSET 0)
            ORDER BY r.completed_at
            LIMIT p_batch
            FOR UPDATE OF r SKIP LOCKED
        ) d;
        IF v_runs IS NULL THEN
            RETURN 0;
        END IF;
        DELETE FROM public.control_plane_outbox o
        WHERE o.release_run_id = ANY (v_runs) AND o.status = 'completed'
          AND NOT EXISTS (SELECT 1 FROM public.control_plane_outbox k
                          WHERE k.release_run_id = o.release_run_id AND k.status <> 'completed');
        DELETE FROM public.execution_attempts a
        WHERE a.release_run_id = ANY (v_runs)
          AND NOT EXISTS (SELECT 1 FROM public.control_plane_outbox o WHERE o.release_run_id = a.release_run_id);
        DELETE FROM public.release_runs r
        WHERE r.id = ANY (v_runs)
          AND NOT EXISTS (SELECT 1 FROM public.control_plane_outbox o WHERE o.release_run_id = r.id)
          AND NOT EXISTS (SELECT 1 FROM public.execution_attempts a WHERE a.release_run_id = r.id);
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
    WHEN 'control_plane_audit' THEN
        -- The audit trail proves what operators did: no login (the admin and lifecycle roles
        -- may call this function) can shorten it below a year.
        IF p_older_than < interval '365 days' THEN
            RAISE EXCEPTION 'audit retention must be at least 365 days, got %', p_older_than USING ERRCODE = '22023';
        END IF;
        PERFORM pg_catalog.set_config('boardreadyops.audit_retention', 'on', true);
        DELETE FROM public.control_plane_audit d WHERE d.id = ANY (ARRAY(
            SELECT a.id FROM public.control_plane_audit a
            WHERE a.occurred_at < v_cutoff
            ORDER BY a.occurred_at
            LIMIT p_batch));
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
        PERFORM pg_catalog.set_config('boardreadyops.audit_retention', '', true);
    ELSE
        RAISE EXCEPTION 'no retention for table %', p_table USING ERRCODE = '22023';
    END CASE;
    RETURN v_deleted;
END;
$$;
-- +goose StatementEnd
