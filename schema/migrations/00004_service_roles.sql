-- Least-privilege group roles, one per service. They are NOLOGIN: a deployment creates a login
-- user per service and grants it the matching role (docs/operations.md, "Database roles").
-- Roles are cluster-wide objects, so they are created only when absent and are not dropped by the
-- down migration (another database on the same server may use them); their privileges on this
-- database's objects are revoked.
--
-- What each role may do:
--   boardreadyops_ingest     insert inbox and job rows; nothing on the outbox or the state tables
--   boardreadyops_lifecycle  read the inbox; read and write installation, repository and release
--                            state; drive jobs and enqueue effects only through the functions
--   boardreadyops_dispatcher only the outbox functions; no direct access to any table
--   boardreadyops_operator   only the aggregate statistics functions (metrics), read-only
--   boardreadyops_admin      brops: everything, including replay, reconciliation and retention
-- Every role may read the schema version (readiness checks).

-- +goose Up

-- +goose StatementBegin
DO $$
DECLARE
    v_role text;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['boardreadyops_ingest', 'boardreadyops_lifecycle', 'boardreadyops_dispatcher',
                                  'boardreadyops_operator', 'boardreadyops_admin'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = v_role) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                -- Another database's migration created it concurrently.
                NULL;
            END;
        END IF;
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- Functions are executable by PUBLIC by default; nothing of ours should be.
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA public FROM PUBLIC;
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

GRANT USAGE ON SCHEMA public TO boardreadyops_ingest, boardreadyops_lifecycle, boardreadyops_dispatcher,
    boardreadyops_operator, boardreadyops_admin;
GRANT EXECUTE ON FUNCTION boardreadyops_schema_version() TO boardreadyops_ingest, boardreadyops_lifecycle,
    boardreadyops_dispatcher, boardreadyops_operator, boardreadyops_admin;

-- ingest: insert-only. RETURNING the new inbox id and recognising a known delivery id need SELECT
-- on those two columns, never on the payloads.
GRANT INSERT ON webhook_inbox, control_plane_jobs TO boardreadyops_ingest;
GRANT SELECT (id, delivery_id) ON webhook_inbox TO boardreadyops_ingest;

-- lifecycle
GRANT SELECT ON webhook_inbox TO boardreadyops_lifecycle;
GRANT SELECT, INSERT, UPDATE ON installations, repositories, repository_release_settings,
    release_runs, execution_attempts TO boardreadyops_lifecycle;
GRANT EXECUTE ON FUNCTION
    boardreadyops_claim_control_plane_jobs(text, integer, interval, timestamptz),
    boardreadyops_complete_control_plane_job(bigint, text, timestamptz),
    boardreadyops_retry_control_plane_job(bigint, text, text, timestamptz, timestamptz),
    boardreadyops_dead_letter_control_plane_job(bigint, text, text, timestamptz),
    boardreadyops_release_control_plane_job(bigint, text, timestamptz),
    boardreadyops_recover_control_plane_job_leases(timestamptz, integer),
    boardreadyops_control_plane_job_stats(timestamptz),
    boardreadyops_enqueue_control_plane_outbox(text, uuid, uuid, bigint, jsonb, text, integer, timestamptz)
TO boardreadyops_lifecycle;

-- dispatcher
GRANT EXECUTE ON FUNCTION
    boardreadyops_claim_control_plane_outbox(text, integer, interval, timestamptz),
    boardreadyops_start_control_plane_outbox_delivery(bigint, text, timestamptz),
    boardreadyops_complete_check_run_create(bigint, text, bigint, timestamptz),
    boardreadyops_complete_workflow_dispatch(bigint, text, bigint, timestamptz),
    boardreadyops_complete_check_run_complete(bigint, text, timestamptz),
    boardreadyops_retry_control_plane_outbox(bigint, text, text, timestamptz, timestamptz),
    boardreadyops_defer_control_plane_outbox(bigint, text, timestamptz, text, timestamptz),
    boardreadyops_release_control_plane_outbox(bigint, text, timestamptz),
    boardreadyops_dead_letter_control_plane_outbox(bigint, text, text, timestamptz),
    boardreadyops_require_control_plane_outbox_reconciliation(bigint, text, text, timestamptz),
    boardreadyops_recover_control_plane_outbox_leases(timestamptz, integer),
    boardreadyops_control_plane_outbox_stats(timestamptz)
TO boardreadyops_dispatcher;

-- operator (metrics only)
GRANT EXECUTE ON FUNCTION
    boardreadyops_control_plane_outbox_stats(timestamptz),
    boardreadyops_control_plane_job_stats(timestamptz)
TO boardreadyops_operator;

-- admin (brops)
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO boardreadyops_admin;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO boardreadyops_admin;

-- +goose Down
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM boardreadyops_ingest, boardreadyops_lifecycle,
    boardreadyops_dispatcher, boardreadyops_operator, boardreadyops_admin;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM boardreadyops_ingest, boardreadyops_lifecycle,
    boardreadyops_dispatcher, boardreadyops_operator, boardreadyops_admin;
REVOKE USAGE ON SCHEMA public FROM boardreadyops_ingest, boardreadyops_lifecycle, boardreadyops_dispatcher,
    boardreadyops_operator, boardreadyops_admin;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT EXECUTE ON FUNCTIONS TO PUBLIC;
