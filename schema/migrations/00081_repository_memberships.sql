-- A repository's membership is ordered per installation: one installation's removal no longer
-- hides another installation's newer ownership.
--
-- Since 00078 every membership change records its delivery's received_at in
-- repositories.membership_event_at, and one older than the last applied is not applied. One time
-- per repository cannot order changes that come from two installations: a repository transferred
-- to another account's installation, with the old installation's removal received after the
-- transfer but committed before it (two lifecycle loops), stayed removed under the old
-- installation, its new owner's release tags ignored without a word.
--
-- repository_memberships keeps, for each (repository, installation), the newest delivery that gave
-- the installation the repository (added, listed by installation created, transferred in) and the
-- newest that took it away (removed, installation deleted). repositories.deleted_event_at keeps the
-- newest repository deleted, which takes it from every installation, and
-- installations.deleted_event_at the newest installation deleted, which takes every repository from
-- the installation, also one a membership change records later from an older delivery. Lifecycle
-- derives the repository's installation and removed_at from them (docs/lifecycle.md): the
-- installation that got it last owns it, present while its own newest removal and both deletions
-- are older. A repository first recorded by another event (a push) has no time: its installation
-- counts as having got it before anything else.
--
-- The existing time of each repository (00078) is kept as its owner's membership row, so nothing
-- applied before changes. The table is small (a row per repository and installation it was in);
-- the backfill reads repositories once. Adding nullable columns without a default only changes the
-- catalogue.

-- +goose Up
CREATE TABLE public.repository_memberships (
    repository_id    bigint NOT NULL REFERENCES public.repositories (id) ON DELETE CASCADE,
    installation_id  bigint NOT NULL CHECK (installation_id > 0),
    present_event_at timestamptz,
    removed_event_at timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (repository_id, installation_id),
    CHECK (present_event_at IS NOT NULL OR removed_event_at IS NOT NULL)
);
CREATE INDEX repository_memberships_installation_id_idx ON public.repository_memberships (installation_id);
COMMENT ON TABLE public.repository_memberships IS
    'each installation''s newest delivery that gave it the repository and newest that took it away (00081): the repository''s installation and removed_at derive from them';
ALTER TABLE public.repositories ADD COLUMN deleted_event_at timestamptz;
COMMENT ON COLUMN public.repositories.deleted_event_at IS
    'received_at of the newest repository deleted delivery (00081): it takes the repository from every installation whose membership is older';
COMMENT ON COLUMN public.repositories.membership_event_at IS
    'received_at of the newest membership change lifecycle handled for the repository (00078); since 00081 repository_memberships orders them';
ALTER TABLE public.installations ADD COLUMN deleted_event_at timestamptz;
COMMENT ON COLUMN public.installations.deleted_event_at IS
    'received_at of the newest installation deleted delivery (00081): it takes from the installation every repository it got before';

INSERT INTO public.repository_memberships (repository_id, installation_id, present_event_at, removed_event_at)
SELECT r.id, r.installation_id,
       CASE WHEN r.removed_at IS NULL THEN r.membership_event_at END,
       CASE WHEN r.removed_at IS NOT NULL THEN r.membership_event_at END
FROM public.repositories r
WHERE r.membership_event_at IS NOT NULL
ORDER BY r.id;

GRANT SELECT, INSERT, UPDATE ON public.repository_memberships TO boardreadyops_lifecycle;
GRANT SELECT, INSERT, UPDATE, DELETE ON public.repository_memberships TO boardreadyops_admin;
ALTER TABLE public.repository_memberships OWNER TO boardreadyops_schema_owner;

-- +goose Down
DROP TABLE public.repository_memberships;
COMMENT ON COLUMN public.repositories.membership_event_at IS
    'received_at of the newest delivery applied that added, removed, transferred or deleted the repository (00078)';
ALTER TABLE public.repositories DROP COLUMN deleted_event_at;
ALTER TABLE public.installations DROP COLUMN deleted_event_at;
