-- The outbox claims' kept plans may not materialize the pacing table (issue 25,
-- docs/performance.md "Planned once, pinned to the index").
--
-- boardreadyops_outbox_claim and boardreadyops_outbox_claim_paced skip effects whose installation
-- is blocked (NOT EXISTS on github_installation_limits). 00043 and 00045 keep one generic plan
-- per connection with sequential scans, bitmap scans and sorts penalized; a Materialize node is
-- not, and when github_installation_limits had been analyzed while it held a handful of rows the
-- kept plan probed each candidate against a materialized full scan of it: every claim read every
-- installation's pacing row until the next ANALYZE (a review's reproduction: 15,025 and 15,040
-- rows read for 5 claims of 8 with 3,000 other installations' rows). enable_material = off leaves
-- the primary-key probe per candidate as the only plan without a penalty.
--
-- max_parallel_workers_per_gather = 0 on the paced claim: its candidates query, planned on a large
-- backlog as if LIMIT $n took a tenth of it, could become a Gather Merge. PostgreSQL 15 runs a
-- SELECT … INTO without workers anyway; this says so, and keeps the plan the ordered scan.
--
-- Only function settings change: no table lock.

-- +goose Up
ALTER FUNCTION public.boardreadyops_outbox_claim(text, integer, interval, timestamptz) SET enable_material = off;
ALTER FUNCTION public.boardreadyops_outbox_claim_paced(text, integer, interval, integer, interval, timestamptz) SET enable_material = off;
ALTER FUNCTION public.boardreadyops_outbox_claim_paced(text, integer, interval, integer, interval, timestamptz) SET max_parallel_workers_per_gather = 0;

-- +goose Down
ALTER FUNCTION public.boardreadyops_outbox_claim(text, integer, interval, timestamptz) RESET enable_material;
ALTER FUNCTION public.boardreadyops_outbox_claim_paced(text, integer, interval, integer, interval, timestamptz) RESET enable_material;
ALTER FUNCTION public.boardreadyops_outbox_claim_paced(text, integer, interval, integer, interval, timestamptz) RESET max_parallel_workers_per_gather;
