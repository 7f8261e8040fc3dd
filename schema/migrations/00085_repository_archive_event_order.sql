-- A repository's archived flag is applied in the order ingest received the deliveries, and a tag
-- push is refused for it only when the archiving came after the push.
--
-- Lifecycle commits the jobs of several loops and replicas in any order. A repository unarchived
-- and then pushed a release tag (GitHub refuses pushes to an archived repository) could have its
-- push decided before the unarchive: the push read archived and was ignored without a word, and
-- nothing looked at it again. An archived then unarchived could commit in the other order and
-- leave the repository archived for good: every later tag push ignored, and
-- boardreadyops_release_run_start refusing it. From here repositories.archived_event_at records the
-- received_at of the archived or unarchived delivery that set the flag, one older than it is not
-- applied, and a push received after it starts its release whatever the flag says
-- (docs/lifecycle.md). Adding a nullable column without a default only changes the catalogue: no
-- rewrite, the ACCESS EXCLUSIVE lock is held for milliseconds.

-- +goose Up
ALTER TABLE public.repositories ADD COLUMN archived_event_at timestamptz;
COMMENT ON COLUMN public.repositories.archived_event_at IS
    'received_at of the archived or unarchived delivery that set archived (00085); NULL: set before 00085, or when recorded';

-- +goose Down
ALTER TABLE public.repositories DROP COLUMN archived_event_at;
