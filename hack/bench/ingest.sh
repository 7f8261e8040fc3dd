#!/usr/bin/env bash
# Ingest benchmark (docs/performance.md): the real ingest binary, then `loadgen ingest` at 64
# concurrent senders for 60 s, followed by pgbench -N -c 8 -j 2 on the same server, three times;
# prints each run and the medians. Everything on loopback.
#
#   hack/bench/ingest.sh [--duration 60s] [--runs 3] [--concurrency 64]
duration=60s runs=3 concurrency=64
while (($#)); do
	case "$1" in
	--duration) duration=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--concurrency) concurrency=$2; shift 2 ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
source "$(dirname "$0")/lib.sh"

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/secret"
DATABASE_URL=$db LISTEN_ADDR=127.0.0.1:${BENCH_INGEST_PORT:-18080} METRICS_ADDR=127.0.0.1:${BENCH_METRICS_PORT:-19190} BOARDREADYOPS_WEBHOOK_SECRET_FILE=$work/secret \
	BOARDREADYOPS_DB_MAX_CONNS=${DB_MAX_CONNS:-16} LOG_LEVEL=warn bin/ingest >"$work/ingest.log" 2>&1 &
pids+=($!)
wait_ready http://127.0.0.1:${BENCH_METRICS_PORT:-19190}/readyz

bin/loadgen ingest --url http://127.0.0.1:${BENCH_INGEST_PORT:-18080}/webhook --secret-file "$work/secret" \
	--concurrency "$concurrency" --duration "$duration" --runs "$runs" --pgbench-database-url "$pgbench_db" --pgbench-duration 30s
echo "rows: $(psql "$db" -Atc 'SELECT count(*) FROM control_plane_jobs') jobs"
