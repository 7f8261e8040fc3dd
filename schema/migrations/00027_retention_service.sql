-- Retention as a maintenance service (docs/operations.md "Retention").
--
-- One lifecycle replica at a time deletes what is past its retention, in bounded batches:
--
-- retention_leases / boardreadyops_retention_lease_acquire, _release
--     The leader lease. A row, not a session advisory lock, so that it works through a
--     transaction-pooling PgBouncer (docs/operations.md "Connection poolers"). The holder renews
--     it well before it expires; a replica that stops releases it, one that dies loses it when it
--     expires. Either way another replica's next acquire takes over.
-- boardreadyops_retention_delete(table, owner, older_than, batch)
--     Deletes one batch of one table class and returns how many rows (of that table) went:
--       control_plane_jobs   completed jobs completed before the cutoff, with their inbox rows
--                            (deleting the inbox row cascades to the job);
--       control_plane_outbox completed effects completed before the cutoff whose release run is
--                            terminal (an effect a running release still refers to stays);
--       release_runs         terminal runs completed before the cutoff that have no effect left in
--                            any state but completed, with their execution attempts and effects;
--       control_plane_audit  audit rows that occurred before the cutoff (off unless configured;
--                            never less than 365 days, whoever calls).
--     Never deleted: dead-letter jobs, dead-letter and reconciliation_required effects, a run
--     that still has one, anything of a run that is not terminal. Each batch first locks the
--     lease row FOR SHARE, so a batch runs only while its caller holds the lease and a takeover
--     waits for the batch in flight; the rows are picked FOR UPDATE SKIP LOCKED and are all in
--     states the claims (… WHERE status = 'available' FOR UPDATE SKIP LOCKED) never lock, so a
--     claim never waits for a batch, nor a batch for a claim.
-- boardreadyops_retention_status(periods…, count)
--     Per table class: the period, how many rows are past it (when asked: a count reads the
--     expired rows' index entries), the oldest past it and the oldest deletable row at all.
-- boardreadyops_retention_sweep (00003) keeps its arguments and results; its deletes look the
--     rows up by primary key instead of hashing the whole inbox and outbox.
-- boardreadyops_retention_index_bloat()
--     The partial claim and lease indexes' size against the size their live entries need
--     (pg_class.reltuples, kept by VACUUM and ANALYZE): the gate of brops retention reindex.
--
-- control_plane_audit stays append-only: its trigger now lets a DELETE through only inside
-- boardreadyops_retention_delete (a transaction-local setting that function sets, checked
-- together with current_user being the schema owner, which only that SECURITY DEFINER function
-- is for the services and brops). UPDATE and TRUNCATE are refused as before.
--
-- Locks: CREATE TABLE of a new table, CREATE OR REPLACE FUNCTION; nothing on the hot tables.
-- New functions follow the function rules (docs/operations.md, "Rules for a new function").

-- +goose Up
CREATE TABLE public.retention_leases (
    name text PRIMARY KEY CHECK (name = 'retention'),
    owner text NOT NULL CHECK (length(btrim(owner)) BETWEEN 1 AND 200),
    acquired_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
GRANT SELECT ON public.retention_leases TO boardreadyops_admin;

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_retention_lease_acquire(p_owner text, p_ttl interval, p_now timestamptz DEFAULT NULL)
RETURNS TABLE(acquired boolean, holder text, held_until timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_owner IS NULL OR length(btrim(p_owner)) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'lease owner must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    IF p_ttl IS NULL OR p_ttl < interval '1 second' OR p_ttl > interval '1 hour' THEN
        RAISE EXCEPTION 'lease must be from 1 second to 1 hour, got %', p_ttl USING ERRCODE = '22023';
    END IF;
    INSERT INTO public.retention_leases AS l (name, owner, acquired_at, expires_at)
    VALUES ('retention', p_owner, v_now, v_now + p_ttl)
    ON CONFLICT (name) DO UPDATE
        SET owner = EXCLUDED.owner,
            acquired_at = CASE WHEN l.owner = EXCLUDED.owner THEN l.acquired_at ELSE EXCLUDED.acquired_at END,
            expires_at = EXCLUDED.expires_at
        WHERE l.owner = EXCLUDED.owner OR l.expires_at <= v_now;
    RETURN QUERY SELECT l.owner = p_owner, l.owner, l.expires_at FROM public.retention_leases l WHERE l.name = 'retention';
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_retention_lease_release(p_owner text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM public.retention_leases WHERE name = 'retention' AND owner = p_owner;
    RETURN FOUND;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_retention_delete(p_table text, p_owner text, p_older_than interval,
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

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_retention_index_bloat()
RETURNS TABLE(index_name text, table_name text, size_bytes bigint, live_entries bigint, needed_bytes bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    -- A B-tree entry is an 8-byte tuple header, its keys MAXALIGNed and a 4-byte line pointer;
    -- leaf pages are filled to 90 % by a build, plus the meta page and one root. Every key here
    -- is fixed-width (timestamptz, bigint). reltuples is -1 before the first VACUUM or ANALYZE:
    -- live_entries and needed_bytes are then NULL (unknown, never a reason to rebuild).
    SELECT c.relname::text, t.relname::text, pg_catalog.pg_relation_size(c.oid),
           CASE WHEN c.reltuples >= 0 THEN c.reltuples::bigint END,
           CASE WHEN c.reltuples >= 0 THEN
               (2 + ceil(c.reltuples * (8 + ((k.width + 7) / 8) * 8 + 4) / ((current_setting('block_size')::int - 24) * 0.9)))::bigint
               * current_setting('block_size')::int END
    FROM pg_catalog.pg_class c
    JOIN pg_catalog.pg_index i ON i.indexrelid = c.oid
    JOIN pg_catalog.pg_class t ON t.oid = i.indrelid
    CROSS JOIN LATERAL (SELECT sum(ty.typlen)::int AS width FROM pg_catalog.pg_attribute a
                        JOIN pg_catalog.pg_type ty ON ty.oid = a.atttypid
                        WHERE a.attrelid = c.oid AND a.attnum > 0) k
    WHERE c.relnamespace = 'public'::regnamespace
      AND c.relname IN ('control_plane_jobs_claim_idx', 'control_plane_jobs_lease_idx',
                        'control_plane_outbox_claim_idx', 'control_plane_outbox_lease_idx')
    ORDER BY c.relname;
$$;
-- +goose StatementEnd

-- The older sweep (00003, kept for scripts): the same two deletes, the ids collected into an
-- array so that each is looked up by primary key. As a join with its batch, the generic plan (an
-- unknown batch size) read the whole inbox and outbox into a hash; its jobs half also had no
-- index (now control_plane_jobs_completed_idx, 00026).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_retention_sweep(p_older_than interval, p_batch integer DEFAULT 1000, p_now timestamptz DEFAULT NULL)
RETURNS TABLE(outbox_deleted bigint, jobs_deleted bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_cutoff timestamptz := public.boardreadyops_clock_now(p_now) - p_older_than;
    v_outbox bigint;
    v_jobs bigint;
BEGIN
    IF p_older_than IS NULL OR p_older_than < interval '1 day' THEN
        RAISE EXCEPTION 'retention must be at least 1 day, got %', p_older_than USING ERRCODE = '22023';
    END IF;
    IF p_batch IS NULL OR p_batch NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'batch must be between 1 and 100000, got %', p_batch USING ERRCODE = '22023';
    END IF;
    DELETE FROM public.control_plane_outbox d WHERE d.id = ANY (ARRAY(
        SELECT o.id FROM public.control_plane_outbox o
        WHERE o.status = 'completed' AND o.completed_at < v_cutoff
        ORDER BY o.completed_at
        LIMIT p_batch
        FOR UPDATE SKIP LOCKED));
    GET DIAGNOSTICS v_outbox = ROW_COUNT;

    -- Deleting the inbox row cascades to its job.
    DELETE FROM public.webhook_inbox i WHERE i.id = ANY (ARRAY(
        SELECT j.inbox_id FROM public.control_plane_jobs j
        WHERE j.status = 'completed' AND j.completed_at < v_cutoff
        ORDER BY j.completed_at
        LIMIT p_batch
        FOR UPDATE SKIP LOCKED));
    GET DIAGNOSTICS v_jobs = ROW_COUNT;

    RETURN QUERY SELECT v_outbox, v_jobs;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_audit_refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- boardreadyops_retention_delete (SECURITY DEFINER, owned by the schema owner) sets the
    -- transaction-local setting around its DELETE; nothing else runs a DELETE as the owner.
    IF TG_OP = 'DELETE' AND current_setting('boardreadyops.audit_retention', true) = 'on'
        AND current_user = 'boardreadyops_schema_owner' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'control_plane_audit is append-only: % refused', TG_OP
        USING ERRCODE = '42501', TABLE = 'control_plane_audit', SCHEMA = 'public';
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'boardreadyops_schema_owner') THEN
        ALTER TABLE public.retention_leases OWNER TO boardreadyops_schema_owner;
        ALTER FUNCTION public.boardreadyops_retention_lease_acquire(text, interval, timestamptz) OWNER TO boardreadyops_schema_owner;
        ALTER FUNCTION public.boardreadyops_retention_lease_release(text) OWNER TO boardreadyops_schema_owner;
        ALTER FUNCTION public.boardreadyops_retention_delete(text, text, interval, integer, timestamptz) OWNER TO boardreadyops_schema_owner;
        ALTER FUNCTION public.boardreadyops_retention_status(interval, interval, interval, interval, boolean, timestamptz) OWNER TO boardreadyops_schema_owner;
        ALTER FUNCTION public.boardreadyops_retention_index_bloat() OWNER TO boardreadyops_schema_owner;
    END IF;
END;
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION public.boardreadyops_retention_lease_acquire(text, interval, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_retention_lease_acquire(text, interval, timestamptz) TO boardreadyops_lifecycle, boardreadyops_admin;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_retention_lease_release(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_retention_lease_release(text) TO boardreadyops_lifecycle, boardreadyops_admin;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_retention_delete(text, text, interval, integer, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_retention_delete(text, text, interval, integer, timestamptz) TO boardreadyops_lifecycle, boardreadyops_admin;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_retention_status(interval, interval, interval, interval, boolean, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_retention_status(interval, interval, interval, interval, boolean, timestamptz) TO boardreadyops_lifecycle, boardreadyops_admin;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_retention_index_bloat() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_retention_index_bloat() TO boardreadyops_lifecycle, boardreadyops_admin;

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_audit_refuse_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'control_plane_audit is append-only: % refused', TG_OP
        USING ERRCODE = '42501', TABLE = 'control_plane_audit', SCHEMA = 'public';
END;
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_retention_sweep(p_older_than interval, p_batch integer DEFAULT 1000, p_now timestamptz DEFAULT NULL)
RETURNS TABLE(outbox_deleted bigint, jobs_deleted bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_cutoff timestamptz := public.boardreadyops_clock_now(p_now) - p_older_than;
    v_outbox bigint;
    v_jobs bigint;
BEGIN
    IF p_older_than IS NULL OR p_older_than < interval '1 day' THEN
        RAISE EXCEPTION 'retention must be at least 1 day, got %', p_older_than USING ERRCODE = '22023';
    END IF;
    IF p_batch IS NULL OR p_batch NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'batch must be between 1 and 100000, got %', p_batch USING ERRCODE = '22023';
    END IF;
    WITH doomed AS (
        SELECT o.id FROM public.control_plane_outbox o
        WHERE o.status = 'completed' AND o.completed_at < v_cutoff
        ORDER BY o.completed_at
        LIMIT p_batch
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM public.control_plane_outbox o USING doomed WHERE o.id = doomed.id;
    GET DIAGNOSTICS v_outbox = ROW_COUNT;

    -- Deleting the inbox row cascades to its job.
    WITH doomed AS (
        SELECT j.inbox_id FROM public.control_plane_jobs j
        WHERE j.status = 'completed' AND j.completed_at < v_cutoff
        ORDER BY j.completed_at
        LIMIT p_batch
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM public.webhook_inbox i USING doomed WHERE i.id = doomed.inbox_id;
    GET DIAGNOSTICS v_jobs = ROW_COUNT;

    RETURN QUERY SELECT v_outbox, v_jobs;
END;
$$;
-- +goose StatementEnd
DROP FUNCTION public.boardreadyops_retention_index_bloat();
DROP FUNCTION public.boardreadyops_retention_status(interval, interval, interval, interval, boolean, timestamptz);
DROP FUNCTION public.boardreadyops_retention_delete(text, text, interval, integer, timestamptz);
DROP FUNCTION public.boardreadyops_retention_lease_release(text);
DROP FUNCTION public.boardreadyops_retention_lease_acquire(text, interval, timestamptz);
DROP TABLE public.retention_leases;
