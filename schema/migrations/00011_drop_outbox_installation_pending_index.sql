-- control_plane_outbox_installation_pending_idx (installation_id) WHERE status IN ('available',
-- 'leased') was maintained on every enqueue, claim, retry and deferral — one index insertion in
-- each of the outbox's hottest transitions — for a single rare caller:
-- boardreadyops_dead_letter_installation_outbox (an installation was deleted), which reads only
-- available rows. Those rows are exactly the claim index's (control_plane_outbox_claim_idx,
-- WHERE status = 'available'): the backlog, small by design, which that function now scans
-- (pkg/outbox's TestDeadLetterInstallationUsesTheClaimIndex reads the plan).

-- +goose Up
DROP INDEX control_plane_outbox_installation_pending_idx;

-- +goose Down
CREATE INDEX control_plane_outbox_installation_pending_idx ON control_plane_outbox (installation_id)
    WHERE status IN ('available', 'leased');
