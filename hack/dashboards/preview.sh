#!/usr/bin/env bash
# make dashboards-preview: render each dashboard of the chart to docs/img/dashboard-<name>.png with
# real data, in headless Chromium, on a page that draws the panels by their gridPos with uPlot
# (labelled a preview: Grafana itself is not obtainable here).
#
# Data: PROMETHEUS_URL set: that Prometheus (the live monitoring test's, say), the last
# PREVIEW_MINUTES minutes. Otherwise the script runs the product itself as `make run` does
# (PostgreSQL, migrations, the GitHub simulator, ingest, lifecycle, dispatcher), a Debian
# Prometheus scraping them every 2 s, and `loadgen e2e` release-tag pushes for PREVIEW_MINUTES
# minutes (default 5) at PREVIEW_RATE pushes/s (default 4), all on loopback, then renders that
# window. Work files, uPlot (npm) and logs go to .data/preview; nothing there is committed.
# Needs: chromium, prometheus (Debian packages), npm.
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOTOOLCHAIN=${GOTOOLCHAIN:-go$(sed -n 's/^go //p' go.work)}

work=.data/preview
minutes=${PREVIEW_MINUTES:-5}
rate=${PREVIEW_RATE:-4}
uplot_version=1.6.32
mkdir -p "$work" docs/img
for cmd in chromium npm; do
	command -v "$cmd" >/dev/null || { echo "$cmd not found (Debian: apt-get install chromium npm)" >&2; exit 1; }
done

# uPlot, the chart library Grafana draws time series with, fetched at preview time.
if [[ ! -f "$work/npm/node_modules/uplot/dist/uPlot.iife.min.js" ]]; then
	npm install --silent --no-save --no-audit --no-fund --prefix "$work/npm" "uplot@$uplot_version" >/dev/null
fi

pids=()
cleanup() {
	trap - EXIT INT TERM
	if ((${#pids[@]})); then
		kill -TERM "${pids[@]}" 2>/dev/null || true
		wait "${pids[@]}" 2>/dev/null || true
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_ready() { # url log
	for _ in $(seq 1 300); do curl -fsS "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done
	echo "not ready: $1; last log lines:" >&2
	tail -20 "$2" >&2
	exit 1
}

if [[ -z "${PROMETHEUS_URL:-}" ]]; then
	command -v prometheus >/dev/null || { echo "prometheus not found (Debian: apt-get install prometheus)" >&2; exit 1; }
	make -s build >/dev/null
	logs=$work/logs
	rm -rf "$work/postgres" "$work/prometheus" "$logs"
	mkdir -p "$logs"
	pg_port=${PREVIEW_PG_PORT:-55470}
	bin/pgdev --dir "$work/postgres" --port "$pg_port" --url-file "$work/postgres.url" >"$logs/postgres.log" 2>&1 &
	pids+=($!)
	rm -f "$work/postgres.url"
	for _ in $(seq 1 300); do [[ -s "$work/postgres.url" ]] && break; sleep 0.1; done
	[[ -s "$work/postgres.url" ]] || { cat "$logs/postgres.log"; exit 1; }
	export DATABASE_URL
	DATABASE_URL=$(<"$work/postgres.url")
	bin/brops migrate up >/dev/null

	bin/devkeys --dir "$work/dev"
	export LOG_LEVEL=warn BOARDREADYOPS_GITHUB_APP_ID=1 BOARDREADYOPS_GITHUB_PRIVATE_KEY_FILE=$work/dev/app-key.pem \
		BOARDREADYOPS_WEBHOOK_SECRET_FILE=$work/dev/webhook-secret BOARDREADYOPS_GITHUB_API_URL=http://127.0.0.1:28090/
	bin/githubsim --listen 127.0.0.1:28090 --app-id 1 --app-key-file "$work/dev/app-key.pem" \
		--webhook-url http://127.0.0.1:28080/webhook --webhook-secret-file "$work/dev/webhook-secret" \
		--run-delay 2s >"$logs/githubsim.log" 2>&1 &
	pids+=($!)
	LISTEN_ADDR=127.0.0.1:28080 METRICS_ADDR=127.0.0.1:28091 bin/ingest >"$logs/ingest.log" 2>&1 &
	pids+=($!)
	METRICS_ADDR=127.0.0.1:28092 bin/lifecycle >"$logs/lifecycle.log" 2>&1 &
	pids+=($!)
	METRICS_ADDR=127.0.0.1:28093 bin/outbox-dispatcher >"$logs/outbox-dispatcher.log" 2>&1 &
	pids+=($!)
	wait_ready http://127.0.0.1:28091/readyz "$logs/ingest.log"
	wait_ready http://127.0.0.1:28092/readyz "$logs/lifecycle.log"
	wait_ready http://127.0.0.1:28093/readyz "$logs/outbox-dispatcher.log"

	# The labels a Prometheus Operator scrape gives: a namespace, a job per Service.
	cat >"$work/prometheus.yml" <<-YAML
		global: {scrape_interval: 2s, evaluation_interval: 2s}
		scrape_configs:
		  - {job_name: boardreadyops-ingest, static_configs: [{targets: ["127.0.0.1:28091"], labels: {namespace: boardreadyops}}]}
		  - {job_name: boardreadyops-lifecycle, static_configs: [{targets: ["127.0.0.1:28092"], labels: {namespace: boardreadyops}}]}
		  - {job_name: boardreadyops-outbox-dispatcher, static_configs: [{targets: ["127.0.0.1:28093"], labels: {namespace: boardreadyops}}]}
	YAML
	prometheus --config.file "$work/prometheus.yml" --storage.tsdb.path "$work/prometheus" \
		--web.listen-address 127.0.0.1:28190 >"$logs/prometheus.log" 2>&1 &
	pids+=($!)
	PROMETHEUS_URL=http://127.0.0.1:28190
	wait_ready "$PROMETHEUS_URL/-/ready" "$logs/prometheus.log"

	echo "preview: ${minutes} min of release-tag pushes at ${rate}/s (logs in $logs)"
	sleep 20 # an idle start, as a dashboard shows one
	bin/loadgen e2e --ingest-url http://127.0.0.1:28080/webhook --secret-file "$work/dev/webhook-secret" \
		--database-url "$DATABASE_URL" --runs $((minutes * 60 * rate)) --rate "$rate" --installations 40 --repositories 80 \
		--timeout $((minutes + 5))m >"$logs/loadgen.log" 2>&1 || { tail -20 "$logs/loadgen.log"; exit 1; }
	sleep 30 # the drain after the load
	minutes=$((minutes + 1))
fi

go run ./hack/dashboards/preview -prometheus "$PROMETHEUS_URL" -last "${minutes}m" \
	-dashboards charts/boardreadyops/dashboards -out docs/img -work "$work" \
	-uplot "$work/npm/node_modules/uplot/dist"
