-- Core tables of the control plane. PostgreSQL is the authoritative boundary: every accepted
-- webhook, every state change and every required GitHub side effect is a row here.
-- Constraints are deliberately strict: a client that tries to store something the state
-- machines do not know is refused by the database, not by convention.

-- +goose Up

-- GitHub App installations, keyed by GitHub's installation id.
CREATE TABLE installations (
    id            bigint PRIMARY KEY CHECK (id > 0),
    account_login text NOT NULL CHECK (length(account_login) BETWEEN 1 AND 255),
    account_type  text NOT NULL CHECK (account_type IN ('User', 'Organization', 'Enterprise')),
    suspended_at  timestamptz,
    deleted_at    timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- Repositories the App can see, keyed by GitHub's repository id (stable across renames and
-- transfers; full_name is not).
CREATE TABLE repositories (
    id              bigint PRIMARY KEY CHECK (id > 0),
    installation_id bigint NOT NULL REFERENCES installations (id),
    full_name       text NOT NULL CHECK (length(full_name) BETWEEN 3 AND 256 AND full_name ~ '^[^/\s]+/[^/\s]+$'),
    default_branch  text CHECK (length(default_branch) BETWEEN 1 AND 255),
    archived        boolean NOT NULL DEFAULT false,
    removed_at      timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX repositories_installation_id_idx ON repositories (installation_id);

-- Per-repository release settings. A NULL column (or a missing row) means "use the deployment's
-- configured default".
CREATE TABLE repository_release_settings (
    repository_id bigint PRIMARY KEY REFERENCES repositories (id) ON DELETE CASCADE,
    workflow_file text CHECK (workflow_file ~ '^[A-Za-z0-9._-]{1,200}\.ya?ml$'),
    tag_pattern   text CHECK (length(tag_pattern) BETWEEN 1 AND 200),
    enabled       boolean NOT NULL DEFAULT true,
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- One row per accepted GitHub delivery. delivery_id is X-GitHub-Delivery: UNIQUE so a redelivery
-- is recognised. The payload is the normalized document ingest builds (never the raw body);
-- payload_sha256 is the digest of the raw body for forensics.
CREATE TABLE webhook_inbox (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id     text NOT NULL CHECK (length(delivery_id) BETWEEN 1 AND 100),
    event           text NOT NULL CHECK (event ~ '^[a-z_]{1,64}$'),
    action          text CHECK (action ~ '^[a-z_]{1,64}$'),
    installation_id bigint CHECK (installation_id > 0),
    repository_id   bigint CHECK (repository_id > 0),
    payload         jsonb NOT NULL CHECK (jsonb_typeof(payload) = 'object' AND pg_column_size(payload) <= 1048576),
    payload_sha256  bytea NOT NULL CHECK (length(payload_sha256) = 32),
    received_at     timestamptz NOT NULL DEFAULT now(),
    traceparent     text CHECK (traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'),
    CONSTRAINT webhook_inbox_delivery_id_key UNIQUE (delivery_id)
);
CREATE INDEX webhook_inbox_received_at_idx ON webhook_inbox (received_at);

-- The lifecycle queue: one job per inbox row.
CREATE TABLE control_plane_jobs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind             text NOT NULL CHECK (kind ~ '^[a-z_]{1,64}$'),
    inbox_id         bigint NOT NULL REFERENCES webhook_inbox (id) ON DELETE CASCADE,
    status           text NOT NULL DEFAULT 'available'
                     CHECK (status IN ('available', 'leased', 'completed', 'dead_letter')),
    attempts         integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts     integer NOT NULL DEFAULT 25 CHECK (max_attempts BETWEEN 1 AND 1000),
    available_at     timestamptz NOT NULL DEFAULT now(),
    lease_owner      text CHECK (length(lease_owner) BETWEEN 1 AND 200),
    lease_expires_at timestamptz,
    last_error       text CHECK (length(last_error) <= 4096),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    traceparent      text CHECK (traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'),
    CONSTRAINT control_plane_jobs_inbox_id_key UNIQUE (inbox_id),
    -- A lease is held exactly when the job is leased.
    CONSTRAINT control_plane_jobs_lease_check CHECK (
        (status = 'leased') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)
        AND (status = 'leased' OR (lease_owner IS NULL AND lease_expires_at IS NULL))
    ),
    CONSTRAINT control_plane_jobs_completed_check CHECK ((status = 'completed') = (completed_at IS NOT NULL))
);
-- Claim path: only live rows are indexed.
CREATE INDEX control_plane_jobs_claim_idx ON control_plane_jobs (available_at, id) WHERE status = 'available';
-- Lease recovery path.
CREATE INDEX control_plane_jobs_lease_idx ON control_plane_jobs (lease_expires_at) WHERE status = 'leased';
-- Retention sweep and dead-letter listing.
CREATE INDEX control_plane_jobs_terminal_idx ON control_plane_jobs (status, updated_at) WHERE status IN ('completed', 'dead_letter');

-- A release run: one tag at one commit of one repository.
CREATE TABLE release_runs (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    repository_id   bigint NOT NULL REFERENCES repositories (id),
    installation_id bigint NOT NULL REFERENCES installations (id),
    ref             text NOT NULL CHECK (ref ~ '^refs/tags/.+' AND length(ref) <= 512),
    head_sha        text NOT NULL CHECK (head_sha ~ '^([0-9a-f]{40}|[0-9a-f]{64})$'),
    workflow_file   text NOT NULL CHECK (workflow_file ~ '^[A-Za-z0-9._-]{1,200}\.ya?ml$'),
    status          text NOT NULL DEFAULT 'requested'
                    CHECK (status IN ('requested', 'check_pending', 'dispatching', 'running', 'succeeded', 'failed', 'cancelled')),
    check_run_id    bigint CHECK (check_run_id > 0),
    current_attempt integer NOT NULL DEFAULT 1 CHECK (current_attempt >= 1),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    completed_at    timestamptz,
    CONSTRAINT release_runs_identity_key UNIQUE (repository_id, ref, head_sha),
    CONSTRAINT release_runs_completed_check CHECK (
        (status IN ('succeeded', 'failed', 'cancelled')) = (completed_at IS NOT NULL)
    )
);
CREATE INDEX release_runs_installation_id_idx ON release_runs (installation_id);

-- One execution of a release run's workflow. Attempt 1 comes with the run; a check_run
-- "rerequested" adds the next.
CREATE TABLE execution_attempts (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    release_run_id  uuid NOT NULL REFERENCES release_runs (id),
    number          integer NOT NULL CHECK (number >= 1),
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'dispatching', 'running', 'succeeded', 'failed', 'cancelled')),
    workflow_run_id bigint CHECK (workflow_run_id > 0),
    dispatched_at   timestamptz,
    completed_at    timestamptz,
    conclusion      text CHECK (length(conclusion) BETWEEN 1 AND 64),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT execution_attempts_number_key UNIQUE (release_run_id, number),
    CONSTRAINT execution_attempts_workflow_run_id_key UNIQUE (workflow_run_id),
    CONSTRAINT execution_attempts_dispatched_check CHECK ((workflow_run_id IS NULL) = (dispatched_at IS NULL)),
    CONSTRAINT execution_attempts_completed_check CHECK (
        (status IN ('succeeded', 'failed', 'cancelled')) = (completed_at IS NOT NULL)
    )
);

-- The transactional outbox of required GitHub side effects.
CREATE TABLE control_plane_outbox (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    effect_type          text NOT NULL
                         CHECK (effect_type IN ('github.check_run.create', 'github.workflow.dispatch', 'github.check_run.complete')),
    idempotency_key      text NOT NULL,
    -- 0 for the original record; n > 0 for the n-th replacement of a superseded dispatch.
    generation           integer NOT NULL DEFAULT 0 CHECK (generation >= 0),
    payload              jsonb NOT NULL CHECK (jsonb_typeof(payload) = 'object' AND pg_column_size(payload) <= 8192),
    status               text NOT NULL DEFAULT 'available'
                         CHECK (status IN ('available', 'leased', 'completed', 'dead_letter', 'reconciliation_required')),
    attempts             integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts         integer NOT NULL DEFAULT 10 CHECK (max_attempts BETWEEN 1 AND 1000),
    available_at         timestamptz NOT NULL DEFAULT now(),
    lease_owner          text CHECK (length(lease_owner) BETWEEN 1 AND 200),
    lease_expires_at     timestamptz,
    delivery_started_at  timestamptz,
    completed_at         timestamptz,
    last_error           text CHECK (length(last_error) <= 4096),
    result               jsonb CHECK (jsonb_typeof(result) = 'object' AND pg_column_size(result) <= 4096),
    release_run_id       uuid NOT NULL REFERENCES release_runs (id),
    execution_attempt_id uuid REFERENCES execution_attempts (id),
    installation_id      bigint NOT NULL CHECK (installation_id > 0),
    superseded_by        bigint REFERENCES control_plane_outbox (id) ON DELETE SET NULL,
    traceparent          text CHECK (traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT control_plane_outbox_idempotency_key_key UNIQUE (idempotency_key),
    -- The key is derived from the record's identity, never chosen by a client:
    --   github.check_run.create:<release_run_id>
    --   github.workflow.dispatch:<release_run_id>:<execution_attempt_id>[:g<generation>]
    --   github.check_run.complete:<release_run_id>:<execution_attempt_id>
    CONSTRAINT control_plane_outbox_idempotency_key_check CHECK (
        idempotency_key = effect_type || ':' || release_run_id::text
            || coalesce(':' || execution_attempt_id::text, '')
            || CASE WHEN generation > 0 THEN ':g' || generation::text ELSE '' END
    ),
    CONSTRAINT control_plane_outbox_attempt_check CHECK (
        (effect_type = 'github.check_run.create') = (execution_attempt_id IS NULL)
    ),
    CONSTRAINT control_plane_outbox_generation_effect_check CHECK (generation = 0 OR effect_type = 'github.workflow.dispatch'),
    CONSTRAINT control_plane_outbox_lease_check CHECK (
        (status = 'leased') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)
        AND (status = 'leased' OR (lease_owner IS NULL AND lease_expires_at IS NULL))
    ),
    CONSTRAINT control_plane_outbox_completed_check CHECK ((status = 'completed') = (completed_at IS NOT NULL)),
    CONSTRAINT control_plane_outbox_reconciliation_check CHECK (
        status <> 'reconciliation_required'
        OR (effect_type = 'github.workflow.dispatch' AND delivery_started_at IS NOT NULL)
    )
);
-- Claim path: only due rows are indexed, so the index stays small however many rows are terminal.
CREATE INDEX control_plane_outbox_claim_idx ON control_plane_outbox (available_at, id) WHERE status = 'available';
-- Lease recovery path.
CREATE INDEX control_plane_outbox_lease_idx ON control_plane_outbox (lease_expires_at) WHERE status = 'leased';
-- Operator views: dead letters and reconciliation.
CREATE INDEX control_plane_outbox_attention_idx ON control_plane_outbox (status, updated_at)
    WHERE status IN ('dead_letter', 'reconciliation_required');
CREATE INDEX control_plane_outbox_completed_idx ON control_plane_outbox (completed_at) WHERE status = 'completed';
CREATE INDEX control_plane_outbox_release_run_idx ON control_plane_outbox (release_run_id);
CREATE INDEX control_plane_outbox_installation_pending_idx ON control_plane_outbox (installation_id)
    WHERE status IN ('available', 'leased');

-- Every operator action, with who, when, why and the evidence.
CREATE TABLE control_plane_audit (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    occurred_at  timestamptz NOT NULL DEFAULT now(),
    operator     text NOT NULL CHECK (length(btrim(operator)) BETWEEN 1 AND 200),
    action       text NOT NULL CHECK (action IN (
                     'outbox.replay', 'job.replay',
                     'outbox.reconciliation.repair', 'outbox.reconciliation.supersede')),
    subject_type text NOT NULL CHECK (subject_type IN ('outbox', 'job')),
    subject_id   bigint NOT NULL,
    reason       text NOT NULL CHECK (length(btrim(reason)) BETWEEN 1 AND 2000),
    evidence     jsonb CHECK (pg_column_size(evidence) <= 16384),
    from_status  text NOT NULL,
    to_status    text NOT NULL
);
CREATE INDEX control_plane_audit_subject_idx ON control_plane_audit (subject_type, subject_id);

-- +goose Down
DROP TABLE control_plane_audit;
DROP TABLE control_plane_outbox;
DROP TABLE execution_attempts;
DROP TABLE release_runs;
DROP TABLE control_plane_jobs;
DROP TABLE webhook_inbox;
DROP TABLE repository_release_settings;
DROP TABLE repositories;
DROP TABLE installations;
