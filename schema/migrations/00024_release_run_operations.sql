-- Operators act on runs, not rows (issue 20 §4, §5).
--
-- control_plane_audit: operator actions on a release run (brops release-runs cancel), on the
-- dispatch pause (brops dispatch pause|resume), on release settings (brops repos settings) and
-- reconcile auto's decisions to leave a record for a person are audited too. A release run's
-- id is a uuid, so the audit gains release_run_id (subject_id 0 for such rows); new actions and
-- subject types join the lists. The CHECK swap locks control_plane_audit, which only operator
-- actions write (as in 00020).
--
-- boardreadyops_release_run_cancel: marks an unfinished run and its current attempt cancelled,
-- completes its pending effects (available, dead_letter) as superseded by the cancellation, and
-- enqueues the check run's completion as cancelled through the existing
-- github.check_run.complete effect, whose key is deterministic (effect type, run, attempt). It
-- refuses a run with an effect in flight (leased: the dispatcher may be sending it right now;
-- try again after it) or a dispatch awaiting reconciliation (it may have started the workflow:
-- reconcile first). One audit row.
--
-- boardreadyops_release_run_stale_counts: the non-terminal runs older than a threshold, by
-- state, for lifecycle's upkeep (gauge boardreadyops_release_runs_stale); one range scan of
-- release_runs_status_created_idx (00023) per state.
--
-- dispatch_pauses: a durable pause of workflow dispatches, everywhere (installation_id 0) or
-- per installation. Both claims skip paused workflow dispatches (check runs keep flowing): they
-- stay available, no attempt spent, and are claimed once the pause is lifted. The pause table
-- is read once per claim into two variables; with no pause the added filter is a constant
-- false on every row. boardreadyops_outbox_dispatch_pause_reason tells lifecycle and the dispatchers
-- (for the check run's text) whether an installation's dispatches are paused and why.
--
-- boardreadyops_release_run_create_from_push records in the check run's creation payload why
-- dispatches are paused (dispatch_paused), so that the new check run says the release is paused.
--
-- installation_release_settings: an installation's defaults, between the deployment's
-- (configuration) and a repository's row; both gain excluded_tag_patterns (path.Match patterns
-- such as *-rc*: a tag matching one starts no release). A repository's enabled may now be NULL
-- (inherit). boardreadyops_release_run_create_from_push reads the installation's workflow file
-- when the repository has none.
--
-- New functions follow docs/operations.md, "Rules for a new function".

-- +goose Up
ALTER TABLE public.control_plane_audit ADD COLUMN release_run_id uuid;
ALTER TABLE public.control_plane_audit DROP CONSTRAINT control_plane_audit_action_check;
ALTER TABLE public.control_plane_audit ADD CONSTRAINT control_plane_audit_action_check CHECK (action IN (
    'outbox.replay', 'job.replay', 'outbox.reconciliation.repair', 'outbox.reconciliation.supersede',
    'outbox.restore_fence', 'outbox.reconciliation.left', 'release_run.cancel', 'dispatch.pause', 'dispatch.resume',
    'release_settings.set', 'release_settings.unset'));
ALTER TABLE public.control_plane_audit DROP CONSTRAINT control_plane_audit_subject_type_check;
ALTER TABLE public.control_plane_audit ADD CONSTRAINT control_plane_audit_subject_type_check CHECK (
    subject_type IN ('outbox', 'job', 'release_run', 'dispatch_pause', 'repository', 'installation'));
ALTER TABLE public.control_plane_audit ADD CONSTRAINT control_plane_audit_release_run_check CHECK (
    subject_type <> 'release_run' OR (release_run_id IS NOT NULL AND subject_id = 0));
CREATE INDEX control_plane_audit_release_run_idx ON public.control_plane_audit (release_run_id) WHERE release_run_id IS NOT NULL;

CREATE TABLE public.dispatch_pauses (
    installation_id bigint PRIMARY KEY CHECK (installation_id >= 0),
    operator        text NOT NULL CHECK (length(btrim(operator)) BETWEEN 1 AND 200),
    reason          text NOT NULL CHECK (length(btrim(reason)) BETWEEN 1 AND 2000),
    paused_at       timestamptz NOT NULL
);
GRANT SELECT ON public.dispatch_pauses TO boardreadyops_admin;

CREATE TABLE public.installation_release_settings (
    installation_id       bigint PRIMARY KEY REFERENCES public.installations (id) ON DELETE CASCADE,
    workflow_file         text CHECK (workflow_file ~ '^[A-Za-z0-9._-]{1,200}\.ya?ml$'),
    tag_pattern           text CHECK (length(tag_pattern) BETWEEN 1 AND 200),
    enabled               boolean,
    excluded_tag_patterns text[] CHECK (cardinality(excluded_tag_patterns) <= 20
                                        AND array_position(excluded_tag_patterns, NULL) IS NULL),
    updated_at            timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT ON public.installation_release_settings TO boardreadyops_lifecycle;
GRANT SELECT, INSERT, UPDATE, DELETE ON public.installation_release_settings TO boardreadyops_admin;

ALTER TABLE public.repository_release_settings ADD COLUMN excluded_tag_patterns text[]
    CHECK (cardinality(excluded_tag_patterns) <= 20 AND array_position(excluded_tag_patterns, NULL) IS NULL);
ALTER TABLE public.repository_release_settings ALTER COLUMN enabled DROP NOT NULL;
ALTER TABLE public.repository_release_settings ALTER COLUMN enabled DROP DEFAULT;

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_release_run_cancel(
    p_run_id uuid, p_operator text, p_reason text, p_check_run_name text, p_now timestamptz DEFAULT NULL)
RETURNS TABLE (check_run_outbox_id bigint, superseded integer)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now        timestamptz := public.boardreadyops_clock_now(p_now);
    run          public.release_runs;
    att          public.execution_attempts;
    v_outbox     bigint;
    v_superseded integer;
    v_busy       text;
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'cancelling needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'cancelling needs a reason' USING ERRCODE = '22023';
    END IF;
    IF p_check_run_name IS NULL OR length(p_check_run_name) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'check run name must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO run FROM public.release_runs r WHERE r.id = p_run_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'release run % does not exist', p_run_id USING ERRCODE = 'BR006';
    END IF;
    IF run.status IN ('succeeded', 'failed', 'cancelled') THEN
        RAISE EXCEPTION 'release run % is %: only an unfinished run is cancelled', p_run_id, run.status USING ERRCODE = 'BR003';
    END IF;
    SELECT string_agg(format('effect %s (%s) is %s', o.id, o.effect_type, o.status), '; ' ORDER BY o.id) INTO v_busy
    FROM public.control_plane_outbox o
    WHERE o.release_run_id = run.id AND o.status IN ('leased', 'reconciliation_required');
    IF v_busy IS NOT NULL THEN
        RAISE EXCEPTION 'release run % cannot be cancelled now: %', p_run_id, v_busy USING ERRCODE = 'BR003',
            HINT = 'a leased effect is being delivered: try again in a minute; a dispatch awaiting reconciliation may have started the workflow: brops reconcile inspect it first';
    END IF;

    WITH superseded AS (
        UPDATE public.control_plane_outbox o
        SET status = 'completed', completed_at = v_now, updated_at = v_now,
            result = jsonb_build_object('resolution', 'cancelled', 'previous_status', o.status, 'operator', p_operator)
        WHERE o.release_run_id = run.id AND o.status IN ('available', 'dead_letter')
        RETURNING o.id
    )
    SELECT count(*)::integer INTO v_superseded FROM superseded;

    UPDATE public.execution_attempts a
    SET status = 'cancelled', conclusion = 'cancelled', completed_at = v_now, updated_at = v_now
    WHERE a.release_run_id = run.id AND a.number = run.current_attempt AND a.status NOT IN ('succeeded', 'failed', 'cancelled')
    RETURNING * INTO att;
    UPDATE public.release_runs r SET status = 'cancelled', completed_at = v_now, updated_at = v_now WHERE r.id = run.id;

    -- The check run says so through the run's check-run update (00021): state 'cancelled', the
    -- reason as its notice, the newest update superseding any not sent yet.
    v_outbox := public.boardreadyops_release_run_enqueue_check_run(
        run.id, 'cancelled', left(format('An operator cancelled this release: %s', p_reason), 500), NULL, v_now);
    IF v_outbox IS NOT NULL THEN
        PERFORM pg_notify('boardreadyops_outbox', '');
    END IF;

    INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, release_run_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'release_run.cancel', 'release_run', 0, run.id, p_reason,
            jsonb_build_object('superseded_effects', v_superseded, 'check_run_outbox_id', v_outbox, 'attempt', run.current_attempt),
            run.status, 'cancelled');
    RETURN QUERY SELECT v_outbox, v_superseded;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_release_run_stale_counts(p_threshold interval, p_now timestamptz DEFAULT NULL)
RETURNS TABLE (status text, stale bigint)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_threshold IS NULL OR p_threshold < interval '1 minute' THEN
        RAISE EXCEPTION 'stale threshold must be at least 1 minute, got %', p_threshold USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT s.state, (SELECT count(*) FROM public.release_runs r WHERE r.status = s.state AND r.created_at < v_now - p_threshold)
    FROM unnest(ARRAY['requested', 'check_pending', 'dispatching', 'running', 'blocked']) WITH ORDINALITY AS s(state, ord)
    ORDER BY s.ord;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_pause_dispatches(p_installation_id bigint, p_operator text, p_reason text, p_now timestamptz DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now   timestamptz := public.boardreadyops_clock_now(p_now);
    v_scope bigint := coalesce(p_installation_id, 0);
    v_new   boolean;
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'pausing needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'pausing needs a reason' USING ERRCODE = '22023';
    END IF;
    IF v_scope < 0 OR (v_scope > 0 AND NOT EXISTS (SELECT 1 FROM public.installations i WHERE i.id = v_scope)) THEN
        RAISE EXCEPTION 'installation % is not recorded', v_scope USING ERRCODE = 'BR006';
    END IF;
    INSERT INTO public.dispatch_pauses (installation_id, operator, reason, paused_at) VALUES (v_scope, p_operator, p_reason, v_now)
    ON CONFLICT (installation_id) DO UPDATE SET operator = EXCLUDED.operator, reason = EXCLUDED.reason
    RETURNING xmax = 0 INTO v_new;
    INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'dispatch.pause', 'dispatch_pause', v_scope, p_reason, jsonb_build_object('scope', CASE WHEN v_scope = 0 THEN 'global' ELSE 'installation' END),
            CASE WHEN v_new THEN 'running' ELSE 'paused' END, 'paused');
    RETURN v_new;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_resume_dispatches(p_installation_id bigint, p_operator text, p_reason text, p_now timestamptz DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now   timestamptz := public.boardreadyops_clock_now(p_now);
    v_scope bigint := coalesce(p_installation_id, 0);
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'resuming needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'resuming needs a reason' USING ERRCODE = '22023';
    END IF;
    DELETE FROM public.dispatch_pauses p WHERE p.installation_id = v_scope;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'dispatch.resume', 'dispatch_pause', v_scope, p_reason, NULL, 'paused', 'running');
    PERFORM pg_notify('boardreadyops_outbox', '');
    RETURN true;
END;
$$;
-- +goose StatementEnd

-- Why the installation's workflow dispatches are paused (the global pause first), or NULL.
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_outbox_dispatch_pause_reason(p_installation_id bigint)
RETURNS text
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT p.reason FROM public.dispatch_pauses p WHERE p.installation_id IN (0, p_installation_id)
    ORDER BY p.installation_id LIMIT 1;
$$;
-- +goose StatementEnd

-- Both claims skip paused workflow dispatches (00018's bodies otherwise).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_claim(
    p_worker text, p_limit integer, p_lease interval, p_now timestamptz DEFAULT NULL)
RETURNS SETOF public.control_plane_outbox
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- Workflow dispatches paused (brops dispatch pause): everywhere, or of these installations.
    v_paused_all    boolean;
    v_paused        bigint[];
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_worker IS NULL OR length(p_worker) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'worker must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'claim limit must be between 1 and 1000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'lease must be between 1 second and 1 hour, got %', p_lease USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(bool_or(p.installation_id = 0), false), coalesce(array_agg(p.installation_id), '{}')
    INTO v_paused_all, v_paused FROM public.dispatch_pauses p;
    RETURN QUERY
    WITH due AS (
        SELECT o.id FROM public.control_plane_outbox o
        WHERE o.status = 'available' AND o.available_at <= v_now
          AND NOT (o.effect_type = 'github.workflow.dispatch' AND (v_paused_all OR o.installation_id = ANY (v_paused)))
          AND NOT EXISTS (SELECT 1 FROM public.github_installation_limits l
                          WHERE l.installation_id = o.installation_id AND l.blocked_until > v_now)
        ORDER BY o.available_at, o.id
        LIMIT p_limit
        FOR UPDATE OF o SKIP LOCKED
    )
    UPDATE public.control_plane_outbox o
    SET status = 'leased', lease_owner = p_worker, lease_expires_at = v_now + p_lease,
        attempts = o.attempts + 1, updated_at = v_now,
        delivery_started_at = CASE WHEN o.effect_type = 'github.workflow.dispatch' THEN o.delivery_started_at ELSE v_now END
    FROM due
    WHERE o.id = due.id
    RETURNING o.*;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_claim_paced(
    p_worker text, p_limit integer, p_lease interval, p_per_installation integer, p_mutation_interval interval,
    p_now timestamptz DEFAULT NULL)
RETURNS SETOF public.control_plane_outbox
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- Workflow dispatches paused (brops dispatch pause): everywhere, or of these installations.
    v_paused_all    boolean;
    v_paused        bigint[];
    v_now           timestamptz := public.boardreadyops_clock_now(p_now);
    v_ids           bigint[];
    v_installations bigint[];
    v_distinct      bigint[];
BEGIN
    IF p_worker IS NULL OR length(p_worker) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'worker must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'claim limit must be between 1 and 1000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'lease must be between 1 second and 1 hour, got %', p_lease USING ERRCODE = '22023';
    END IF;
    IF p_per_installation IS NULL OR p_per_installation NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'per-installation limit must be between 1 and 1000, got %', p_per_installation USING ERRCODE = '22023';
    END IF;
    IF p_mutation_interval IS NULL OR p_mutation_interval < interval '0' OR p_mutation_interval > interval '1 minute' THEN
        RAISE EXCEPTION 'mutation interval must be between 0 and 1 minute, got %', p_mutation_interval USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(bool_or(p.installation_id = 0), false), coalesce(array_agg(p.installation_id), '{}')
    INTO v_paused_all, v_paused FROM public.dispatch_pauses p;

    SELECT array_agg(c.id ORDER BY c.available_at, c.id), array_agg(c.installation_id ORDER BY c.available_at, c.id)
    INTO v_ids, v_installations
    FROM (
        SELECT o.id, o.installation_id, o.available_at FROM public.control_plane_outbox o
        WHERE o.status = 'available' AND o.available_at <= v_now
          AND NOT (o.effect_type = 'github.workflow.dispatch' AND (v_paused_all OR o.installation_id = ANY (v_paused)))
          AND NOT EXISTS (
              SELECT 1 FROM public.github_installation_limits l
              WHERE l.installation_id = o.installation_id
                AND (l.blocked_until > v_now OR l.next_allowed_at > v_now
                     OR (l.in_flight >= p_per_installation AND l.in_flight_expires_at > v_now)))
        ORDER BY o.available_at, o.id
        LIMIT least(4 * p_limit, 4000)
    ) c;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    v_distinct := ARRAY(SELECT DISTINCT i FROM unnest(v_installations) i ORDER BY i);
    -- An installation's first claim creates its row (in key order: concurrent claims creating
    -- the same rows wait for each other instead of deadlocking); for a known one the conflict
    -- check is one index probe and nothing is written.
    INSERT INTO public.github_installation_limits (installation_id, updated_at)
    SELECT i, v_now FROM unnest(v_distinct) i
    ON CONFLICT (installation_id) DO NOTHING;

    RETURN QUERY
    WITH gate AS (
        SELECT l.installation_id,
               p_per_installation - CASE WHEN l.in_flight_expires_at > v_now THEN l.in_flight ELSE 0 END AS room
        FROM public.github_installation_limits l
        WHERE l.installation_id = ANY (v_distinct)
          AND (l.blocked_until IS NULL OR l.blocked_until <= v_now)
          AND (l.next_allowed_at IS NULL OR l.next_allowed_at <= v_now)
          AND (l.in_flight < p_per_installation OR l.in_flight_expires_at IS NULL OR l.in_flight_expires_at <= v_now)
        FOR UPDATE SKIP LOCKED
    ), ranked AS (
        SELECT c.id, c.ord, g.room, row_number() OVER (PARTITION BY c.installation_id ORDER BY c.ord) AS rn
        FROM unnest(v_ids, v_installations) WITH ORDINALITY AS c(id, installation_id, ord)
        JOIN gate g ON g.installation_id = c.installation_id
    ), picked AS (
        SELECT r.id FROM ranked r
        WHERE r.rn <= CASE WHEN p_mutation_interval > interval '0' THEN least(r.room, 1) ELSE r.room END
        ORDER BY r.ord
        LIMIT p_limit
    ), chosen AS (
        SELECT o.id, o.installation_id FROM public.control_plane_outbox o
        JOIN picked p ON p.id = o.id
        WHERE o.status = 'available' AND o.available_at <= v_now
        FOR UPDATE OF o SKIP LOCKED
    ), paced AS (
        UPDATE public.github_installation_limits l
        SET in_flight = CASE WHEN l.in_flight_expires_at > v_now THEN l.in_flight ELSE 0 END + n.n,
            in_flight_expires_at = v_now + p_lease,
            next_allowed_at = CASE WHEN p_mutation_interval > interval '0' THEN v_now + p_mutation_interval ELSE l.next_allowed_at END,
            updated_at = v_now
        FROM (SELECT installation_id, count(*)::integer AS n FROM chosen GROUP BY installation_id) n
        WHERE l.installation_id = n.installation_id
    )
    UPDATE public.control_plane_outbox o
    SET status = 'leased', lease_owner = p_worker, lease_expires_at = v_now + p_lease,
        attempts = o.attempts + 1, updated_at = v_now,
        delivery_started_at = CASE WHEN o.effect_type = 'github.workflow.dispatch' THEN o.delivery_started_at ELSE v_now END
    FROM chosen
    WHERE o.id = chosen.id
    RETURNING o.*;
END;
$$;
-- +goose StatementEnd

-- The workflow file: the repository's, else the installation's default, else the deployment's.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_create_from_push(
    p_job_id bigint, p_worker text, p_default_workflow_file text, p_check_run_name text,
    p_traceparent text DEFAULT NULL, p_now timestamptz DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    j public.control_plane_jobs;
    i public.webhook_inbox;
    repo public.repositories;
    v_workflow_file text;
    v_ref text;
    v_sha text;
    v_run uuid;
BEGIN
    IF p_check_run_name IS NULL OR length(p_check_run_name) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'check run name must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    j := public.boardreadyops_job_lock_leased(p_job_id, p_worker);
    SELECT * INTO i FROM public.webhook_inbox WHERE id = j.inbox_id;
    IF i.event IS DISTINCT FROM 'push' OR i.installation_id IS NULL OR i.repository_id IS NULL THEN
        RAISE EXCEPTION 'job % is not a push delivery of a repository', p_job_id USING ERRCODE = 'BR005';
    END IF;
    v_ref := i.payload -> 'push' ->> 'ref';
    v_sha := i.payload -> 'push' ->> 'after';
    -- A repository recorded under another installation (or not at all) gets no run: its
    -- installation_repositories change has not been applied yet, or the job is not what it seems.
    SELECT * INTO repo FROM public.repositories WHERE id = i.repository_id;
    IF NOT FOUND OR repo.installation_id <> i.installation_id THEN
        RETURN NULL;
    END IF;
    -- The repository's setting, else its installation's default (00024), else the deployment's.
    SELECT coalesce(s.workflow_file, d.workflow_file, p_default_workflow_file) INTO v_workflow_file
    FROM (SELECT 1) one
    LEFT JOIN public.repository_release_settings s ON s.repository_id = repo.id
    LEFT JOIN public.installation_release_settings d ON d.installation_id = repo.installation_id;

    INSERT INTO public.release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status, created_at, updated_at)
    VALUES (repo.id, i.installation_id, v_ref, v_sha, v_workflow_file, 'check_pending', v_now, v_now)
    ON CONFLICT ON CONSTRAINT release_runs_identity_key DO NOTHING
    RETURNING id INTO v_run;
    IF v_run IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO public.execution_attempts (release_run_id, number, created_at, updated_at) VALUES (v_run, 1, v_now, v_now);
    PERFORM public.boardreadyops_outbox_enqueue(
        'github.check_run.create', v_run, NULL, i.installation_id,
        jsonb_build_object(
            'release_run_id', v_run,
            'installation_id', i.installation_id,
            'repository_id', repo.id,
            'repository_full_name', repo.full_name,
            'head_sha', v_sha,
            'ref', v_ref,
            'tag', substr(v_ref, length('refs/tags/') + 1),
            'name', p_check_run_name,
            'external_id', v_run,
            'dispatch_paused', public.boardreadyops_outbox_dispatch_pause_reason(i.installation_id)),
        p_traceparent, 10, v_now);
    RETURN v_run;
END;
$$;
-- +goose StatementEnd

ALTER TABLE public.dispatch_pauses OWNER TO boardreadyops_schema_owner;
ALTER TABLE public.installation_release_settings OWNER TO boardreadyops_schema_owner;
ALTER FUNCTION public.boardreadyops_release_run_cancel(uuid, text, text, text, timestamptz) OWNER TO boardreadyops_schema_owner;
ALTER FUNCTION public.boardreadyops_release_run_stale_counts(interval, timestamptz) OWNER TO boardreadyops_schema_owner;
ALTER FUNCTION public.boardreadyops_outbox_pause_dispatches(bigint, text, text, timestamptz) OWNER TO boardreadyops_schema_owner;
ALTER FUNCTION public.boardreadyops_outbox_resume_dispatches(bigint, text, text, timestamptz) OWNER TO boardreadyops_schema_owner;
ALTER FUNCTION public.boardreadyops_outbox_dispatch_pause_reason(bigint) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_release_run_cancel(uuid, text, text, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_release_run_cancel(uuid, text, text, text, timestamptz) TO boardreadyops_admin;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_release_run_stale_counts(interval, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_release_run_stale_counts(interval, timestamptz) TO boardreadyops_lifecycle, boardreadyops_operator, boardreadyops_admin;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_outbox_pause_dispatches(bigint, text, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_pause_dispatches(bigint, text, text, timestamptz) TO boardreadyops_admin;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_outbox_resume_dispatches(bigint, text, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_resume_dispatches(bigint, text, text, timestamptz) TO boardreadyops_admin;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_outbox_dispatch_pause_reason(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_outbox_dispatch_pause_reason(bigint) TO boardreadyops_lifecycle, boardreadyops_dispatcher, boardreadyops_admin;

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_release_run_create_from_push(
    p_job_id bigint, p_worker text, p_default_workflow_file text, p_check_run_name text,
    p_traceparent text DEFAULT NULL, p_now timestamptz DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
    j public.control_plane_jobs;
    i public.webhook_inbox;
    repo public.repositories;
    v_workflow_file text;
    v_ref text;
    v_sha text;
    v_run uuid;
BEGIN
    IF p_check_run_name IS NULL OR length(p_check_run_name) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'check run name must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    j := public.boardreadyops_job_lock_leased(p_job_id, p_worker);
    SELECT * INTO i FROM public.webhook_inbox WHERE id = j.inbox_id;
    IF i.event IS DISTINCT FROM 'push' OR i.installation_id IS NULL OR i.repository_id IS NULL THEN
        RAISE EXCEPTION 'job % is not a push delivery of a repository', p_job_id USING ERRCODE = 'BR005';
    END IF;
    v_ref := i.payload -> 'push' ->> 'ref';
    v_sha := i.payload -> 'push' ->> 'after';
    -- A repository recorded under another installation (or not at all) gets no run: its
    -- installation_repositories change has not been applied yet, or the job is not what it seems.
    SELECT * INTO repo FROM public.repositories WHERE id = i.repository_id;
    IF NOT FOUND OR repo.installation_id <> i.installation_id THEN
        RETURN NULL;
    END IF;
    SELECT s.workflow_file INTO v_workflow_file FROM public.repository_release_settings s WHERE s.repository_id = repo.id;
    v_workflow_file := coalesce(v_workflow_file, p_default_workflow_file);

    INSERT INTO public.release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status, created_at, updated_at)
    VALUES (repo.id, i.installation_id, v_ref, v_sha, v_workflow_file, 'check_pending', v_now, v_now)
    ON CONFLICT ON CONSTRAINT release_runs_identity_key DO NOTHING
    RETURNING id INTO v_run;
    IF v_run IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO public.execution_attempts (release_run_id, number, created_at, updated_at) VALUES (v_run, 1, v_now, v_now);
    PERFORM public.boardreadyops_outbox_enqueue(
        'github.check_run.create', v_run, NULL, i.installation_id,
        jsonb_build_object(
            'release_run_id', v_run,
            'installation_id', i.installation_id,
            'repository_id', repo.id,
            'repository_full_name', repo.full_name,
            'head_sha', v_sha,
            'ref', v_ref,
            'tag', substr(v_ref, length('refs/tags/') + 1),
            'name', p_check_run_name,
            'external_id', v_run),
        p_traceparent, 10, v_now);
    RETURN v_run;
END;
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_claim_paced(
    p_worker text, p_limit integer, p_lease interval, p_per_installation integer, p_mutation_interval interval,
    p_now timestamptz DEFAULT NULL)
RETURNS SETOF public.control_plane_outbox
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now           timestamptz := public.boardreadyops_clock_now(p_now);
    v_ids           bigint[];
    v_installations bigint[];
    v_distinct      bigint[];
BEGIN
    IF p_worker IS NULL OR length(p_worker) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'worker must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'claim limit must be between 1 and 1000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'lease must be between 1 second and 1 hour, got %', p_lease USING ERRCODE = '22023';
    END IF;
    IF p_per_installation IS NULL OR p_per_installation NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'per-installation limit must be between 1 and 1000, got %', p_per_installation USING ERRCODE = '22023';
    END IF;
    IF p_mutation_interval IS NULL OR p_mutation_interval < interval '0' OR p_mutation_interval > interval '1 minute' THEN
        RAISE EXCEPTION 'mutation interval must be between 0 and 1 minute, got %', p_mutation_interval USING ERRCODE = '22023';
    END IF;

    SELECT array_agg(c.id ORDER BY c.available_at, c.id), array_agg(c.installation_id ORDER BY c.available_at, c.id)
    INTO v_ids, v_installations
    FROM (
        SELECT o.id, o.installation_id, o.available_at FROM public.control_plane_outbox o
        WHERE o.status = 'available' AND o.available_at <= v_now
          AND NOT EXISTS (
              SELECT 1 FROM public.github_installation_limits l
              WHERE l.installation_id = o.installation_id
                AND (l.blocked_until > v_now OR l.next_allowed_at > v_now
                     OR (l.in_flight >= p_per_installation AND l.in_flight_expires_at > v_now)))
        ORDER BY o.available_at, o.id
        LIMIT least(4 * p_limit, 4000)
    ) c;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    v_distinct := ARRAY(SELECT DISTINCT i FROM unnest(v_installations) i ORDER BY i);
    -- An installation's first claim creates its row (in key order: concurrent claims creating
    -- the same rows wait for each other instead of deadlocking); for a known one the conflict
    -- check is one index probe and nothing is written.
    INSERT INTO public.github_installation_limits (installation_id, updated_at)
    SELECT i, v_now FROM unnest(v_distinct) i
    ON CONFLICT (installation_id) DO NOTHING;

    RETURN QUERY
    WITH gate AS (
        SELECT l.installation_id,
               p_per_installation - CASE WHEN l.in_flight_expires_at > v_now THEN l.in_flight ELSE 0 END AS room
        FROM public.github_installation_limits l
        WHERE l.installation_id = ANY (v_distinct)
          AND (l.blocked_until IS NULL OR l.blocked_until <= v_now)
          AND (l.next_allowed_at IS NULL OR l.next_allowed_at <= v_now)
          AND (l.in_flight < p_per_installation OR l.in_flight_expires_at IS NULL OR l.in_flight_expires_at <= v_now)
        FOR UPDATE SKIP LOCKED
    ), ranked AS (
        SELECT c.id, c.ord, g.room, row_number() OVER (PARTITION BY c.installation_id ORDER BY c.ord) AS rn
        FROM unnest(v_ids, v_installations) WITH ORDINALITY AS c(id, installation_id, ord)
        JOIN gate g ON g.installation_id = c.installation_id
    ), picked AS (
        SELECT r.id FROM ranked r
        WHERE r.rn <= CASE WHEN p_mutation_interval > interval '0' THEN least(r.room, 1) ELSE r.room END
        ORDER BY r.ord
        LIMIT p_limit
    ), chosen AS (
        SELECT o.id, o.installation_id FROM public.control_plane_outbox o
        JOIN picked p ON p.id = o.id
        WHERE o.status = 'available' AND o.available_at <= v_now
        FOR UPDATE OF o SKIP LOCKED
    ), paced AS (
        UPDATE public.github_installation_limits l
        SET in_flight = CASE WHEN l.in_flight_expires_at > v_now THEN l.in_flight ELSE 0 END + n.n,
            in_flight_expires_at = v_now + p_lease,
            next_allowed_at = CASE WHEN p_mutation_interval > interval '0' THEN v_now + p_mutation_interval ELSE l.next_allowed_at END,
            updated_at = v_now
        FROM (SELECT installation_id, count(*)::integer AS n FROM chosen GROUP BY installation_id) n
        WHERE l.installation_id = n.installation_id
    )
    UPDATE public.control_plane_outbox o
    SET status = 'leased', lease_owner = p_worker, lease_expires_at = v_now + p_lease,
        attempts = o.attempts + 1, updated_at = v_now,
        delivery_started_at = CASE WHEN o.effect_type = 'github.workflow.dispatch' THEN o.delivery_started_at ELSE v_now END
    FROM chosen
    WHERE o.id = chosen.id
    RETURNING o.*;
END;
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION public.boardreadyops_outbox_claim(
    p_worker text, p_limit integer, p_lease interval, p_now timestamptz DEFAULT NULL)
RETURNS SETOF public.control_plane_outbox
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := public.boardreadyops_clock_now(p_now);
BEGIN
    IF p_worker IS NULL OR length(p_worker) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'worker must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'claim limit must be between 1 and 1000, got %', p_limit USING ERRCODE = '22023';
    END IF;
    IF p_lease IS NULL OR p_lease < interval '1 second' OR p_lease > interval '1 hour' THEN
        RAISE EXCEPTION 'lease must be between 1 second and 1 hour, got %', p_lease USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    WITH due AS (
        SELECT o.id FROM public.control_plane_outbox o
        WHERE o.status = 'available' AND o.available_at <= v_now
          AND NOT EXISTS (SELECT 1 FROM public.github_installation_limits l
                          WHERE l.installation_id = o.installation_id AND l.blocked_until > v_now)
        ORDER BY o.available_at, o.id
        LIMIT p_limit
        FOR UPDATE OF o SKIP LOCKED
    )
    UPDATE public.control_plane_outbox o
    SET status = 'leased', lease_owner = p_worker, lease_expires_at = v_now + p_lease,
        attempts = o.attempts + 1, updated_at = v_now,
        delivery_started_at = CASE WHEN o.effect_type = 'github.workflow.dispatch' THEN o.delivery_started_at ELSE v_now END
    FROM due
    WHERE o.id = due.id
    RETURNING o.*;
END;
$$;
-- +goose StatementEnd
DROP FUNCTION public.boardreadyops_outbox_dispatch_pause_reason(bigint);
DROP FUNCTION public.boardreadyops_outbox_resume_dispatches(bigint, text, text, timestamptz);
DROP FUNCTION public.boardreadyops_outbox_pause_dispatches(bigint, text, text, timestamptz);
DROP FUNCTION public.boardreadyops_release_run_stale_counts(interval, timestamptz);
DROP FUNCTION public.boardreadyops_release_run_cancel(uuid, text, text, text, timestamptz);
DROP TABLE public.dispatch_pauses;
DROP TABLE public.installation_release_settings;
UPDATE public.repository_release_settings SET enabled = true WHERE enabled IS NULL;
ALTER TABLE public.repository_release_settings ALTER COLUMN enabled SET DEFAULT true;
ALTER TABLE public.repository_release_settings ALTER COLUMN enabled SET NOT NULL;
ALTER TABLE public.repository_release_settings DROP COLUMN excluded_tag_patterns;
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM public.control_plane_audit WHERE release_run_id IS NOT NULL
               OR action NOT IN ('outbox.replay', 'job.replay', 'outbox.reconciliation.repair',
                                 'outbox.reconciliation.supersede', 'outbox.restore_fence')) THEN
        RAISE EXCEPTION 'control_plane_audit holds rows of the actions of 00024; the audit trail is never rewritten'
            USING ERRCODE = '55000';
    END IF;
END;
$$;
-- +goose StatementEnd
DROP INDEX public.control_plane_audit_release_run_idx;
ALTER TABLE public.control_plane_audit DROP CONSTRAINT control_plane_audit_release_run_check;
ALTER TABLE public.control_plane_audit DROP CONSTRAINT control_plane_audit_subject_type_check;
ALTER TABLE public.control_plane_audit ADD CONSTRAINT control_plane_audit_subject_type_check CHECK (subject_type IN ('outbox', 'job'));
ALTER TABLE public.control_plane_audit DROP CONSTRAINT control_plane_audit_action_check;
ALTER TABLE public.control_plane_audit ADD CONSTRAINT control_plane_audit_action_check CHECK (action IN (
    'outbox.replay', 'job.replay', 'outbox.reconciliation.repair', 'outbox.reconciliation.supersede',
    'outbox.restore_fence'));
ALTER TABLE public.control_plane_audit DROP COLUMN release_run_id;
