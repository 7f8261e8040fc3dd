#!/usr/bin/env bash
# Soak benchmark (docs/performance.md, "Soak"): the e2e.sh setup — a fresh durable PostgreSQL, the
# GitHub simulator running every dispatched workflow and sending its workflow_run webhooks back,
# ingest, lifecycle and outbox-dispatcher as separate processes — driven by `loadgen soak` for
# --webhooks webhooks (a release run is 4: its tag push and its workflow run's requested,
# in_progress and completed), at most --max-open runs in flight. Each tenth of the run is sampled:
# throughput, lifecycle and dispatcher claim latency p50/p99 (the services' histograms), total
# relation size, dead tuples and (auto)vacuum counts per table, PostgreSQL CPU per release run.
#
#   hack/bench/soak.sh [--webhooks 3000000] [--retention on|off] [--retention-period 2m]
#                      [--retention-interval 10s] [--max-open 400] [--repositories 100]
#
# --retention on (the default) runs lifecycle's retention accelerated: every period below is
# --retention-period instead of days, a pass every --retention-interval, so deletion runs
# throughout the soak. The variables are lifecycle's BOARDREADYOPS_RETENTION_* settings
# (docs/operations.md, "Retention"); --retention off sets every period to 0 (never).
# Extra environment for the services: SOAK_ENV="NAME=value …". LOADGEN_JSON=1 prints JSON.
# The simulator keeps the newest SOAK_SIM_RETAIN (100000) finished check runs and workflow runs
# (githubsim --retain-finished; 0 keeps all, about 7 KiB per release run: gigabytes by the end).
webhooks=3000000 retention=on period=2m interval=10s max_open=400 repositories=100 installations=10
while (($#)); do
	case "$1" in
	--webhooks) webhooks=$2; shift 2 ;;
	--retention) retention=$2; shift 2 ;;
	--retention-period) period=$2; shift 2 ;;
	--retention-interval) interval=$2; shift 2 ;;
	--max-open) max_open=$2; shift 2 ;;
	--repositories) repositories=$2; shift 2 ;;
	--installations) installations=$2; shift 2 ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
case "$retention" in
on) p=$period ;;
off) p=0 ;;
*) echo "--retention on|off" >&2; exit 2 ;;
esac
source "$(dirname "$0")/lib.sh"

port_base=${SOAK_PORT_BASE:-18500}
gh=$((port_base + 1)) in=$((port_base + 2)) m_in=$((port_base + 3)) m_lc=$((port_base + 4)) m_dp=$((port_base + 5))
retention_env=(BOARDREADYOPS_RETENTION_JOBS=$p BOARDREADYOPS_RETENTION_DIGESTS=$p BOARDREADYOPS_RETENTION_EFFECTS=$p
	BOARDREADYOPS_RETENTION_RELEASE_RUNS=$p
	BOARDREADYOPS_RETENTION_INTERVAL=$interval BOARDREADYOPS_RETENTION_BATCH_PAUSE=${SOAK_RETENTION_BATCH_PAUSE:-10ms}
	BOARDREADYOPS_RETENTION_ALLOW_SHORT=true)
read -r -a extra_env <<<"${SOAK_ENV:-}"

bin/devkeys --dir "$work/dev" >/dev/null
export LOG_LEVEL=warn DATABASE_URL=$db BOARDREADYOPS_GITHUB_APP_ID=1 BOARDREADYOPS_GITHUB_PRIVATE_KEY_FILE=$work/dev/app-key.pem \
	BOARDREADYOPS_WEBHOOK_SECRET_FILE=$work/dev/webhook-secret BOARDREADYOPS_GITHUB_API_URL=http://127.0.0.1:$gh/
bin/githubsim --listen 127.0.0.1:$gh --app-id 1 --app-key-file "$work/dev/app-key.pem" --webhook-url http://127.0.0.1:$in/webhook \
	--webhook-secret-file "$work/dev/webhook-secret" --run-delay 100ms --retain-finished "${SOAK_SIM_RETAIN:-100000}" >"$work/githubsim.log" 2>&1 &
pids+=($!); githubsim_pid=$!
env "${extra_env[@]}" LISTEN_ADDR=127.0.0.1:$in METRICS_ADDR=127.0.0.1:$m_in BOARDREADYOPS_DB_MAX_CONNS=16 bin/ingest >"$work/ingest.log" 2>&1 &
pids+=($!); ingest_pid=$!
env "${retention_env[@]}" "${extra_env[@]}" METRICS_ADDR=127.0.0.1:$m_lc BOARDREADYOPS_DB_MAX_CONNS=8 bin/lifecycle >"$work/lifecycle.log" 2>&1 &
pids+=($!); lifecycle_pid=$!
env "${extra_env[@]}" METRICS_ADDR=127.0.0.1:$m_dp BOARDREADYOPS_DB_MAX_CONNS=16 BOARDREADYOPS_DISPATCHER_CONCURRENCY=64 BOARDREADYOPS_DISPATCHER_BATCH_SIZE=64 \
	BOARDREADYOPS_DISPATCHER_PER_INSTALLATION=0 bin/outbox-dispatcher >"$work/dispatcher.log" 2>&1 &
pids+=($!); dispatcher_pid=$!
for m in $m_in $m_lc $m_dp; do wait_ready http://127.0.0.1:$m/readyz; done
echo "soak: $webhooks webhooks, retention $retention (${retention_env[*]}), max open $max_open; pids ingest=$ingest_pid lifecycle=$lifecycle_pid outbox-dispatcher=$dispatcher_pid githubsim=$githubsim_pid"

bin/loadgen soak --ingest-url http://127.0.0.1:$in/webhook --secret-file "$work/dev/webhook-secret" --database-url "$db" \
	--webhooks "$webhooks" --max-open "$max_open" --repositories "$repositories" --installations "$installations" \
	--ingest-metrics http://127.0.0.1:$m_in/metrics --lifecycle-metrics http://127.0.0.1:$m_lc/metrics \
	--dispatcher-metrics http://127.0.0.1:$m_dp/metrics ${LOADGEN_JSON:+--json}
pg_wal_stats
grep -h 'level=ERROR' "$work"/*.log | head -5 || true
if [[ -n "${KEEP_LOGS:-}" ]]; then
	mkdir -p "$KEEP_LOGS" && cp "$work"/*.log "$KEEP_LOGS"/
	for m in $m_in $m_lc $m_dp; do curl -fsS http://127.0.0.1:$m/metrics >"$KEEP_LOGS/metrics-$m.txt" || true; done
fi
