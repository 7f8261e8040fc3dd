-- Set-based form of boardreadyops_accept_webhook for ingest's group commits: the deliveries of one
-- batch are stored by one statement (inbox rows, then their jobs) instead of one function call
-- each (docs/performance.md, "Ingest": set-based accepts).
--
-- It stores the deliveries whose delivery_id is new — in the order given; of two with the same id
-- only the first — and returns (delivery_id, inbox_id, job_id) for those. A delivery it leaves
-- out is a redelivery: the caller runs it alone through boardreadyops_accept_webhook, which
-- reports it as a duplicate with the stored inbox id. The arrays are parallel, one element per
-- delivery; the rules (CHECKs) are the tables', as for the single-row function.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION boardreadyops_accept_webhooks(
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
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
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
        INSERT INTO webhook_inbox (delivery_id, event, action, installation_id, repository_id, payload,
                                   payload_sha256, received_at, traceparent)
        SELECT d.delivery_id, d.event, d.action, d.installation_id, d.repository_id, d.payload,
               d.payload_sha256, v_now, d.traceparent
        FROM d ORDER BY d.ord
        ON CONFLICT ON CONSTRAINT webhook_inbox_delivery_id_key DO NOTHING
        RETURNING webhook_inbox.id, webhook_inbox.delivery_id, webhook_inbox.event, webhook_inbox.traceparent
    ), j AS (
        INSERT INTO control_plane_jobs (kind, inbox_id, available_at, created_at, updated_at, traceparent)
        SELECT i.event, i.id, v_now, v_now, v_now, i.traceparent FROM i ORDER BY i.id
        RETURNING control_plane_jobs.id, control_plane_jobs.inbox_id
    )
    SELECT i.delivery_id, i.id, j.id FROM i JOIN j ON j.inbox_id = i.id;
END;
$$;
-- +goose StatementEnd

REVOKE EXECUTE ON FUNCTION boardreadyops_accept_webhooks(text[], text[], text[], bigint[], bigint[], jsonb[], bytea[], text[], timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION boardreadyops_accept_webhooks(text[], text[], text[], bigint[], bigint[], jsonb[], bytea[], text[], timestamptz)
    TO boardreadyops_ingest, boardreadyops_admin;

-- +goose Down
DROP FUNCTION boardreadyops_accept_webhooks(text[], text[], text[], bigint[], bigint[], jsonb[], bytea[], text[], timestamptz);
