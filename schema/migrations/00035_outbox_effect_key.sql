-- +goose NO TRANSACTION
-- One unique index on the effect's identity columns instead of the idempotency key's and the
-- release run's (issue 25, docs/performance.md "Queue machinery against River").
--
-- An effect's idempotency key is a function of four columns — effect_type || ':' ||
-- release_run_id [|| ':' || execution_attempt_id] [|| ':g' || generation] — and the outbox's row
-- rule (boardreadyops_outbox_validate_row) holds every row to it. The function is injective (the
-- effect types contain no ':', a uuid has one fixed form), so the key is unique exactly when
-- (release_run_id, effect_type, execution_attempt_id, generation) is, with NULL attempts (check-run
-- creations) equal to each other: NULLS NOT DISTINCT. That index keeps the key deterministic and
-- unique, and it leads with release_run_id, so it also serves every lookup, join and foreign-key
-- check that used control_plane_outbox_release_run_idx.
--
-- Every outbox transition changes status, which the partial claim indexes read, so none is HOT
-- and every row version is inserted into each index. With this migration that is one index
-- fewer per row version (two per effect at least), and no ~98-byte text key: the uniqueness
-- check compares a uuid first.
--
-- Online: the new index is built CONCURRENTLY (SHARE UPDATE EXCLUSIVE: claims, inserts and
-- updates carry on) before anything depends on it, then boardreadyops_outbox_enqueue's ON
-- CONFLICT names it, then the old indexes go. Dropping the idempotency key's UNIQUE constraint
-- takes ACCESS EXCLUSIVE on the outbox for a catalog change only (no scan), as 00011's DROP INDEX
-- did; the release run's index goes CONCURRENTLY. Run again after a failure part way, it keeps a
-- valid new index (never dropping it once the old constraint may be gone: the outbox would have
-- no uniqueness while it was rebuilt), and it stops before dropping the constraint when a failed
-- build left the index INVALID: drop that one (DROP INDEX CONCURRENTLY
-- control_plane_outbox_effect_key) and run it again.

-- +goose Up
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS control_plane_outbox_effect_key ON public.control_plane_outbox
    (release_run_id, effect_type, execution_attempt_id, generation) NULLS NOT DISTINCT;

-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_index
                   WHERE indexrelid = 'public.control_plane_outbox_effect_key'::regclass AND indisvalid) THEN
        RAISE EXCEPTION 'control_plane_outbox_effect_key is INVALID (an interrupted build): DROP INDEX CONCURRENTLY public.control_plane_outbox_effect_key, then migrate again';
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_enqueue(p_effect_type text, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_payload jsonb, p_traceparent text DEFAULT NULL::text, p_max_attempts integer DEFAULT 10, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    v_id  bigint;
BEGIN
    INSERT INTO public.control_plane_outbox (
        effect_type, idempotency_key, payload, max_attempts, available_at,
        release_run_id, execution_attempt_id, installation_id, traceparent, created_at, updated_at)
    VALUES (
        p_effect_type,
        p_effect_type || ':' || p_release_run_id::text || coalesce(':' || p_execution_attempt_id::text, ''),
        p_payload, p_max_attempts, v_now,
        p_release_run_id, p_execution_attempt_id, p_installation_id, p_traceparent, v_now, v_now)
    ON CONFLICT (release_run_id, effect_type, execution_attempt_id, generation) DO NOTHING
    RETURNING id INTO v_id;
    RETURN v_id;
END;
$$;
-- +goose StatementEnd

ALTER TABLE public.control_plane_outbox DROP CONSTRAINT IF EXISTS control_plane_outbox_idempotency_key_key;
DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_outbox_release_run_idx;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_outbox_release_run_idx;
CREATE INDEX CONCURRENTLY control_plane_outbox_release_run_idx ON public.control_plane_outbox (release_run_id);
DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_outbox_idempotency_key_key;
CREATE UNIQUE INDEX CONCURRENTLY control_plane_outbox_idempotency_key_key ON public.control_plane_outbox (idempotency_key);
ALTER TABLE public.control_plane_outbox ADD CONSTRAINT control_plane_outbox_idempotency_key_key
    UNIQUE USING INDEX control_plane_outbox_idempotency_key_key;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_enqueue(p_effect_type text, p_release_run_id uuid, p_execution_attempt_id uuid, p_installation_id bigint, p_payload jsonb, p_traceparent text DEFAULT NULL::text, p_max_attempts integer DEFAULT 10, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    v_id  bigint;
BEGIN
    INSERT INTO public.control_plane_outbox (
        effect_type, idempotency_key, payload, max_attempts, available_at,
        release_run_id, execution_attempt_id, installation_id, traceparent, created_at, updated_at)
    VALUES (
        p_effect_type,
        p_effect_type || ':' || p_release_run_id::text || coalesce(':' || p_execution_attempt_id::text, ''),
        p_payload, p_max_attempts, v_now,
        p_release_run_id, p_execution_attempt_id, p_installation_id, p_traceparent, v_now, v_now)
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id INTO v_id;
    RETURN v_id;
END;
$$;
-- +goose StatementEnd

DROP INDEX CONCURRENTLY IF EXISTS public.control_plane_outbox_effect_key;
