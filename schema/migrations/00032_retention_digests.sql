-- Retention sweeps webhook_body_digests (docs/operations.md "Retention", docs/security.md "The
-- replay window").
--
-- The digests of migration 00019 were swept only by hand (boardreadyops_webhook_sweep_digests, an
-- admin function): in a 600,000-webhook soak every table stayed flat with retention on but this
-- one, which grew by 54.6 MiB (docs/performance.md "Soak").
--
-- boardreadyops_retention_delete gains the class webhook_body_digests: digests received before the
-- cutoff whose delivery is no longer in the inbox, the rule of boardreadyops_webhook_sweep_digests,
-- in batches under the retention lease like every other class. Its floor is the other classes'
-- (1 second); the rule that the period is not shorter than the replay window (GitHub's 3-day
-- redelivery window, and the jobs period) is lifecycle's and brops' configuration check
-- (pkg/retention Settings.Validate), lifted below 72h only by BOARDREADYOPS_RETENTION_ALLOW_SHORT,
-- as for the jobs period.
--
-- No new index: webhook_body_digests_received_at_idx (00019) is exactly the one this delete needs
-- (oldest first, a range below the cutoff), and webhook_inbox_delivery_id_key answers the NOT
-- EXISTS; pkg/retention TestDeletesUseTheirIndexes shows both in the plan. A second index on the
-- digests would only slow ingest, which inserts one digest per stored delivery.
--
-- boardreadyops_retention_status gains the argument p_digests, last and defaulting to NULL
-- (never), and a row for the class: the previous release's binaries call it with six arguments
-- and get the digests row as "never". A function's arguments cannot change in place, so it is
-- dropped and created again with the same grants.
--
-- Locks: CREATE OR REPLACE FUNCTION, DROP and CREATE FUNCTION; nothing on the tables.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_retention_delete(p_table text, p_owner text, p_older_than interval,
    p_batch integer DEFAULT 1000, p_now timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
              AND NOT EXISTS (SELECT 1 FROM public.control_plane_outbox o
                              WHERE o.release_run_id = r.id AND o.status <> 'completed')
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

DROP FUNCTION public.boardreadyops_retention_status(interval, interval, interval, interval, boolean, timestamptz);
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_retention_status(p_jobs interval, p_effects interval, p_release_runs interval,
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
ALTER FUNCTION public.boardreadyops_retention_status(interval, interval, interval, interval, boolean, timestamptz, interval) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_retention_status(interval, interval, interval, interval, boolean, timestamptz, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_retention_status(interval, interval, interval, interval, boolean, timestamptz, interval) TO boardreadyops_lifecycle, boardreadyops_admin;

-- +goose Down
-- The definitions of migration 00027, word for word.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_retention_delete(p_table text, p_owner text, p_older_than interval,
    p_batch integer DEFAULT 1000, p_now timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
              AND NOT EXISTS (SELECT 1 FROM public.control_plane_outbox o
                              WHERE o.release_run_id = r.id AND o.status <> 'completed')
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

DROP FUNCTION public.boardreadyops_retention_status(interval, interval, interval, interval, boolean, timestamptz, interval);
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_retention_status(p_jobs interval, p_effects interval, p_release_runs interval,
    p_audit interval, p_count boolean DEFAULT true, p_now timestamptz DEFAULT NULL)
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
ALTER FUNCTION public.boardreadyops_retention_status(interval, interval, interval, interval, boolean, timestamptz) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_retention_status(interval, interval, interval, interval, boolean, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_retention_status(interval, interval, interval, interval, boolean, timestamptz) TO boardreadyops_lifecycle, boardreadyops_admin;
