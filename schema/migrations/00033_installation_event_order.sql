-- Installation events are applied in the order ingest received them, not the order lifecycle
-- happens to commit them.
--
-- Lifecycle claims jobs in batches on several loops and replicas, so two deliveries of one
-- installation received a moment apart can commit in either order. For created, deleted,
-- suspend and unsuspend the order decides the outcome: a `deleted` applied before the `created`
-- received just before it left a deleted installation live (seen once in CI). From here each of
-- those four actions records the inbox's received_at of the delivery it applied in
-- installations.lifecycle_event_at, and lifecycle applies one only when it is not older than the
-- last applied: an older one is ignored (outcome `ignored`, docs/webhooks.md). A redelivery of an
-- old event (received again, later) is applied as GitHub asks; GitHub itself sends one
-- installation's events in order. Adding a nullable column without a default only changes the
-- catalogue: no rewrite, the ACCESS EXCLUSIVE lock is held for milliseconds.

-- +goose Up
ALTER TABLE public.installations ADD COLUMN lifecycle_event_at timestamptz;
COMMENT ON COLUMN public.installations.lifecycle_event_at IS
    'received_at of the newest created/deleted/suspend/unsuspend delivery applied (00033)';

-- +goose Down
ALTER TABLE public.installations DROP COLUMN lifecycle_event_at;
