-- A delivery resent with its own delivery id is a duplicate as long as its body's digest is kept,
-- not only while its inbox row is (docs/security.md, "Replays").
--
-- boardreadyops_webhook_accept looked the delivery id up in the inbox, then the body's digest. A
-- digest stored under the same delivery id was taken for a delivery still being written, and the
-- delivery was stored: so a captured delivery resent unchanged, with its own X-GitHub-Delivery,
-- after retention had deleted its inbox row (the jobs period, 7 days) but not its digest (30 days)
-- was stored and run a second time (a check_run rerequested starts another attempt and another
-- workflow dispatch). The same held for a body recorded as ignored, resent under its own id with
-- another event's name: it was stored as that event. Such a delivery is now a duplicate, as GitHub's
-- redelivery of a stored one is. The batch form stores only bodies it has not seen; the others go
-- through this function (services/ingest, ErrAlone).
--
-- Only a function changes: no table lock; a previous release's ingest calls it unchanged.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_webhook_accept(p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(inbox_id bigint, job_id bigint, duplicate boolean, replayed boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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
        -- This delivery's own body, seen before (00073): the delivery was stored and retention has
        -- since deleted its inbox row, or it was recorded as ignored, or a concurrent copy of it
        -- has just committed. It has been handled once; storing it again would run it again (a
        -- captured delivery resent with its own id after the jobs period, or an ignored body
        -- resent under another event's name).
        SELECT i.id INTO v_inbox FROM public.webhook_inbox i WHERE i.delivery_id = p_delivery_id;
        RETURN QUERY SELECT v_inbox, NULL::bigint, true, false;
        RETURN;
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_webhook_accept(p_delivery_id text, p_event text, p_action text, p_installation_id bigint, p_repository_id bigint, p_payload jsonb, p_payload_sha256 bytea, p_traceparent text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS TABLE(inbox_id bigint, job_id bigint, duplicate boolean, replayed boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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
