-- One naming pattern for the SQL functions (issue 18): boardreadyops_<entity>_<verb>[_<qualifier>],
-- where the entity is webhook (the inbox), job (control_plane_jobs), outbox
-- (control_plane_outbox), release_run, execution_attempt or retention, and a set-based version
-- ends in _batch. The row-rule functions of 00009 become <entity>_validate_row, so that nothing
-- named "check" can be mistaken for a GitHub check run. boardreadyops_schema_version keeps its
-- name (every binary's readiness check calls it) and so do the helpers that already follow the
-- pattern (boardreadyops_job_lock_leased, boardreadyops_outbox_lock_leased,
-- boardreadyops_outbox_advance_dispatched_attempt, boardreadyops_outbox_enqueue_attempt_dispatch).
--
-- How, in three steps of one transaction:
--   1. ALTER FUNCTION ... RENAME keeps each function's OID, so the CHECK constraints of 00009
--      (which store the OID of their function), the grants and the comments follow the rename.
--   2. A function body is text, resolved by name when it runs: the bodies that call a renamed
--      function (the row rules call boardreadyops_check_violation; boardreadyops_create_release_run
--      and boardreadyops_outbox_enqueue_attempt_dispatch call
--      boardreadyops_enqueue_control_plane_outbox) are recreated from pg_get_functiondef with the
--      new names, word for word otherwise.
--   3. Rolling upgrades: while a release rolls out, pods of the previous release run against this
--      schema and call the old names. Each old name stays as a thin deprecated wrapper with the
--      same arguments (and defaults), result, volatility and EXECUTE privileges, SECURITY INVOKER
--      and calling the new name, so it grants nothing the caller could not already do. A later
--      release drops the wrappers, except one: boardreadyops_replay_control_plane_outbox is the
--      name the outbox specification gives the operator's replay of a dead-letter effect, so that
--      wrapper is permanent (its comment says so).
-- Down drops the wrappers and renames back; it reads the map from the wrappers' comments, which
-- name the function each wrapper calls.
--
-- The live definitions are in schema/current.sql (make generate).

-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE
    -- {old name, new name}
    v_renames CONSTANT text[] := ARRAY[
        ['boardreadyops_accept_webhook', 'boardreadyops_webhook_accept'],
        ['boardreadyops_accept_webhooks', 'boardreadyops_webhook_accept_batch'],
        ['boardreadyops_check_webhook_inbox', 'boardreadyops_webhook_validate_row'],
        ['boardreadyops_check_control_plane_jobs', 'boardreadyops_job_validate_row'],
        ['boardreadyops_check_control_plane_outbox', 'boardreadyops_outbox_validate_row'],
        ['boardreadyops_check_release_runs', 'boardreadyops_release_run_validate_row'],
        ['boardreadyops_check_execution_attempts', 'boardreadyops_execution_attempt_validate_row'],
        ['boardreadyops_check_violation', 'boardreadyops_row_rule_violation'],
        ['boardreadyops_claim_control_plane_jobs', 'boardreadyops_job_claim'],
        ['boardreadyops_complete_control_plane_job', 'boardreadyops_job_complete'],
        ['boardreadyops_complete_control_plane_jobs', 'boardreadyops_job_complete_batch'],
        ['boardreadyops_control_plane_job_stats', 'boardreadyops_job_stats'],
        ['boardreadyops_dead_letter_control_plane_job', 'boardreadyops_job_dead_letter'],
        ['boardreadyops_defer_control_plane_job', 'boardreadyops_job_defer'],
        ['boardreadyops_recover_control_plane_job_leases', 'boardreadyops_job_recover_leases'],
        ['boardreadyops_release_control_plane_job', 'boardreadyops_job_release'],
        ['boardreadyops_replay_control_plane_job', 'boardreadyops_job_replay'],
        ['boardreadyops_retry_control_plane_job', 'boardreadyops_job_retry'],
        ['boardreadyops_claim_control_plane_outbox', 'boardreadyops_outbox_claim'],
        ['boardreadyops_start_control_plane_outbox_delivery', 'boardreadyops_outbox_start_delivery'],
        ['boardreadyops_start_control_plane_outbox_delivery_batch', 'boardreadyops_outbox_start_delivery_batch'],
        ['boardreadyops_complete_check_run_create', 'boardreadyops_outbox_complete_check_run_create'],
        ['boardreadyops_complete_check_run_complete', 'boardreadyops_outbox_complete_check_run_complete'],
        ['boardreadyops_complete_check_run_complete_batch', 'boardreadyops_outbox_complete_check_run_complete_batch'],
        ['boardreadyops_complete_workflow_dispatch', 'boardreadyops_outbox_complete_workflow_dispatch'],
        ['boardreadyops_control_plane_outbox_stats', 'boardreadyops_outbox_stats'],
        ['boardreadyops_dead_letter_control_plane_outbox', 'boardreadyops_outbox_dead_letter'],
        ['boardreadyops_dead_letter_installation_outbox', 'boardreadyops_outbox_dead_letter_installation'],
        ['boardreadyops_defer_control_plane_outbox', 'boardreadyops_outbox_defer'],
        ['boardreadyops_enqueue_control_plane_outbox', 'boardreadyops_outbox_enqueue'],
        ['boardreadyops_recover_control_plane_outbox_leases', 'boardreadyops_outbox_recover_leases'],
        ['boardreadyops_release_control_plane_outbox', 'boardreadyops_outbox_release'],
        ['boardreadyops_replay_control_plane_outbox', 'boardreadyops_outbox_replay'],
        ['boardreadyops_retry_control_plane_outbox', 'boardreadyops_outbox_retry'],
        ['boardreadyops_require_control_plane_outbox_reconciliation', 'boardreadyops_outbox_require_reconciliation'],
        ['boardreadyops_resolve_workflow_dispatch_reconciliation', 'boardreadyops_outbox_resolve_reconciliation'],
        ['boardreadyops_create_release_run', 'boardreadyops_release_run_create'],
        ['boardreadyops_start_next_execution_attempt', 'boardreadyops_execution_attempt_start_next'],
        ['boardreadyops_sweep_control_plane_retention', 'boardreadyops_retention_sweep']
    ];
    v_pair text[];
    v_fn record;
    v_def text;
    v_renamed text;
    v_wrapper text;
    v_grantee text;
BEGIN
    -- 1. Rename, keeping the OIDs.
    FOREACH v_pair SLICE 1 IN ARRAY v_renames LOOP
        SELECT p.oid::regprocedure::text AS signature INTO STRICT v_fn
        FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace AND p.proname = v_pair[1];
        EXECUTE format('ALTER FUNCTION %s RENAME TO %I', v_fn.signature, v_pair[2]);
    END LOOP;

    -- 2. Recreate the bodies that call a renamed function with the new names (\m and \M are word
    -- boundaries, so boardreadyops_accept_webhook does not match inside boardreadyops_accept_webhooks).
    FOR v_fn IN SELECT p.oid FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace ORDER BY p.proname LOOP
        v_def := pg_get_functiondef(v_fn.oid);
        v_renamed := v_def;
        FOREACH v_pair SLICE 1 IN ARRAY v_renames LOOP
            v_renamed := regexp_replace(v_renamed, '\m' || v_pair[1] || '\M', v_pair[2], 'g');
        END LOOP;
        IF v_renamed <> v_def THEN
            EXECUTE v_renamed;
        END IF;
    END LOOP;

    -- 3. The old names as deprecated wrappers of the new ones.
    FOREACH v_pair SLICE 1 IN ARRAY v_renames LOOP
        SELECT p.oid, p.pronargs, p.proowner, p.proacl,
               pg_get_function_arguments(p.oid) AS arguments,
               pg_get_function_identity_arguments(p.oid) AS identity_arguments,
               pg_get_function_result(p.oid) AS result,
               CASE p.provolatile WHEN 'i' THEN 'IMMUTABLE' WHEN 's' THEN 'STABLE' ELSE 'VOLATILE' END AS volatility,
               CASE p.proparallel WHEN 's' THEN 'PARALLEL SAFE' WHEN 'r' THEN 'PARALLEL RESTRICTED' ELSE 'PARALLEL UNSAFE' END AS parallel
        INTO STRICT v_fn
        FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace AND p.proname = v_pair[2];
        v_wrapper := format('public.%I(%s)', v_pair[1], v_fn.identity_arguments);
        EXECUTE format(
            'CREATE OR REPLACE FUNCTION public.%I(%s) RETURNS %s LANGUAGE sql %s %s SECURITY INVOKER AS %L',
            v_pair[1], v_fn.arguments, v_fn.result, v_fn.volatility, v_fn.parallel,
            format('SELECT * FROM public.%I(%s)', v_pair[2],
                   (SELECT string_agg('$' || i, ', ' ORDER BY i) FROM generate_series(1, v_fn.pronargs) i)));
        EXECUTE format('COMMENT ON FUNCTION %s IS %L', v_wrapper, CASE
            WHEN v_pair[1] = 'boardreadyops_replay_control_plane_outbox' THEN format(
                'Permanent name of %s: the outbox specification names it. Not dropped with the deprecated names of migration 00014.',
                v_pair[2])
            ELSE format(
                'Deprecated name of %s (migration 00014), kept for the previous release''s binaries during a rolling upgrade.',
                v_pair[2])
            END);
        -- Same EXECUTE privileges as the renamed function, PUBLIC included (the row rules are
        -- executable by every role that writes their tables).
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_wrapper);
        FOR v_grantee IN
            SELECT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END
            FROM aclexplode(coalesce(v_fn.proacl, acldefault('f', v_fn.proowner))) WITH ORDINALITY a
            LEFT JOIN pg_roles r ON r.oid = a.grantee
            WHERE a.privilege_type = 'EXECUTE' AND a.grantee <> v_fn.proowner
            ORDER BY a.ordinality
        LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', v_wrapper, v_grantee);
        END LOOP;
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- The wrappers' comments name the functions they call: they give the map back.
-- +goose StatementBegin
DO $$
DECLARE
    v_renames text[];
    v_pair text[];
    v_fn record;
    v_def text;
    v_renamed text;
BEGIN
    SELECT array_agg(ARRAY[p.proname::text,
                           substring(obj_description(p.oid, 'pg_proc') FROM '^(?:Deprecated|Permanent) name of (\w+)')]
                     ORDER BY p.proname)
    INTO v_renames
    FROM pg_proc p
    WHERE p.pronamespace = 'public'::regnamespace
      AND obj_description(p.oid, 'pg_proc') ~ '^(Deprecated|Permanent) name of \w+';
    IF coalesce(cardinality(v_renames), 0) <> 2 * 39 THEN
        RAISE EXCEPTION 'found % of the 39 wrappers of migration 00014', coalesce(cardinality(v_renames), 0) / 2;
    END IF;

    -- 1. Drop the wrappers, then rename back (the OIDs, and so constraints and grants, stay).
    FOREACH v_pair SLICE 1 IN ARRAY v_renames LOOP
        SELECT p.oid::regprocedure::text AS signature INTO STRICT v_fn
        FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace AND p.proname = v_pair[1];
        EXECUTE format('DROP FUNCTION %s', v_fn.signature);
        SELECT p.oid::regprocedure::text AS signature INTO STRICT v_fn
        FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace AND p.proname = v_pair[2];
        EXECUTE format('ALTER FUNCTION %s RENAME TO %I', v_fn.signature, v_pair[1]);
    END LOOP;

    -- 2. The bodies that call a renamed function get the old names back.
    FOR v_fn IN SELECT p.oid FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace ORDER BY p.proname LOOP
        v_def := pg_get_functiondef(v_fn.oid);
        v_renamed := v_def;
        FOREACH v_pair SLICE 1 IN ARRAY v_renames LOOP
            v_renamed := regexp_replace(v_renamed, '\m' || v_pair[2] || '\M', v_pair[1], 'g');
        END LOOP;
        IF v_renamed <> v_def THEN
            EXECUTE v_renamed;
        END IF;
    END LOOP;
END;
$$;
-- +goose StatementEnd
