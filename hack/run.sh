#!/usr/bin/env bash
# make run: the whole product locally, each service its own process, one PostgreSQL.
#
#   hack/run.sh           start, check that every service is ready, print where things are, stop
#   hack/run.sh --keep    the same, then keep everything running until Ctrl-C
#
# With DATABASE_URL set, that database is used; otherwise a project-local PostgreSQL runs from
# .data/postgres (kept across runs). Logs go to .data/logs/<service>.log.
set -euo pipefail
cd "$(dirname "$0")/.."

keep=false
for arg in "$@"; do
	case "$arg" in
	--keep) keep=true ;;
	-h | --help) sed -n '2,8p' "$0"; exit 0 ;;
	*) echo "run: unknown argument $arg (try --keep)" >&2; exit 2 ;;
	esac
done

bin=bin
data=.data
logs=$data/logs
mkdir -p "$logs"
pids=()

cleanup() {
	trap - EXIT INT TERM
	if ((${#pids[@]})); then
		echo "stopping ${#pids[@]} processes"
		kill -TERM "${pids[@]}" 2>/dev/null || true
		wait "${pids[@]}" 2>/dev/null || true
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ -z "${DATABASE_URL:-}" ]]; then
	url_file=$data/postgres.url
	rm -f "$url_file"
	"$bin/pgdev" --dir "$data/postgres" --port "${DEV_DB_PORT:-55432}" --url-file "$url_file" >"$logs/postgres.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 1 300); do
		[[ -s "$url_file" ]] && break
		kill -0 "${pids[0]}" 2>/dev/null || { echo "PostgreSQL failed to start:"; cat "$logs/postgres.log"; exit 1; }
		sleep 0.1
	done
	[[ -s "$url_file" ]] || { echo "PostgreSQL did not become ready"; cat "$logs/postgres.log"; exit 1; }
	DATABASE_URL=$(<"$url_file")
	echo "PostgreSQL   $DATABASE_URL (data in $data/postgres)"
fi
export DATABASE_URL

"$bin/brops" migrate up
export LOG_FORMAT=text

declare -A metrics=([ingest]=19091 [lifecycle]=19092 [outbox-dispatcher]=19093 [operator]=19094)
for svc in ingest lifecycle outbox-dispatcher operator; do
	METRICS_ADDR=127.0.0.1:${metrics[$svc]} "$bin/$svc" >"$logs/$svc.log" 2>&1 &
	pids+=($!)
done

printf '\n%-18s %-8s %-40s %s\n' SERVICE READY METRICS LOG
for svc in ingest lifecycle outbox-dispatcher operator; do
	url=http://127.0.0.1:${metrics[$svc]}
	ready=no
	for _ in $(seq 1 100); do
		if curl -fsS "$url/readyz" >/dev/null 2>&1; then ready=yes; break; fi
		sleep 0.1
	done
	printf '%-18s %-8s %-40s %s\n' "$svc" "$ready" "$url/metrics" "$logs/$svc.log"
	[[ $ready == yes ]] || { echo "$svc did not become ready:"; tail -20 "$logs/$svc.log"; exit 1; }
done

if $keep; then
	echo
	echo "everything is running; Ctrl-C stops every process"
	wait -n "${pids[@]}" || true
	echo "a process exited; stopping the rest"
	exit 1
fi
echo
echo "all services ready; stopping (use 'make run ARGS=--keep' to keep them running)"
