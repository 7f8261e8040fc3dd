-- A repository's release runs and their undelivered effects follow the repository to its new
-- installation and name (docs/lifecycle.md, "A repository transferred or renamed").
--
-- A run kept the installation it was created under, and each effect the installation and full name
-- it was written with. When the repository was transferred to another account's installation, its
-- unfinished runs' effects went out with the old installation's token, which GitHub answers 404
-- for a repository the installation no longer has: they were dead-lettered, and Retry replayed them
-- under the old installation again. A check-run update for a run finished after the transfer, a
-- Re-run pressed in the new account, and the run's next dispatch all failed the same way.
--
-- From here a trigger on repositories moves, whenever a repository's installation or full name
-- changes (lifecycle's membership changes and renames):
-- - every release run of the repository to the new installation (a Re-run of a finished run
--   starts under it, and its check run is the App's, which the new installation's token updates);
-- - every effect of those runs that is not completed to the new installation and full name
--   (payload repository_full_name and installation_id). A leased one is moved too: its delivery
--   already went out with the old ones, and boardreadyops_outbox_reject sends it again under the
--   new ones when GitHub refuses it, instead of dead-lettering it.
-- An effect's state, attempts and updated_at are left alone: a dead letter stays one (Retry now
-- replays it under the new installation).
--
-- The trigger runs as the schema owner (lifecycle may only read release_runs and call functions on
-- the outbox). It runs inside the membership change's transaction, which holds the repository's
-- row, so a run created meanwhile waits for it and reads the new installation. Creating the
-- trigger takes a SHARE ROW EXCLUSIVE lock on repositories for milliseconds; nothing is rewritten.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_release_run_follow_repository()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.installation_id IS DISTINCT FROM OLD.installation_id THEN
        UPDATE public.release_runs
        SET installation_id = NEW.installation_id, updated_at = public.boardreadyops_clock_now(NULL)
        WHERE repository_id = NEW.id AND installation_id <> NEW.installation_id;
    END IF;
    UPDATE public.control_plane_outbox o
    SET installation_id = NEW.installation_id,
        payload = o.payload || jsonb_build_object('repository_full_name', NEW.full_name)
            || CASE WHEN o.payload ? 'installation_id' THEN jsonb_build_object('installation_id', NEW.installation_id)
                    ELSE '{}'::jsonb END
    FROM public.release_runs run
    WHERE run.repository_id = NEW.id AND o.release_run_id = run.id AND o.status <> 'completed'
      AND (o.installation_id <> NEW.installation_id OR o.payload ->> 'repository_full_name' IS DISTINCT FROM NEW.full_name);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
ALTER FUNCTION public.boardreadyops_release_run_follow_repository() OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_release_run_follow_repository() FROM PUBLIC;

CREATE TRIGGER repositories_runs_follow AFTER UPDATE OF installation_id, full_name ON public.repositories
    FOR EACH ROW WHEN (OLD.installation_id IS DISTINCT FROM NEW.installation_id OR OLD.full_name IS DISTINCT FROM NEW.full_name)
    EXECUTE FUNCTION public.boardreadyops_release_run_follow_repository();

-- What the dispatcher records for a request GitHub refused. When the effect's installation or
-- repository name changed while it was out (the trigger above), the refusal is the old ones': the
-- effect is returned to the queue at once, as a retry, and goes out again under the new ones
-- ('available', or 'dead_letter' when its attempts are spent). Otherwise it is dead-lettered, as
-- boardreadyops_outbox_dead_letter does ('dead_letter').
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_reject(p_id bigint, p_worker text, p_error text, p_installation_id bigint,
    p_repository text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
BEGIN
    IF p_error IS NULL OR btrim(p_error) = '' THEN
        RAISE EXCEPTION 'a rejection needs an error description' USING ERRCODE = '22023';
    END IF;
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    IF r.installation_id IS DISTINCT FROM p_installation_id
       OR (p_repository IS NOT NULL AND r.payload ->> 'repository_full_name' IS DISTINCT FROM p_repository) THEN
        RETURN public.boardreadyops_outbox_retry(p_id, p_worker,
            format('the repository moved to installation %s as %s while this was sent under installation %s as %s; sent again: %s',
                   r.installation_id, coalesce(r.payload ->> 'repository_full_name', '?'), p_installation_id,
                   coalesce(p_repository, '?'), p_error),
            v_now, p_now);
    END IF;
    PERFORM public.boardreadyops_outbox_dead_letter(p_id, p_worker, p_error, p_now);
    RETURN 'dead_letter';
END;
$$;
-- +goose StatementEnd
ALTER FUNCTION public.boardreadyops_outbox_reject(bigint, text, text, bigint, text, timestamptz) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_outbox_reject(bigint, text, text, bigint, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_reject(bigint, text, text, bigint, text, timestamptz) TO boardreadyops_dispatcher, boardreadyops_admin;

-- +goose Down
DROP FUNCTION public.boardreadyops_outbox_reject(bigint, text, text, bigint, text, timestamptz);
DROP TRIGGER repositories_runs_follow ON public.repositories;
DROP FUNCTION public.boardreadyops_release_run_follow_repository();
