-- +goose NO TRANSACTION
-- Indexes for operators' lookups of release runs (issue 20, brops release-runs list/show) and
-- for the stale-runs gauge (boardreadyops_release_runs_stale, lifecycle's upkeep):
--   * release_runs (repository_id, created_at): `list --repo`, newest first, and `show --repo
--     --tag` (the identity key (repository_id, ref, head_sha) serves the tag too, this one the
--     newest run of it);
--   * release_runs (status, created_at): `list --status`, and the stale gauge, which counts the
--     non-terminal states' runs older than a threshold — one range scan per state;
--   * repositories (full_name): `--repo OWNER/NAME` resolves to the id without a scan.
-- Built CONCURRENTLY (no transaction: goose runs each statement on its own), so ingest, lifecycle
-- and the dispatchers keep writing release_runs while they build (SHARE UPDATE EXCLUSIVE).
-- status is now an indexed column: a status change is no longer a HOT update. A run changes
-- status three or four times in its life; the frequent updates (updated_at, check_run_id, the
-- attempt counter) stay HOT.

-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS release_runs_repository_created_idx ON public.release_runs (repository_id, created_at);
CREATE INDEX CONCURRENTLY IF NOT EXISTS release_runs_status_created_idx ON public.release_runs (status, created_at);
CREATE INDEX CONCURRENTLY IF NOT EXISTS repositories_full_name_idx ON public.repositories (full_name);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS public.repositories_full_name_idx;
DROP INDEX CONCURRENTLY IF EXISTS public.release_runs_status_created_idx;
DROP INDEX CONCURRENTLY IF EXISTS public.release_runs_repository_created_idx;
