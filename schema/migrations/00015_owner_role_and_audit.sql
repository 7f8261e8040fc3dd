-- Who owns the schema, what PUBLIC keeps, an append-only audit trail and a read-only role for the
-- redelivery job (issue 17 §3 a, d, e, f, g).
--
-- (e) Every table and function is owned by boardreadyops_schema_owner, a NOLOGIN role without
--     CREATEROLE: SECURITY DEFINER functions run as that role, never as the user that ran the
--     migrations (until now the owner login, with CREATEROLE, which could grant itself
--     pg_execute_server_program from inside any definer function it owned). The migration user
--     is a member of it (docs/operations.md, "Bootstrap"); goose's own table stays the migration
--     user's, readable by the owner for boardreadyops_schema_version().
-- (a) PUBLIC executes none of our functions. 00004's `ALTER DEFAULT PRIVILEGES IN SCHEMA public
--     REVOKE EXECUTE … FROM PUBLIC` had no effect: PUBLIC's EXECUTE is a global default, which a
--     per-schema entry cannot take away, so every function created after 00004 (the row checks,
--     the set-based transitions) was executable by PUBLIC. The defaults are revoked globally, for
--     the owner and for the migration user (whose new functions exist before they are handed to
--     the owner), and explicitly on every existing function.
-- (d) PUBLIC may not create in schema public. PostgreSQL 15 creates new databases that way, but a
--     database upgraded from 14 or older keeps PUBLIC's CREATE, and with it any service login
--     could plant a function or an operator on the definer functions' search path.
-- (f) control_plane_audit is append-only for every role: the admin role loses UPDATE, DELETE and
--     TRUNCATE, and a trigger refuses them for the owner and its members too.
-- (g) boardreadyops_redeliver reads delivery ids (brops webhooks redeliver) and nothing else.
--     boardreadyops_clock is the test clock's role (migration 00016): a session whose login is a
--     member may pass an explicit time to the functions; no service login is.
--
-- Roles are created only when absent (a new bootstrap creates them beforehand, so the migration
-- user needs no CREATEROLE). An existing owner role that can log in or create roles is refused.
-- ALTER … OWNER takes a short ACCESS EXCLUSIVE lock on each table (metadata only).

-- +goose Up

-- +goose StatementBegin
DO $$
DECLARE
    v_role text;
    r record;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['boardreadyops_schema_owner', 'boardreadyops_redeliver', 'boardreadyops_clock'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = v_role) THEN
            BEGIN
                EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', v_role);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL; -- another database's migration created it concurrently
            END;
        END IF;
    END LOOP;
    SELECT * INTO r FROM pg_catalog.pg_roles WHERE rolname = 'boardreadyops_schema_owner';
    IF r.rolcanlogin OR r.rolcreaterole OR r.rolsuper OR r.rolcreatedb OR r.rolbypassrls OR r.rolreplication THEN
        RAISE EXCEPTION 'role boardreadyops_schema_owner must be NOLOGIN NOCREATEROLE NOSUPERUSER NOCREATEDB NOBYPASSRLS NOREPLICATION'
            USING ERRCODE = '42501', HINT = 'see docs/operations.md, "Bootstrap"';
    END IF;
    -- Handing objects to the owner requires membership in it.
    IF NOT pg_catalog.pg_has_role(current_user, 'boardreadyops_schema_owner', 'MEMBER') THEN
        EXECUTE pg_catalog.format('GRANT boardreadyops_schema_owner TO %I', current_user);
    END IF;
END;
$$;
-- +goose StatementEnd

GRANT USAGE, CREATE ON SCHEMA public TO boardreadyops_schema_owner;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT SELECT ON goose_db_version TO boardreadyops_schema_owner;

-- Default privileges for what is created later: no EXECUTE for PUBLIC, for either creator.
ALTER DEFAULT PRIVILEGES FOR ROLE boardreadyops_schema_owner REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- (f) The audit trail: append-only.
-- +goose StatementBegin
CREATE FUNCTION public.boardreadyops_audit_refuse_change()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'control_plane_audit is append-only: % refused', TG_OP
        USING ERRCODE = '42501', TABLE = 'control_plane_audit', SCHEMA = 'public';
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER control_plane_audit_append_only
    BEFORE UPDATE OR DELETE ON public.control_plane_audit
    FOR EACH STATEMENT EXECUTE FUNCTION public.boardreadyops_audit_refuse_change();
CREATE TRIGGER control_plane_audit_no_truncate
    BEFORE TRUNCATE ON public.control_plane_audit
    FOR EACH STATEMENT EXECUTE FUNCTION public.boardreadyops_audit_refuse_change();
REVOKE UPDATE, DELETE, TRUNCATE ON public.control_plane_audit FROM boardreadyops_admin;

-- (g) The redelivery job: which delivery ids the inbox holds, nothing more.
GRANT USAGE ON SCHEMA public TO boardreadyops_redeliver;
GRANT SELECT (delivery_id) ON public.webhook_inbox TO boardreadyops_redeliver;
GRANT EXECUTE ON FUNCTION public.boardreadyops_schema_version() TO boardreadyops_redeliver;

-- (e) Hand every table (with its identity sequence and row type) and every function to the owner,
-- and (a) take EXECUTE away from PUBLIC on each function.
-- +goose StatementBegin
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT c.oid::regclass AS rel FROM pg_catalog.pg_class c
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm')
          AND c.relname <> 'goose_db_version'
          AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                          WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE %s OWNER TO boardreadyops_schema_owner', r.rel);
    END LOOP;
    FOR r IN
        SELECT p.oid::regprocedure AS fn FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'public'::regnamespace
          AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                          WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
    LOOP
        EXECUTE pg_catalog.format('ALTER ROUTINE %s OWNER TO boardreadyops_schema_owner', r.fn);
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON ROUTINE %s FROM PUBLIC', r.fn);
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- Ownership goes back to the user running the migration; PUBLIC's CREATE on schema public is not
-- given back (PostgreSQL 15's default, and the safe one).
-- +goose StatementBegin
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT c.oid::regclass AS rel FROM pg_catalog.pg_class c
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm')
          AND c.relowner = 'boardreadyops_schema_owner'::regrole
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE %s OWNER TO %I', r.rel, current_user);
    END LOOP;
    FOR r IN
        SELECT p.oid::regprocedure AS fn FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'public'::regnamespace AND p.proowner = 'boardreadyops_schema_owner'::regrole
    LOOP
        EXECUTE pg_catalog.format('ALTER ROUTINE %s OWNER TO %I', r.fn, current_user);
    END LOOP;
END;
$$;
-- +goose StatementEnd
REVOKE ALL ON public.webhook_inbox FROM boardreadyops_redeliver;
REVOKE ALL ON FUNCTION public.boardreadyops_schema_version() FROM boardreadyops_redeliver;
REVOKE USAGE ON SCHEMA public FROM boardreadyops_redeliver;
GRANT UPDATE, DELETE ON public.control_plane_audit TO boardreadyops_admin;
DROP TRIGGER control_plane_audit_no_truncate ON public.control_plane_audit;
DROP TRIGGER control_plane_audit_append_only ON public.control_plane_audit;
DROP FUNCTION public.boardreadyops_audit_refuse_change();
ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO PUBLIC;
ALTER DEFAULT PRIVILEGES FOR ROLE boardreadyops_schema_owner GRANT EXECUTE ON FUNCTIONS TO PUBLIC;
REVOKE SELECT ON goose_db_version FROM boardreadyops_schema_owner;
REVOKE USAGE, CREATE ON SCHEMA public FROM boardreadyops_schema_owner;
