#!/usr/bin/env bash
# Hostile-client benchmark (docs/performance.md, "Hostile clients"): the real ingest binary as the
# chart runs it (body budget 128 MiB, GOMEMLIMIT 460MiB = 90 % of its 512Mi limit), then
# `loadgen hostile`: at once 200 connections announcing 25 MiB and sending nothing, 200 trickling
# senders and 200 idle keep-alive connections, while genuine senders post signed deliveries.
# Prints ingest's peak RSS and the genuine deliveries' answers. Everything on loopback.
#
#   hack/bench/hostile.sh [--duration 30s] [--max-connections 1024] [-- extra loadgen hostile flags]
duration=30s max_connections=1024 extra=()
while (($#)); do
	case "$1" in
	--duration) duration=$2; shift 2 ;;
	--max-connections) max_connections=$2; shift 2 ;;
	--) shift; extra=("$@"); break ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
source "$(dirname "$0")/lib.sh"
ulimit -n 65536 2>/dev/null || true

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/secret"
DATABASE_URL=$db LISTEN_ADDR=127.0.0.1:${BENCH_INGEST_PORT:-18080} METRICS_ADDR=127.0.0.1:${BENCH_METRICS_PORT:-19190} BOARDREADYOPS_WEBHOOK_SECRET_FILE=$work/secret \
	BOARDREADYOPS_INGEST_BODY_BUDGET_MIB=128 GOMEMLIMIT=460MiB BOARDREADYOPS_INGEST_MAX_CONNECTIONS=$max_connections \
	LOG_LEVEL=warn bin/ingest >"$work/ingest.log" 2>&1 &
ingest_pid=$!
pids+=($ingest_pid)
wait_ready http://127.0.0.1:${BENCH_METRICS_PORT:-19190}/readyz

echo "ingest: body budget 128 MiB, GOMEMLIMIT 460MiB (chart limit 512Mi), max connections $max_connections"
status=0
bin/loadgen hostile --url http://127.0.0.1:${BENCH_INGEST_PORT:-18080}/webhook --secret-file "$work/secret" --pid "$ingest_pid" \
	--duration "$duration" "${extra[@]}" || status=$?
echo "ingest results: $(curl -fsS http://127.0.0.1:${BENCH_METRICS_PORT:-19190}/metrics | grep '^boardreadyops_ingest_deliveries_total' | awk '{split($1,a,"result=\""); split(a[2],b,"\""); s[b[1]]+=$2} END {for (k in s) printf "%s=%d ", k, s[k]}')"
exit $status
