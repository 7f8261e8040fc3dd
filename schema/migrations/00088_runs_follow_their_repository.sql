-- A repository's release runs and their effects follow the repository to its new installation and
-- name (docs/lifecycle.md, "A repository transferred or renamed").
--
-- A run kept the installation it was created under, and each effect the installation and full name
-- it was written with. When the repository was transferred to another account's installation, its
-- unfinished runs' effects went out with the old installation's token, which GitHub answers 404
-- for a repository the installation no longer has: they were dead-lettered, and Retry replayed them
-- under the old installation again. A check-run update for a run finished after the transfer, a
-- Re-run pressed in the new account, and the run's next dispatch all failed the same way.
--
-- From here:
-- - a trigger on repositories, whenever a repository's installation or full name changes
--   (lifecycle's membership changes and renames), moves every release run of the repository to the
--   new installation, locking them in id order as every writer of runs does, and every effect of
--   those runs that is available, dead-lettered or awaiting reconciliation to the new installation
--   and name (payload repository_full_name and installation_id), passing over one locked meanwhile.
--   An effect's state, attempts and updated_at are left alone. When the installation changed, the
--   dead letters it moved that GitHub refused under the old installation (marked by the reject
--   below, and not dead-lettered again since) from 15 minutes before the move's delivery on are
--   replayed, audited as 'boardreadyops', unless the old installation is deleted or suspended:
--   GitHub refuses the old installation as soon as it moves a repository, and its event reaches
--   lifecycle after that, so such a refusal was the move's.
-- - boardreadyops_outbox_reject records what the dispatcher sends for a request GitHub refused.
--   When the repository's installation or name is no longer what the effect was sent under (moved
--   while it was out, or created under the old installation beside the move), the effect and its
--   run take the repository's, the attempt is given back, and the effect goes out again at once;
--   otherwise it is dead-lettered, as boardreadyops_outbox_dead_letter does, and marked with the
--   installation it was refused under (result refused_under_installation and refused_at). It locks
--   the effect, then reads the repository FOR SHARE (a move committing meanwhile holds its row: the
--   committed row is read), then locks the run, as the completions do after the effect.
--
-- The trigger runs as the schema owner (lifecycle may only read release_runs and call functions on
-- the outbox), inside the change's transaction, which holds the repository's row. It never waits for
-- an effect's lock: a leased one, or one another transaction holds, is left to the reject above.
-- Creating the trigger takes a SHARE ROW EXCLUSIVE lock on repositories for milliseconds; nothing
-- is rewritten.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_release_run_follow_repository()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(NULL);
    v_moved boolean := NEW.installation_id IS DISTINCT FROM OLD.installation_id;
    v_refused bigint[];
    v_id bigint;
BEGIN
    IF v_moved THEN
        -- FOR UPDATE, the lock a replay below takes on its run: taken now, in id order, it is
        -- never upgraded past another transaction's KEY SHARE.
        PERFORM FROM public.release_runs WHERE repository_id = NEW.id ORDER BY id FOR UPDATE;
        UPDATE public.release_runs SET installation_id = NEW.installation_id, updated_at = v_now
        WHERE repository_id = NEW.id AND installation_id <> NEW.installation_id;
    END IF;
    -- The refusals of the old installation since shortly before the move's delivery (GitHub
    -- refuses it as soon as it moves the repository; the event comes after): the dead letters
    -- boardreadyops_outbox_reject marked as refused under it.
    WITH moved AS (
        UPDATE public.control_plane_outbox o
        SET installation_id = NEW.installation_id,
            payload = o.payload || jsonb_build_object('repository_full_name', NEW.full_name)
                || CASE WHEN o.payload ? 'installation_id' THEN jsonb_build_object('installation_id', NEW.installation_id)
                        ELSE '{}'::jsonb END
        WHERE o.id IN (
            SELECT x.id FROM public.control_plane_outbox x JOIN public.release_runs run ON run.id = x.release_run_id
            WHERE run.repository_id = NEW.id AND x.status IN ('available', 'dead_letter', 'reconciliation_required')
              AND (x.installation_id <> NEW.installation_id OR x.payload ->> 'repository_full_name' IS DISTINCT FROM NEW.full_name)
            ORDER BY x.id
            FOR UPDATE OF x SKIP LOCKED)
        RETURNING o.id, o.status, o.result, o.updated_at
    )
    SELECT array_agg(m.id ORDER BY m.id) INTO v_refused FROM moved m
    WHERE v_moved AND m.status = 'dead_letter'
      AND m.result ->> 'refused_under_installation' = OLD.installation_id::text
      AND (m.result ->> 'refused_at')::timestamptz = m.updated_at
      AND m.updated_at >= least(v_now, coalesce(NEW.membership_event_at, v_now)) - interval '15 minutes'
      -- An installation deleted or suspended refused for that reason (its token is refused): its
      -- dead letters wait for an operator, as boardreadyops_outbox_dead_letter_installation's do.
      AND NOT EXISTS (SELECT FROM public.installations i WHERE i.id = OLD.installation_id
                      AND (i.deleted_at IS NOT NULL OR i.suspended_at IS NOT NULL));
    FOREACH v_id IN ARRAY coalesce(v_refused, '{}') LOOP
        UPDATE public.control_plane_outbox SET result = nullif(result - 'refused_under_installation', '{}'::jsonb)
        WHERE id = v_id;
        PERFORM public.boardreadyops_outbox_replay(v_id, 'boardreadyops',
            format('repository %s moved to installation %s: sent again after installation %s refused it',
                   NEW.id, NEW.installation_id, OLD.installation_id),
            v_now);
    END LOOP;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
ALTER FUNCTION public.boardreadyops_release_run_follow_repository() OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_release_run_follow_repository() FROM PUBLIC;

CREATE TRIGGER repositories_runs_follow AFTER UPDATE OF installation_id, full_name ON public.repositories
    FOR EACH ROW WHEN (OLD.installation_id IS DISTINCT FROM NEW.installation_id OR OLD.full_name IS DISTINCT FROM NEW.full_name)
    EXECUTE FUNCTION public.boardreadyops_release_run_follow_repository();

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_reject(p_id bigint, p_worker text, p_error text, p_installation_id bigint,
    p_repository text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    r public.control_plane_outbox;
    v_installation bigint;
    v_name text;
    v_error text;
BEGIN
    IF p_error IS NULL OR btrim(p_error) = '' THEN
        RAISE EXCEPTION 'a rejection needs an error description' USING ERRCODE = '22023';
    END IF;
    r := public.boardreadyops_outbox_lock_leased(p_id, p_worker, NULL);
    -- The repository as a move committing now leaves it: its transaction holds the repository's
    -- row (then the runs'), so this waits for it and reads the committed row. Then the run's lock,
    -- FOR UPDATE as the completions take it after the effect's (a weaker one, upgraded by
    -- boardreadyops_release_run_block below, could deadlock with a KEY SHARE taken meanwhile).
    SELECT repo.installation_id, repo.full_name INTO v_installation, v_name
    FROM public.release_runs run JOIN public.repositories repo ON repo.id = run.repository_id
    WHERE run.id = r.release_run_id
    FOR SHARE OF repo;
    PERFORM FROM public.release_runs WHERE id = r.release_run_id FOR UPDATE;
    IF NOT FOUND OR (v_installation = p_installation_id AND (p_repository IS NULL OR v_name = p_repository)) THEN
        PERFORM public.boardreadyops_outbox_dead_letter(p_id, p_worker, p_error, p_now);
        -- Marked, so that a move of the repository to another installation sends it again; the
        -- time tells this refusal from a later dead-lettering of the same effect (a replay keeps
        -- result).
        UPDATE public.control_plane_outbox
        SET result = jsonb_build_object('refused_under_installation', p_installation_id, 'refused_at', updated_at)
        WHERE id = p_id;
        RETURN 'dead_letter';
    END IF;
    v_error := format('sent under installation %s as %s and refused (%s); the repository is installation %s''s as %s now: sent again',
                      p_installation_id, coalesce(p_repository, '?'), p_error, v_installation, v_name);
    -- A check-run update that a newer one replaced is not sent again: it would undo the newer.
    IF public.boardreadyops_outbox_supersede_check_run_update(r, v_error, v_now) THEN
        RETURN 'completed';
    END IF;
    UPDATE public.release_runs SET installation_id = v_installation, updated_at = v_now
    WHERE id = r.release_run_id AND installation_id <> v_installation;
    UPDATE public.control_plane_outbox o
    SET status = 'available', available_at = v_now, attempts = greatest(o.attempts - 1, 0),
        lease_owner = NULL, lease_expires_at = NULL, delivery_started_at = NULL,
        installation_id = v_installation, result = nullif(o.result - 'refused_under_installation', '{}'::jsonb),
        payload = o.payload || jsonb_build_object('repository_full_name', v_name)
            || CASE WHEN o.payload ? 'installation_id' THEN jsonb_build_object('installation_id', v_installation)
                    ELSE '{}'::jsonb END,
        last_error = left(v_error, 4096), updated_at = v_now
    WHERE o.id = p_id;
    PERFORM pg_notify('boardreadyops_outbox', '');
    RETURN 'available';
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
