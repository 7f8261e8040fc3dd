#!/usr/bin/env bash
# Ingest benchmark (docs/performance.md): a fresh durable PostgreSQL (fsync on), the real ingest
# binary, then `loadgen ingest` at 64 concurrent senders for 60 s, followed by pgbench -N -c 8 -j 2
# on the same server, three times; prints each run and the medians. Everything on loopback.
#
#   hack/bench/ingest.sh [--duration 60s] [--runs 3] [--concurrency 64]
set -euo pipefail
cd "$(dirname "$0")/../.."
duration=60s runs=3 concurrency=64
while (($#)); do
	case "$1" in
	--duration) duration=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--concurrency) concurrency=$2; shift 2 ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done

make -s build >/dev/null
go build -o bin/loadgen ./hack/loadgen
work=$(mktemp -d /tmp/boardreadyops-bench-XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
	((${#pids[@]})) && kill -TERM "${pids[@]}" 2>/dev/null && wait "${pids[@]}" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

port=55440
bin/pgdev --dir "$work/pg" --port $port --url-file "$work/url" >"$work/pg.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do [[ -s "$work/url" ]] && break; sleep 0.1; done
db=$(<"$work/url")
pgbench_db=postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable
bin/brops migrate up --database-url "$db" >/dev/null

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/secret"
ingest_port=18080
DATABASE_URL=$db LISTEN_ADDR=127.0.0.1:$ingest_port METRICS_ADDR=127.0.0.1:19190 BOARDREADYOPS_WEBHOOK_SECRET_FILE=$work/secret \
	BOARDREADYOPS_DB_MAX_CONNS=${DB_MAX_CONNS:-16} LOG_LEVEL=warn bin/ingest >"$work/ingest.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do curl -fsS http://127.0.0.1:19190/readyz >/dev/null 2>&1 && break; sleep 0.1; done

echo "machine: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), $(free -g | awk '/Mem:/{print $2}') GiB; $(psql "$db" -Atc 'SHOW server_version' | cut -d' ' -f1) PostgreSQL, fsync on"
bin/loadgen ingest --url http://127.0.0.1:$ingest_port/webhook --secret-file "$work/secret" \
	--concurrency "$concurrency" --duration "$duration" --runs "$runs" --pgbench-database-url "$pgbench_db" --pgbench-duration 30s
echo "rows: $(psql "$db" -Atc 'SELECT count(*) FROM control_plane_jobs') jobs"
