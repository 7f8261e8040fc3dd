-- The redelivery job's login reads which deliveries ingest recorded without storing them, and when
-- the open restore fence was set (docs/operations.md, "Roles" and "Runbook: backup and restore").
--
-- brops webhooks redeliver treats a delivery as received when the inbox holds it or when ingest
-- recorded its body digest under its delivery id (a delivery lifecycle ignores); with
-- --include-delivered, also when GitHub delivered or redelivered it with a 2xx answer since the
-- open restore fence. Without these reads, ignored and filtered deliveries looked missing at every
-- run after a restore and filled --max-requests ahead of the deliveries the restore lost. The
-- login gets the two columns of webhook_body_digests it needs (not the digest itself) and the
-- fences' times: still no payload, no other table.
--
-- Only privileges change: no table lock beyond the catalog's.

-- +goose Up
GRANT SELECT (delivery_id, received_at) ON public.webhook_body_digests TO boardreadyops_redeliver;
GRANT SELECT (fenced_at, closed_at) ON public.restore_fences TO boardreadyops_redeliver;

-- +goose Down
REVOKE SELECT (delivery_id, received_at) ON public.webhook_body_digests FROM boardreadyops_redeliver;
REVOKE SELECT (fenced_at, closed_at) ON public.restore_fences FROM boardreadyops_redeliver;
