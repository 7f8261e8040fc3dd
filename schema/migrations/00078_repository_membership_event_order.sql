-- A repository's membership (added to or removed from its installation, transferred, deleted) is
-- applied in the order ingest received the deliveries, as installation events are since 00033.
--
-- Lifecycle commits the jobs of several loops and replicas in any order, so an
-- installation_repositories removed and the added that followed it a moment later (someone
-- changing the App's repository access twice) could commit added first, then removed: the
-- repository stayed removed, and its release tags were ignored without a word until the next
-- event. From here every delivery that changes a repository's membership records its inbox
-- received_at in repositories.membership_event_at, and one older than the last applied is not
-- applied (docs/lifecycle.md). repositories.name_event_at orders the name the same way (a rename,
-- a transfer, an addition). Adding nullable columns without a default only changes the catalogue:
-- no rewrite, the ACCESS EXCLUSIVE lock is held for milliseconds.

-- +goose Up
ALTER TABLE public.repositories ADD COLUMN membership_event_at timestamptz, ADD COLUMN name_event_at timestamptz;
COMMENT ON COLUMN public.repositories.membership_event_at IS
    'received_at of the newest delivery applied that added, removed, transferred or deleted the repository (00078)';
COMMENT ON COLUMN public.repositories.name_event_at IS
    'received_at of the newest delivery whose full_name the repository has (00078)';

-- +goose Down
ALTER TABLE public.repositories DROP COLUMN membership_event_at, DROP COLUMN name_event_at;
