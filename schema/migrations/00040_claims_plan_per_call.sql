-- The claims are planned at every call (issue 25, docs/performance.md "End to end").
--
-- boardreadyops_outbox_claim, boardreadyops_outbox_claim_paced and boardreadyops_job_claim take
-- the first due rows in the claim index's order. PL/pgSQL decides at a statement's sixth call on a
-- connection whether to keep a generic plan, from the table's statistics at that moment; 00038
-- said of the claims that their custom plans were cheaper. That holds once the queue has a
-- backlog; with a few rows (a new installation, the first seconds of a load, stale statistics)
-- the generic plan wins and is kept: a bitmap scan of the claim index that reads every due row,
-- probes each one's installation limits, and sorts them all to take a batch. In a 20,000-run
-- burst whose dispatcher connections had cached it (auto_explain): 2,849–3,960 rows and 6,346
-- buffers for one claim; 10,136 buffers per claim on average against 465 in a burst without it,
-- claim p99 250 ms instead of 30–40 ms, 252–283 runs/s instead of 333–377. Which connection
-- caches what depends on the first claims' timing: that was the two kinds of burst.
--
-- plan_cache_mode = force_custom_plan plans each claim with its own limit and clock: an ordered
-- scan of the claim index that stops after the batch. A plan costs tens of microseconds, once per
-- claim of a batch.

-- +goose Up
ALTER FUNCTION public.boardreadyops_outbox_claim(text, integer, interval, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION public.boardreadyops_outbox_claim_paced(text, integer, interval, integer, interval, timestamptz) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION public.boardreadyops_job_claim(text, integer, interval, timestamptz) SET plan_cache_mode = force_custom_plan;

-- +goose Down
ALTER FUNCTION public.boardreadyops_outbox_claim(text, integer, interval, timestamptz) RESET plan_cache_mode;
ALTER FUNCTION public.boardreadyops_outbox_claim_paced(text, integer, interval, integer, interval, timestamptz) RESET plan_cache_mode;
ALTER FUNCTION public.boardreadyops_job_claim(text, integer, interval, timestamptz) RESET plan_cache_mode;
