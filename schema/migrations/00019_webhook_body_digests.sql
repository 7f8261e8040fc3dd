-- A verified signature pins a body, not its meaning: GitHub's X-Hub-Signature-256 covers the raw
-- body, not X-GitHub-Delivery. A captured body resent under a fresh delivery id passed the
-- delivery-id deduplication and was applied again (a second execution attempt and dispatch from
-- one check_run.rerequested; a deleted installation brought back by an old installation.created).
--
-- From here the SHA-256 of every verified raw body is unique for a retention window, including
-- bodies of events that are acknowledged but not stored (boardreadyops_webhook_record_ignored):
--   * a known delivery id is GitHub's redelivery: a duplicate, as before;
--   * a known body under another delivery id is a replay: nothing is written, and
--     boardreadyops_webhook_accept reports replayed (and duplicate, so the previous release's
--     binaries, which read only inbox_id, job_id and duplicate, store nothing either);
--   * a known body under the same delivery id (an earlier attempt of the same delivery) is stored
--     as usual.
-- boardreadyops_webhook_sweep_digests(window) removes digests older than the window whose
-- delivery is no longer in the inbox, so a digest lives at least as long as its inbox row,
-- whatever the inbox retention (docs/security.md, docs/operations.md "Retention").
--
-- The result of boardreadyops_webhook_accept gains the column replayed, so the function and its
-- deprecated name of 00014 are dropped and created again with the same arguments and grants.

-- +goose Up
CREATE TABLE public.webhook_body_digests (
    payload_sha256 bytea PRIMARY KEY CHECK (length(payload_sha256) = 32),
    -- The first delivery that carried the body.
    delivery_id    text NOT NULL CHECK (length(delivery_id) BETWEEN 1 AND 100),
    received_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_body_digests_received_at_idx ON public.webhook_body_digests (received_at);
ALTER TABLE public.webhook_body_digests OWNER TO boardreadyops_schema_owner;
GRANT SELECT, INSERT, UPDATE, DELETE ON public.webhook_body_digests TO boardreadyops_admin;

-- The bodies already stored count from the start.
INSERT INTO public.webhook_body_digests (payload_sha256, delivery_id, received_at)
SELECT DISTINCT ON (payload_sha256) payload_sha256, delivery_id, received_at
FROM public.webhook_inbox ORDER BY payload_sha256, received_at, id
ON CONFLICT DO NOTHING;

DROP FUNCTION boardreadyops_accept_webhook(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz);
DROP FUNCTION boardreadyops_webhook_accept(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz);

-- +goose StatementBegin
CREATE FUNCTION boardreadyops_webhook_accept(
    p_delivery_id text,
    p_event text,
    p_action text,
    p_installation_id bigint,
    p_repository_id bigint,
    p_payload jsonb,
    p_payload_sha256 bytea,
    p_traceparent text,
    p_now timestamptz DEFAULT NULL)
RETURNS TABLE (inbox_id bigint, job_id bigint, duplicate boolean, replayed boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    v_inbox bigint;
    v_job bigint;
    v_first text;
BEGIN
    -- GitHub's redelivery of a stored delivery.
    SELECT i.id INTO v_inbox FROM public.webhook_inbox i WHERE i.delivery_id = p_delivery_id;
    IF FOUND THEN
        RETURN QUERY SELECT v_inbox, NULL::bigint, true, false;
        RETURN;
    END IF;
    -- The body: new, or seen before. A concurrent delivery of the same body waits here on the
    -- primary key until the first commits, then sees it.
    INSERT INTO public.webhook_body_digests (payload_sha256, delivery_id, received_at)
    VALUES (p_payload_sha256, p_delivery_id, v_now)
    ON CONFLICT (payload_sha256) DO NOTHING;
    IF NOT FOUND THEN
        SELECT g.delivery_id INTO v_first FROM public.webhook_body_digests g WHERE g.payload_sha256 = p_payload_sha256;
        IF v_first IS DISTINCT FROM p_delivery_id THEN
            SELECT i.id INTO v_inbox FROM public.webhook_inbox i WHERE i.delivery_id = v_first;
            RETURN QUERY SELECT v_inbox, NULL::bigint, true, true;
            RETURN;
        END IF;
    END IF;
    INSERT INTO public.webhook_inbox (delivery_id, event, action, installation_id, repository_id, payload,
                                      payload_sha256, received_at, traceparent)
    VALUES (p_delivery_id, p_event, p_action, p_installation_id, p_repository_id, p_payload,
            p_payload_sha256, v_now, p_traceparent)
    ON CONFLICT ON CONSTRAINT webhook_inbox_delivery_id_key DO NOTHING
    RETURNING id INTO v_inbox;
    IF v_inbox IS NULL THEN
        SELECT i.id INTO v_inbox FROM public.webhook_inbox i WHERE i.delivery_id = p_delivery_id;
        RETURN QUERY SELECT v_inbox, NULL::bigint, true, false;
        RETURN;
    END IF;
    INSERT INTO public.control_plane_jobs (kind, inbox_id, available_at, created_at, updated_at, traceparent)
    VALUES (p_event, v_inbox, v_now, v_now, v_now, p_traceparent)
    RETURNING id INTO v_job;
    RETURN QUERY SELECT v_inbox, v_job, false, false;
END;
$$;
-- +goose StatementEnd

CREATE FUNCTION boardreadyops_accept_webhook(
    p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint,
    p_payload jsonb, p_payload_sha256 bytea, p_traceparent text, p_now timestamptz DEFAULT NULL)
RETURNS TABLE (inbox_id bigint, job_id bigint, duplicate boolean, replayed boolean)
LANGUAGE sql VOLATILE PARALLEL UNSAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$SELECT * FROM public.boardreadyops_webhook_accept($1, $2, $3, $4, $5, $6, $7, $8, $9)$$;
COMMENT ON FUNCTION boardreadyops_accept_webhook(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz) IS
    'Deprecated name of boardreadyops_webhook_accept (migration 00014), kept for the previous release''s binaries during a rolling upgrade.';

REVOKE ALL ON FUNCTION boardreadyops_webhook_accept(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION boardreadyops_accept_webhook(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION boardreadyops_webhook_accept(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz)
    TO boardreadyops_ingest, boardreadyops_admin;
GRANT EXECUTE ON FUNCTION boardreadyops_accept_webhook(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz)
    TO boardreadyops_ingest, boardreadyops_admin;

-- The set-based form: a delivery whose body is known (or appears twice in the batch) is left out,
-- like a known delivery id, and the caller runs it alone through boardreadyops_webhook_accept,
-- which tells a redelivery from a replay. Digests are inserted in digest order, so concurrent
-- batches take their locks in one order.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION boardreadyops_webhook_accept_batch(
    p_delivery_ids text[],
    p_events text[],
    p_actions text[],
    p_installation_ids bigint[],
    p_repository_ids bigint[],
    p_payloads jsonb[],
    p_payload_sha256s bytea[],
    p_traceparents text[],
    p_now timestamptz DEFAULT NULL)
RETURNS TABLE (delivery_id text, inbox_id bigint, job_id bigint)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    v_n integer := cardinality(p_delivery_ids);
BEGIN
    IF v_n IS NULL OR v_n > 10000 THEN
        RAISE EXCEPTION 'between 0 and 10000 deliveries per call' USING ERRCODE = '22023';
    END IF;
    IF cardinality(p_events) IS DISTINCT FROM v_n OR cardinality(p_actions) IS DISTINCT FROM v_n
        OR cardinality(p_installation_ids) IS DISTINCT FROM v_n OR cardinality(p_repository_ids) IS DISTINCT FROM v_n
        OR cardinality(p_payloads) IS DISTINCT FROM v_n OR cardinality(p_payload_sha256s) IS DISTINCT FROM v_n
        OR cardinality(p_traceparents) IS DISTINCT FROM v_n THEN
        RAISE EXCEPTION 'the delivery arrays must have the same length' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH d AS (
        SELECT * FROM unnest(p_delivery_ids, p_events, p_actions, p_installation_ids, p_repository_ids,
                             p_payloads, p_payload_sha256s, p_traceparents) WITH ORDINALITY
            AS d(delivery_id, event, action, installation_id, repository_id, payload, payload_sha256, traceparent, ord)
    ), g AS (
        INSERT INTO public.webhook_body_digests (payload_sha256, delivery_id, received_at)
        SELECT DISTINCT ON (d.payload_sha256) d.payload_sha256, d.delivery_id, v_now
        FROM d ORDER BY d.payload_sha256, d.ord
        ON CONFLICT (payload_sha256) DO NOTHING
        RETURNING public.webhook_body_digests.payload_sha256, public.webhook_body_digests.delivery_id
    ), i AS (
        INSERT INTO public.webhook_inbox (delivery_id, event, action, installation_id, repository_id, payload,
                                          payload_sha256, received_at, traceparent)
        SELECT d.delivery_id, d.event, d.action, d.installation_id, d.repository_id, d.payload,
               d.payload_sha256, v_now, d.traceparent
        FROM d JOIN g ON g.payload_sha256 = d.payload_sha256 AND g.delivery_id = d.delivery_id
        ORDER BY d.ord
        ON CONFLICT ON CONSTRAINT webhook_inbox_delivery_id_key DO NOTHING
        RETURNING public.webhook_inbox.id, public.webhook_inbox.delivery_id, public.webhook_inbox.event, public.webhook_inbox.traceparent
    ), j AS (
        INSERT INTO public.control_plane_jobs (kind, inbox_id, available_at, created_at, updated_at, traceparent)
        SELECT i.event, i.id, v_now, v_now, v_now, i.traceparent FROM i ORDER BY i.id
        RETURNING public.control_plane_jobs.id, public.control_plane_jobs.inbox_id
    )
    SELECT i.delivery_id, i.id, j.id FROM i JOIN j ON j.inbox_id = i.id;
END;
$$;
-- +goose StatementEnd

-- A verified delivery of an event the control plane does not handle is not stored, but its body
-- is: replayed is true when the body is known under another delivery id.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_webhook_record_ignored(
    p_delivery_id text, p_payload_sha256 bytea, p_now timestamptz DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_first text;
BEGIN
    INSERT INTO public.webhook_body_digests (payload_sha256, delivery_id, received_at)
    VALUES (p_payload_sha256, p_delivery_id, public.boardreadyops_clock_now(p_now))
    ON CONFLICT (payload_sha256) DO NOTHING;
    IF FOUND THEN
        RETURN false;
    END IF;
    SELECT g.delivery_id INTO v_first FROM public.webhook_body_digests g WHERE g.payload_sha256 = p_payload_sha256;
    RETURN v_first IS DISTINCT FROM p_delivery_id;
END;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION boardreadyops_webhook_record_ignored(text, bytea, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION boardreadyops_webhook_record_ignored(text, bytea, timestamptz) TO boardreadyops_ingest, boardreadyops_admin;

-- Retention of the digests: removes up to p_batch digests received more than p_window ago whose
-- delivery is no longer in the inbox (so never before the inbox's own retention). The window is
-- at least 3 days, GitHub's redelivery window; docs/operations.md recommends 30.
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_webhook_sweep_digests(
    p_window interval, p_batch integer DEFAULT 1000, p_now timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_deleted bigint;
BEGIN
    IF p_window IS NULL OR p_window < interval '3 days' THEN
        RAISE EXCEPTION 'replay window must be at least 3 days (GitHub''s redelivery window), got %', p_window USING ERRCODE = '22023';
    END IF;
    IF p_batch IS NULL OR p_batch NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'batch must be between 1 and 100000, got %', p_batch USING ERRCODE = '22023';
    END IF;
    WITH doomed AS (
        SELECT g.payload_sha256 FROM public.webhook_body_digests g
        WHERE g.received_at < public.boardreadyops_clock_now(p_now) - p_window
          AND NOT EXISTS (SELECT FROM public.webhook_inbox i WHERE i.delivery_id = g.delivery_id)
        ORDER BY g.received_at
        LIMIT p_batch
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM public.webhook_body_digests g USING doomed WHERE g.payload_sha256 = doomed.payload_sha256;
    GET DIAGNOSTICS v_deleted = ROW_COUNT;
    RETURN v_deleted;
END;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION boardreadyops_webhook_sweep_digests(interval, integer, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION boardreadyops_webhook_sweep_digests(interval, integer, timestamptz) TO boardreadyops_admin;

-- The owner and the rules of docs/operations.md, "Rules for a new function" (migration 00015/00016).
ALTER FUNCTION public.boardreadyops_webhook_accept(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz) OWNER TO boardreadyops_schema_owner;
ALTER FUNCTION public.boardreadyops_accept_webhook(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz) OWNER TO boardreadyops_schema_owner;
ALTER FUNCTION public.boardreadyops_webhook_record_ignored(text, bytea, timestamptz) OWNER TO boardreadyops_schema_owner;
ALTER FUNCTION public.boardreadyops_webhook_sweep_digests(interval, integer, timestamptz) OWNER TO boardreadyops_schema_owner;

-- +goose Down
DROP FUNCTION public.boardreadyops_webhook_sweep_digests(interval, integer, timestamptz);
DROP FUNCTION public.boardreadyops_webhook_record_ignored(text, bytea, timestamptz);
DROP FUNCTION public.boardreadyops_accept_webhook(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz);
DROP FUNCTION public.boardreadyops_webhook_accept(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz);

-- The definitions of migration 00016, word for word.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_webhook_accept_batch(p_delivery_ids text[], p_events text[], p_actions text[], p_installation_ids bigint[], p_repository_ids bigint[], p_payloads jsonb[], p_payload_sha256s bytea[], p_traceparents text[], p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(delivery_id text, inbox_id bigint, job_id bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    v_n integer := cardinality(p_delivery_ids);
BEGIN
    IF v_n IS NULL OR v_n > 10000 THEN
        RAISE EXCEPTION 'between 0 and 10000 deliveries per call' USING ERRCODE = '22023';
    END IF;
    IF cardinality(p_events) IS DISTINCT FROM v_n OR cardinality(p_actions) IS DISTINCT FROM v_n
        OR cardinality(p_installation_ids) IS DISTINCT FROM v_n OR cardinality(p_repository_ids) IS DISTINCT FROM v_n
        OR cardinality(p_payloads) IS DISTINCT FROM v_n OR cardinality(p_payload_sha256s) IS DISTINCT FROM v_n
        OR cardinality(p_traceparents) IS DISTINCT FROM v_n THEN
        RAISE EXCEPTION 'the delivery arrays must have the same length' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH d AS (
        SELECT * FROM unnest(p_delivery_ids, p_events, p_actions, p_installation_ids, p_repository_ids,
                             p_payloads, p_payload_sha256s, p_traceparents) WITH ORDINALITY
            AS d(delivery_id, event, action, installation_id, repository_id, payload, payload_sha256, traceparent, ord)
    ), i AS (
        INSERT INTO public.webhook_inbox (delivery_id, event, action, installation_id, repository_id, payload,
                                   payload_sha256, received_at, traceparent)
        SELECT d.delivery_id, d.event, d.action, d.installation_id, d.repository_id, d.payload,
               d.payload_sha256, v_now, d.traceparent
        FROM d ORDER BY d.ord
        ON CONFLICT ON CONSTRAINT webhook_inbox_delivery_id_key DO NOTHING
        RETURNING public.webhook_inbox.id, public.webhook_inbox.delivery_id, public.webhook_inbox.event, public.webhook_inbox.traceparent
    ), j AS (
        INSERT INTO public.control_plane_jobs (kind, inbox_id, available_at, created_at, updated_at, traceparent)
        SELECT i.event, i.id, v_now, v_now, v_now, i.traceparent FROM i ORDER BY i.id
        RETURNING public.control_plane_jobs.id, public.control_plane_jobs.inbox_id
    )
    SELECT i.delivery_id, i.id, j.id FROM i JOIN j ON j.inbox_id = i.id;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_webhook_accept(p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(inbox_id bigint, job_id bigint, duplicate boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    v_inbox bigint;
    v_job bigint;
BEGIN
    INSERT INTO public.webhook_inbox (delivery_id, event, action, installation_id, repository_id, payload,
                               payload_sha256, received_at, traceparent)
    VALUES (p_delivery_id, p_event, p_action, p_installation_id, p_repository_id, p_payload,
            p_payload_sha256, v_now, p_traceparent)
    ON CONFLICT ON CONSTRAINT webhook_inbox_delivery_id_key DO NOTHING
    RETURNING id INTO v_inbox;
    IF v_inbox IS NULL THEN
        SELECT i.id INTO v_inbox FROM public.webhook_inbox i WHERE i.delivery_id = p_delivery_id;
        RETURN QUERY SELECT v_inbox, NULL::bigint, true;
        RETURN;
    END IF;
    INSERT INTO public.control_plane_jobs (kind, inbox_id, available_at, created_at, updated_at, traceparent)
    VALUES (p_event, v_inbox, v_now, v_now, v_now, p_traceparent)
    RETURNING id INTO v_job;
    RETURN QUERY SELECT v_inbox, v_job, false;
END;
$function$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_accept_webhook(p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(inbox_id bigint, job_id bigint, duplicate boolean)
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$SELECT * FROM public.boardreadyops_webhook_accept($1, $2, $3, $4, $5, $6, $7, $8, $9)$function$;
-- +goose StatementEnd

COMMENT ON FUNCTION public.boardreadyops_accept_webhook(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz) IS
    'Deprecated name of boardreadyops_webhook_accept (migration 00014), kept for the previous release''s binaries during a rolling upgrade.';
ALTER FUNCTION public.boardreadyops_webhook_accept(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz) OWNER TO boardreadyops_schema_owner;
ALTER FUNCTION public.boardreadyops_accept_webhook(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz) OWNER TO boardreadyops_schema_owner;
REVOKE ALL ON FUNCTION public.boardreadyops_webhook_accept(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION public.boardreadyops_accept_webhook(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_webhook_accept(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz)
    TO boardreadyops_ingest, boardreadyops_admin;
GRANT EXECUTE ON FUNCTION public.boardreadyops_accept_webhook(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz)
    TO boardreadyops_ingest, boardreadyops_admin;

DROP TABLE public.webhook_body_digests;
