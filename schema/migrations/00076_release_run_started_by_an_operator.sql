-- An operator starts the release run of a tag whose push started none: `brops release-runs
-- create` (docs/operations.md, "Release runs: show, list, cancel").
--
-- GitHub sends no push event for tags when more than three are pushed at once (`git push --tags`
-- with four new release tags starts no release, and nothing says so), and a tag's push delivery
-- may be lost for good (past GitHub's redelivery window). The only admin run creator,
-- boardreadyops_release_run_create, applies none of the push path's rules and writes no audit row.
-- boardreadyops_release_run_start applies them, in the push path's order (lifecycle's
-- pushDecision, then boardreadyops_release_run_create_from_push):
--
--   the repository installed (not removed), its installation neither deleted nor suspended, the
--   repository not archived, releases enabled (the repository's setting, else its installation's,
--   else enabled), the tag released by the effective tag pattern and its exclusions, the workflow
--   file from the repository's setting, else its installation's, else the deployment's, a dispatch
--   pause noted in the check-run creation (dispatch_paused), and the same tag at the same commit
--   creating nothing (the existing run is returned, created false).
--
-- The tag pattern is lifecycle's Go rule (path.Match on the tag name: the pattern, then each
-- excluded pattern), which SQL has no equal of: the caller evaluates it in Go on the effective
-- settings it reads in the same transaction, as lifecycle does before its call, and passes why
-- the tag starts no release as p_tag_refusal (NULL: it does). The function refuses with that
-- reason after its own rules, where the push path checks the pattern.
--
-- Each refusal names its rule (SQLSTATE BR003; BR006 for a repository not recorded; 22023 for a
-- malformed argument). A run created writes one audit row, 'release_run.start' (the audit action
-- constraint is replaced: one scan of control_plane_audit, an operator-action table, not a hot
-- one, under ACCESS EXCLUSIVE, as 00030). New functions follow docs/operations.md, "Rules for a
-- new function".

-- +goose Up
ALTER TABLE public.control_plane_audit DROP CONSTRAINT control_plane_audit_action_check;
ALTER TABLE public.control_plane_audit ADD CONSTRAINT control_plane_audit_action_check CHECK (action IN (
    'outbox.replay', 'job.replay', 'outbox.reconciliation.repair', 'outbox.reconciliation.supersede',
    'outbox.restore_fence', 'outbox.reconciliation.left', 'release_run.cancel', 'dispatch.pause', 'dispatch.resume',
    'release_settings.set', 'release_settings.unset', 'check_run.retry.refused', 'release_run.start'));

-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_release_run_start(
    p_repository_id bigint, p_tag text, p_head_sha text, p_operator text, p_reason text,
    p_default_workflow_file text, p_check_run_name text, p_tag_refusal text, p_now timestamptz DEFAULT NULL)
RETURNS TABLE(release_run_id uuid, created boolean, workflow_file text, dispatch_paused text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now      timestamptz := public.boardreadyops_clock_now(p_now);
    repo       public.repositories;
    inst       public.installations;
    v_ref      text;
    v_enabled  boolean;
    v_workflow text;
    v_paused   text;
    v_run      uuid;
    v_outbox   bigint;
BEGIN
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'starting a release run needs the operator''s identity' USING ERRCODE = '22023';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'starting a release run needs a reason' USING ERRCODE = '22023';
    END IF;
    IF p_check_run_name IS NULL OR length(p_check_run_name) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'check run name must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    -- The tag's name (release_runs' ref rule: refs/tags/ and at most 512 characters in all).
    IF p_tag IS NULL OR p_tag = '' OR length(p_tag) > 502 OR p_tag LIKE 'refs/tags/%' OR p_tag ~ '[[:space:][:cntrl:]]' THEN
        RAISE EXCEPTION 'tag %: want a tag name such as v1.4.2 (without refs/tags/), at most 502 characters, no spaces', quote_nullable(p_tag)
            USING ERRCODE = '22023';
    END IF;
    -- The tagged commit, as a push's head_commit.id (00075): for an annotated tag not the tag object.
    IF p_head_sha IS NULL OR length(p_head_sha) NOT IN (40, 64) OR p_head_sha !~ '^[0-9a-f]+$' THEN
        RAISE EXCEPTION 'commit %: want the tagged commit''s SHA, 40 or 64 lowercase hexadecimal digits', quote_nullable(p_head_sha)
            USING ERRCODE = '22023', HINT = 'git rev-parse TAG^{commit} (for an annotated tag, not the tag object''s SHA)';
    END IF;
    v_ref := 'refs/tags/' || p_tag;

    SELECT * INTO repo FROM public.repositories r WHERE r.id = p_repository_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'repository % is not recorded', p_repository_id USING ERRCODE = 'BR006';
    END IF;
    IF repo.removed_at IS NOT NULL THEN
        RAISE EXCEPTION 'repository % is not installed: it was removed from its installation or deleted (%)', repo.full_name, repo.removed_at
            USING ERRCODE = 'BR003', HINT = 'a release starts only in a repository the App is installed on';
    END IF;
    SELECT * INTO inst FROM public.installations i WHERE i.id = repo.installation_id;
    IF inst.deleted_at IS NOT NULL THEN
        RAISE EXCEPTION 'installation % (%) of repository % is not active: the App was uninstalled (%)',
            inst.id, inst.account_login, repo.full_name, inst.deleted_at USING ERRCODE = 'BR003';
    END IF;
    IF inst.suspended_at IS NOT NULL THEN
        RAISE EXCEPTION 'installation % (%) of repository % is not active: it is suspended (since %)',
            inst.id, inst.account_login, repo.full_name, inst.suspended_at
            USING ERRCODE = 'BR003', HINT = 'unsuspend the App on GitHub first';
    END IF;
    IF repo.archived THEN
        RAISE EXCEPTION 'repository % is archived', repo.full_name
            USING ERRCODE = 'BR003', HINT = 'unarchive it on GitHub first';
    END IF;
    -- Enabled and the workflow file: the repository's setting, else its installation's default
    -- (00024), else the deployment's (enabled; the caller's default workflow file).
    SELECT coalesce(s.enabled, d.enabled, true), coalesce(s.workflow_file, d.workflow_file, p_default_workflow_file)
    INTO v_enabled, v_workflow
    FROM (SELECT 1) one
    LEFT JOIN public.repository_release_settings s ON s.repository_id = repo.id
    LEFT JOIN public.installation_release_settings d ON d.installation_id = repo.installation_id;
    IF NOT v_enabled THEN
        RAISE EXCEPTION 'releases are disabled for repository % (its release settings, or its installation''s)', repo.full_name
            USING ERRCODE = 'BR003', HINT = format('brops repos settings get %s', repo.full_name);
    END IF;
    IF p_tag_refusal IS NOT NULL THEN
        RAISE EXCEPTION 'tag % of repository % starts no release: %', p_tag, repo.full_name, p_tag_refusal
            USING ERRCODE = 'BR003', HINT = format('brops repos settings get %s', repo.full_name);
    END IF;
    IF v_workflow IS NULL THEN
        RAISE EXCEPTION 'no release workflow file: repository % and its installation set none, and no default was given', repo.full_name
            USING ERRCODE = '22023';
    END IF;
    v_paused := public.boardreadyops_outbox_dispatch_pause_reason(repo.installation_id);

    INSERT INTO public.release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status, created_at, updated_at)
    VALUES (repo.id, repo.installation_id, v_ref, p_head_sha, v_workflow, 'check_pending', v_now, v_now)
    ON CONFLICT ON CONSTRAINT release_runs_identity_key DO NOTHING
    RETURNING id INTO v_run;
    IF v_run IS NULL THEN
        -- This tag at this commit already has its run (a push's, or an operator's): nothing new.
        RETURN QUERY
        SELECT r.id, false, r.workflow_file, v_paused
        FROM public.release_runs r
        WHERE r.repository_id = repo.id AND r.ref = v_ref AND r.head_sha = p_head_sha;
        RETURN;
    END IF;
    INSERT INTO public.execution_attempts (release_run_id, number, created_at, updated_at) VALUES (v_run, 1, v_now, v_now);
    -- The check run's creation, as a push's (boardreadyops_release_run_create_from_push).
    v_outbox := public.boardreadyops_outbox_enqueue(
        'github.check_run.create', v_run, NULL, repo.installation_id,
        jsonb_build_object(
            'release_run_id', v_run,
            'installation_id', repo.installation_id,
            'repository_id', repo.id,
            'repository_full_name', repo.full_name,
            'head_sha', p_head_sha,
            'ref', v_ref,
            'tag', p_tag,
            'name', p_check_run_name,
            'external_id', v_run,
            'dispatch_paused', v_paused),
        NULL, 10, v_now);
    PERFORM pg_notify('boardreadyops_outbox', '');

    INSERT INTO public.control_plane_audit (occurred_at, operator, action, subject_type, subject_id, release_run_id, reason, evidence, from_status, to_status)
    VALUES (v_now, p_operator, 'release_run.start', 'release_run', 0, v_run, p_reason,
            jsonb_build_object('repository_id', repo.id, 'repository_full_name', repo.full_name, 'installation_id', repo.installation_id,
                               'tag', p_tag, 'head_sha', p_head_sha, 'workflow_file', v_workflow,
                               'check_run_outbox_id', v_outbox, 'dispatch_paused', v_paused),
            'none', 'check_pending');
    RETURN QUERY SELECT v_run, true, v_workflow, v_paused;
END;
$$;
-- +goose StatementEnd
ALTER FUNCTION public.boardreadyops_release_run_start(bigint, text, text, text, text, text, text, text, timestamptz) OWNER TO boardreadyops_schema_owner;
REVOKE EXECUTE ON FUNCTION public.boardreadyops_release_run_start(bigint, text, text, text, text, text, text, text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.boardreadyops_release_run_start(bigint, text, text, text, text, text, text, text, timestamptz) TO boardreadyops_admin;

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM public.control_plane_audit WHERE action = 'release_run.start') THEN
        RAISE EXCEPTION 'control_plane_audit holds runs started by operators; the audit trail is never rewritten' USING ERRCODE = '55000';
    END IF;
END;
$$;
-- +goose StatementEnd
DROP FUNCTION public.boardreadyops_release_run_start(bigint, text, text, text, text, text, text, text, timestamptz);
ALTER TABLE public.control_plane_audit DROP CONSTRAINT control_plane_audit_action_check;
ALTER TABLE public.control_plane_audit ADD CONSTRAINT control_plane_audit_action_check CHECK (action IN (
    'outbox.replay', 'job.replay', 'outbox.reconciliation.repair', 'outbox.reconciliation.supersede',
    'outbox.restore_fence', 'outbox.reconciliation.left', 'release_run.cancel', 'dispatch.pause', 'dispatch.resume',
    'release_settings.set', 'release_settings.unset', 'check_run.retry.refused'));
