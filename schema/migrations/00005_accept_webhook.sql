-- Ingest's one write: the inbox row and its job, atomically, in one statement. A redelivery (known
-- delivery_id) inserts nothing and reports duplicate. Ingest wakes lifecycle workers with a NOTIFY
-- on boardreadyops_jobs after the commit (coalesced, pkg/notify), not inside this function: a
-- NOTIFY in every transaction serializes commits on the notification queue lock.
--
-- With this function the ingest role needs no table privilege at all: the grants of 00004 on the
-- inbox and jobs tables are withdrawn.

-- +goose Up

-- +goose StatementBegin
CREATE FUNCTION boardreadyops_accept_webhook(
    p_delivery_id text,
    p_event text,
    p_action text,
    p_installation_id bigint,
    p_repository_id bigint,
    p_payload jsonb,
    p_payload_sha256 bytea,
    p_traceparent text,
    p_now timestamptz DEFAULT NULL)
RETURNS TABLE (inbox_id bigint, job_id bigint, duplicate boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    v_inbox bigint;
    v_job bigint;
BEGIN
    INSERT INTO webhook_inbox (delivery_id, event, action, installation_id, repository_id, payload,
                               payload_sha256, received_at, traceparent)
    VALUES (p_delivery_id, p_event, p_action, p_installation_id, p_repository_id, p_payload,
            p_payload_sha256, v_now, p_traceparent)
    ON CONFLICT ON CONSTRAINT webhook_inbox_delivery_id_key DO NOTHING
    RETURNING id INTO v_inbox;
    IF v_inbox IS NULL THEN
        SELECT i.id INTO v_inbox FROM webhook_inbox i WHERE i.delivery_id = p_delivery_id;
        RETURN QUERY SELECT v_inbox, NULL::bigint, true;
        RETURN;
    END IF;
    INSERT INTO control_plane_jobs (kind, inbox_id, available_at, created_at, updated_at, traceparent)
    VALUES (p_event, v_inbox, v_now, v_now, v_now, p_traceparent)
    RETURNING id INTO v_job;
    RETURN QUERY SELECT v_inbox, v_job, false;
END;
$$;
-- +goose StatementEnd

REVOKE EXECUTE ON FUNCTION boardreadyops_accept_webhook(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION boardreadyops_accept_webhook(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz)
    TO boardreadyops_ingest, boardreadyops_admin;
REVOKE INSERT ON webhook_inbox, control_plane_jobs FROM boardreadyops_ingest;
REVOKE SELECT (id, delivery_id) ON webhook_inbox FROM boardreadyops_ingest;

-- +goose Down
GRANT INSERT ON webhook_inbox, control_plane_jobs TO boardreadyops_ingest;
GRANT SELECT (id, delivery_id) ON webhook_inbox TO boardreadyops_ingest;
DROP FUNCTION boardreadyops_accept_webhook(text, text, text, bigint, bigint, jsonb, bytea, text, timestamptz);
