-- Autovacuum per queue table (issue 19, docs/reliability.md "Bloat control"). With the defaults a
-- table is vacuumed once 20 % of its rows are dead (autovacuum_vacuum_scale_factor 0.2, plus 50):
-- the bigger the table, the longer the dead entries stay — in the heap, and in the partial claim
-- indexes, whose dead entries every claim steps over until a vacuum removes them. The queue
-- tables' updates are never HOT (each one changes status, which the partial indexes' predicates
-- read, or an indexed timestamp), so every update leaves a dead index entry behind: a
-- fillfactor below 100 would not make them HOT and is not set.
--
-- From here the queue tables are vacuumed after a fixed number of dead rows, whatever their size,
-- and without the cost delay that spreads a vacuum of a large table over minutes:
--   * control_plane_jobs and control_plane_outbox (two to four updates per row): vacuum after
--     2,000 dead rows, analyze after 10,000 changed rows; autovacuum_vacuum_cost_delay 0 (a
--     vacuum of these tables is small and frequent; throttling it only lets dead entries
--     accumulate);
--   * webhook_inbox and webhook_body_digests (insert-only, rows removed by retention's deletes):
--     vacuum after 10,000 dead rows, and after 50,000 inserted rows (autovacuum_vacuum_insert_*),
--     so the visibility map stays current and freezing is spread over the life of the table
--     instead of one anti-wraparound vacuum of the whole table.
-- A table is looked at once per autovacuum_naptime (a server setting, 1 min by default), which at
-- this churn bounds the dead rows more than any table setting: docs/reliability.md recommends
-- 10 s or less, and has the figures and how they were measured.

-- +goose Up
ALTER TABLE public.control_plane_jobs SET (
    autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
    autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 10000,
    autovacuum_vacuum_cost_delay = 0);
ALTER TABLE public.control_plane_outbox SET (
    autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
    autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 10000,
    autovacuum_vacuum_cost_delay = 0);
ALTER TABLE public.webhook_inbox SET (
    autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 50000,
    autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 50000);
ALTER TABLE public.webhook_body_digests SET (
    autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 50000,
    autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 50000);

-- +goose Down
ALTER TABLE public.control_plane_jobs RESET (
    autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_analyze_scale_factor, autovacuum_analyze_threshold, autovacuum_vacuum_cost_delay);
ALTER TABLE public.control_plane_outbox RESET (
    autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_analyze_scale_factor, autovacuum_analyze_threshold, autovacuum_vacuum_cost_delay);
ALTER TABLE public.webhook_inbox RESET (
    autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold,
    autovacuum_analyze_scale_factor, autovacuum_analyze_threshold);
ALTER TABLE public.webhook_body_digests RESET (
    autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold,
    autovacuum_analyze_scale_factor, autovacuum_analyze_threshold);
