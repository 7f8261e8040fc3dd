#!/usr/bin/env bash
# make run: the whole product locally, each service its own process, one PostgreSQL, and the
# GitHub API simulator in GitHub's place (it runs dispatched workflows and sends workflow_run
# webhooks back). Then a short demonstration: an installation, a release that succeeds, a release
# whose first run fails, and its re-run.
#
#   hack/run.sh           run the demonstration, print a summary, stop everything
#   hack/run.sh --keep    the same, then keep everything running until Ctrl-C
#
# DATABASE_URL set: that database is used; otherwise a project-local PostgreSQL runs from
# .data/postgres (kept across runs). Logs: .data/logs/<process>.log. Against real GitHub, run the
# services yourself with BOARDREADYOPS_GITHUB_API_URL, _APP_ID, _PRIVATE_KEY_FILE and
# BOARDREADYOPS_WEBHOOK_SECRET_FILE (README, "Running against GitHub").
set -euo pipefail
cd "$(dirname "$0")/.."

keep=false
for arg in "$@"; do
	case "$arg" in
	--keep) keep=true ;;
	-h | --help) sed -n '2,13p' "$0"; exit 0 ;;
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

wait_ready() { # name url log
	for _ in $(seq 1 150); do
		curl -fsS "$2" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "$1 did not become ready; last log lines:" >&2
	tail -20 "$3" >&2
	exit 1
}

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
fi
export DATABASE_URL
echo "PostgreSQL         $DATABASE_URL"
"$bin/brops" migrate up >/dev/null
echo "migrations         applied (schema $("$bin/brops" migrate status -o json | grep -c '"applied": true') migrations)"

# A throw-away App key and webhook secret (kept in .data/dev across runs).
"$bin/devkeys" --dir "$data/dev"
app_id=1
export LOG_FORMAT=text
export BOARDREADYOPS_GITHUB_APP_ID=$app_id
export BOARDREADYOPS_GITHUB_PRIVATE_KEY_FILE=$data/dev/app-key.pem
export BOARDREADYOPS_WEBHOOK_SECRET_FILE=$data/dev/webhook-secret
export BOARDREADYOPS_GITHUB_API_URL=http://127.0.0.1:18090/

"$bin/githubsim" --listen 127.0.0.1:18090 --app-id $app_id --app-key-file "$data/dev/app-key.pem" \
	--webhook-url http://127.0.0.1:18080/webhook --webhook-secret-file "$data/dev/webhook-secret" \
	--run-delay 1s --fail-tags fail >"$logs/githubsim.log" 2>&1 &
pids+=($!)

declare -A metrics=([ingest]=19091 [lifecycle]=19092 [outbox-dispatcher]=19093)
LISTEN_ADDR=127.0.0.1:18080 METRICS_ADDR=127.0.0.1:${metrics[ingest]} "$bin/ingest" >"$logs/ingest.log" 2>&1 &
pids+=($!)
for svc in lifecycle outbox-dispatcher; do
	METRICS_ADDR=127.0.0.1:${metrics[$svc]} "$bin/$svc" >"$logs/$svc.log" 2>&1 &
	pids+=($!)
done

echo "GitHub simulator   http://127.0.0.1:18090 (log $logs/githubsim.log)"
for svc in ingest lifecycle outbox-dispatcher; do
	wait_ready "$svc" "http://127.0.0.1:${metrics[$svc]}/readyz" "$logs/$svc.log"
	printf '%-18s ready; metrics http://127.0.0.1:%s/metrics (log %s)\n' "$svc" "${metrics[$svc]}" "$logs/$svc.log"
done
echo "webhook endpoint   http://127.0.0.1:18080/webhook"
echo

"$bin/demo" --ingest-url http://127.0.0.1:18080/webhook --secret-file "$data/dev/webhook-secret" --app-id $app_id

# The operator's broker-transition evaluation, in its local mode (no cluster): the same rules it
# reports on an OutboxMonitor in Kubernetes, applied to the running dispatcher's metrics.
echo
echo "broker-transition triggers (operator evaluate, against the running dispatcher):"
"$bin/operator" evaluate --scrape "http://127.0.0.1:${metrics[outbox-dispatcher]}/metrics" --interval 1s --rounds 3

if $keep; then
	echo
	echo "everything keeps running; Ctrl-C stops every process"
	wait -n "${pids[@]}" || true
	echo "a process exited; stopping the rest"
	exit 1
fi
