#!/usr/bin/env bash
# Ingest benchmark (docs/performance.md): the real ingest binary, then `loadgen ingest` at 64
# concurrent senders for 60 s, followed by pgbench -N -c 8 -j 2 on the same server, three times;
# prints each run and the medians. Everything on loopback.
#
# --mix organisation sends a busy organisation's delivery mix instead of release-tag pushes only
# (hack/loadgen/mix.go; organisation-without-checks is that mix without GitHub's check events, as
# it was before 2026-12-07); --filter off stores every delivery (BOARDREADYOPS_WEBHOOK_FILTER=false),
# so the two show what the delivery filter saves. --pgbench-duration shortens the reference runs.
#
#   hack/bench/ingest.sh [--duration 60s] [--runs 3] [--concurrency 64] [--mix release-tags|organisation|organisation-without-checks] [--filter on|off]
duration=60s runs=3 concurrency=64 mix=release-tags filter=on pgbench_duration=30s
while (($#)); do
	case "$1" in
	--duration) duration=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--concurrency) concurrency=$2; shift 2 ;;
	--mix) mix=$2; shift 2 ;;
	--filter) filter=$2; shift 2 ;;
	--pgbench-duration) pgbench_duration=$2; shift 2 ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
case "$filter" in on) filter_env=true ;; off) filter_env=false ;; *) echo "--filter on|off" >&2; exit 2 ;; esac
source "$(dirname "$0")/lib.sh"

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/secret"
DATABASE_URL=$db LISTEN_ADDR=127.0.0.1:${BENCH_INGEST_PORT:-18080} METRICS_ADDR=127.0.0.1:${BENCH_METRICS_PORT:-19190} BOARDREADYOPS_WEBHOOK_SECRET_FILE=$work/secret \
	BOARDREADYOPS_DB_MAX_CONNS=${DB_MAX_CONNS:-16} BOARDREADYOPS_WEBHOOK_FILTER=$filter_env LOG_LEVEL=warn bin/ingest >"$work/ingest.log" 2>&1 &
pids+=($!); ingest_pid=$!
wait_ready http://127.0.0.1:${BENCH_METRICS_PORT:-19190}/readyz

bin/loadgen ingest --url http://127.0.0.1:${BENCH_INGEST_PORT:-18080}/webhook --secret-file "$work/secret" \
	--concurrency "$concurrency" --duration "$duration" --runs "$runs" --mix "$mix" --database-url "$db" --ingest-pid "$ingest_pid" \
	--pgbench-database-url "$pgbench_db" --pgbench-duration "$pgbench_duration"
echo "rows: $(psql "$db" -Atc 'SELECT count(*) FROM control_plane_jobs') jobs; relation sizes: $(psql "$db" -Atc "SELECT string_agg(format('%s %s', relname, pg_size_pretty(pg_total_relation_size(relid))), ', ' ORDER BY relname) FROM pg_stat_user_tables WHERE relname IN ('webhook_inbox', 'control_plane_jobs', 'webhook_body_digests')")"
