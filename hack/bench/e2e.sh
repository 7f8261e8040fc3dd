#!/usr/bin/env bash
# End-to-end load (docs/performance.md): a fresh durable PostgreSQL, the GitHub simulator running
# every dispatched workflow (100 ms steps) and sending its workflow_run webhooks back, ingest,
# lifecycle and outbox-dispatcher as separate processes, and `loadgen e2e` pushing release tags
# (each run: 10 webhooks, of which the filter stores 2 as jobs, and 4 effects) until every run is
# finished; then pgbench. The 10: the push; workflow_run requested, in_progress and completed;
# and the check events GitHub sends an App with the checks permission (githubsim --check-events):
# check_run created and completed of the App's check run and of the workflow's job, and
# check_suite completed of both suites. E2E_CHECK_EVENTS=false leaves the last six out, as every
# burst before 2026-12-07 did.
#
#   hack/bench/e2e.sh [--runs 50000] [--rate 0] [--installations 10] [--repositories 100] [--pacing off|on]
#                     [--pooler none|pgbouncer] [--listen on|off] [--dispatchers 1]
#
# --pacing off (the default) turns the dispatcher's per-installation pacing off
# (BOARDREADYOPS_DISPATCHER_PER_INSTALLATION=0): at GitHub's pace of one request per installation
# per second, 10 installations would bound this benchmark at ~10 effects/s. hack/bench/pacing.sh
# compares both over one installation per run.
#
# --pooler pgbouncer puts Debian's PgBouncer in transaction pooling mode between the three services
# and the server, as docs/operations.md ("Connection poolers") sets it up: the services' URL gets
# default_query_exec_mode=exec and LISTEN is off (polling); loadgen, migrations and pgbench stay
# direct. --listen off turns LISTEN off on a direct run too, the fair comparison
# (hack/bench/pooler.sh runs both alternately).
#
# --dispatchers N runs N outbox-dispatcher replicas, each with its own pool and metrics port
# (19293, 19294, …); the claim latency and effects per claim printed are of all of them together,
# and each has its line of CPU and RSS (outbox-dispatcher, outbox-dispatcher-2, …).
#
# E2E_DISPATCHER_CONCURRENCY (64), E2E_DISPATCHER_BATCH (64) and E2E_LIFECYCLE_CONCURRENCY (4) set
# the services' batching; the load tool prints what it bought, effects and jobs per claim.
# E2E_SIM_SENDERS (32) is how many webhooks the simulator sends at once (8 before 2026-12-05).
# E2E_SIM_RETAIN (10000) is how many finished check runs, workflow runs and webhook deliveries the
# simulator keeps (githubsim --retain-finished; 0 keeps every check run and workflow run and the
# newest 100,000 deliveries, as every burst did before 2026-12-07: a heap that grew to 400–600 MiB,
# paid for on the shared cores).
# E2E_INGEST_CONNS (16), E2E_LIFECYCLE_CONNS (8) and E2E_DISPATCHER_CONNS (16) size the services'
# database pools (BOARDREADYOPS_DB_MAX_CONNS). KEEP_LOGS=dir keeps the logs and the services'
# metrics, of a burst that did not finish too; PG_STATEMENTS=1 and PG_SET are lib.sh's.
# PG_WAL_RECORDS=1 prints the burst's WAL by record type and relation, per release run (lib.sh's
# pg_wal_mark and pg_wal_records; pgbench is skipped so that only the burst is counted).
runs=50000 rate=0 installations=10 repositories=100 pacing=off pooler=none listen=on dispatchers=1
while (($#)); do
	case "$1" in
	--runs) runs=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--installations) installations=$2; shift 2 ;;
	--repositories) repositories=$2; shift 2 ;;
	--pacing) pacing=$2; shift 2 ;;
	--pooler) pooler=$2; shift 2 ;;
	--listen) listen=$2; shift 2 ;;
	--dispatchers) dispatchers=$2; shift 2 ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
case "$pacing" in
on) per_installation=1 ;;
off) per_installation=0 ;;
*) echo "--pacing on|off" >&2; exit 2 ;;
esac
[[ $dispatchers =~ ^[1-9]$ ]] || { echo "--dispatchers takes 1 to 9" >&2; exit 2; }
case "$pooler/$listen" in
none/on | none/off | pgbouncer/off) ;;
pgbouncer/on) listen=off ;;
*) echo "--pooler none|pgbouncer, --listen on|off" >&2; exit 2 ;;
esac
source "$(dirname "$0")/lib.sh"

services_db=$db
if [[ $pooler == pgbouncer ]]; then
	start_pgbouncer
	services_db=$pooled_db
fi

bin/devkeys --dir "$work/dev"
export LOG_LEVEL=warn DATABASE_URL=$services_db BOARDREADYOPS_LISTEN=$([[ $listen == on ]] && echo true || echo false) BOARDREADYOPS_GITHUB_APP_ID=1 BOARDREADYOPS_GITHUB_PRIVATE_KEY_FILE=$work/dev/app-key.pem \
	BOARDREADYOPS_WEBHOOK_SECRET_FILE=$work/dev/webhook-secret BOARDREADYOPS_GITHUB_API_URL=http://127.0.0.1:18091/
bin/githubsim --listen 127.0.0.1:18091 --app-id 1 --app-key-file "$work/dev/app-key.pem" --webhook-url http://127.0.0.1:18081/webhook \
	--webhook-secret-file "$work/dev/webhook-secret" --run-delay 100ms --webhook-senders "${E2E_SIM_SENDERS:-32}" --retain-finished "${E2E_SIM_RETAIN:-10000}" \
	--check-events="${E2E_CHECK_EVENTS:-true}" >"$work/githubsim.log" 2>&1 &
pids+=($!); githubsim_pid=$!
LISTEN_ADDR=127.0.0.1:18081 METRICS_ADDR=127.0.0.1:19291 BOARDREADYOPS_DB_MAX_CONNS=${E2E_INGEST_CONNS:-16} bin/ingest >"$work/ingest.log" 2>&1 &
pids+=($!); ingest_pid=$!
METRICS_ADDR=127.0.0.1:19292 BOARDREADYOPS_DB_MAX_CONNS=${E2E_LIFECYCLE_CONNS:-8} BOARDREADYOPS_LIFECYCLE_CONCURRENCY=${E2E_LIFECYCLE_CONCURRENCY:-4} bin/lifecycle >"$work/lifecycle.log" 2>&1 &
pids+=($!); lifecycle_pid=$!
ports=(19291 19292) dispatcher_metrics=() dispatcher_pids=()
for i in $(seq 1 "$dispatchers"); do
	mport=$((19292 + i)) name=outbox-dispatcher$( ((i == 1)) || echo "-$i")
	METRICS_ADDR=127.0.0.1:$mport BOARDREADYOPS_DB_MAX_CONNS=${E2E_DISPATCHER_CONNS:-16} BOARDREADYOPS_DISPATCHER_CONCURRENCY=${E2E_DISPATCHER_CONCURRENCY:-64} BOARDREADYOPS_DISPATCHER_BATCH_SIZE=${E2E_DISPATCHER_BATCH:-64} \
		BOARDREADYOPS_DISPATCHER_PER_INSTALLATION=$per_installation bin/outbox-dispatcher >"$work/${name#outbox-}.log" 2>&1 &
	pids+=($!); ports+=("$mport"); dispatcher_metrics+=("http://127.0.0.1:$mport/metrics"); dispatcher_pids+=("$name=$!")
done
for p in "${ports[@]}"; do wait_ready http://127.0.0.1:$p/readyz; done

status=0
pgbench_args=(--pgbench-database-url "$pgbench_db")
if [[ -n "${PG_WAL_RECORDS:-}" ]]; then
	pgbench_args=()
	wal_start=$(pg_wal_mark)
fi
bin/loadgen e2e --ingest-url http://127.0.0.1:18081/webhook --secret-file "$work/dev/webhook-secret" --database-url "$db" \
	--runs "$runs" --rate "$rate" --installations "$installations" --repositories "$repositories" --dispatcher-metrics "$(IFS=,; echo "${dispatcher_metrics[*]}")" --lifecycle-metrics http://127.0.0.1:19292/metrics \
	--pids "ingest=$ingest_pid,lifecycle=$lifecycle_pid,$(IFS=,; echo "${dispatcher_pids[*]}"),githubsim=$githubsim_pid" \
	"${pgbench_args[@]}" ${LOADGEN_JSON:+--json} || status=$?
# KEEP_LOGS=dir keeps the services' and the server's logs and metrics, of a burst that did not
# finish too: it is the one whose logs are needed.
if [[ -n "${KEEP_LOGS:-}" ]]; then
	{ mkdir -p "$KEEP_LOGS" && cp "$work"/*.log "$KEEP_LOGS"/; } || echo "KEEP_LOGS: the logs were not copied to $KEEP_LOGS" >&2
	for p in "${ports[@]}"; do curl -fsS http://127.0.0.1:$p/metrics >"$KEEP_LOGS/metrics-$p.txt" || true; done
fi
grep -h 'level=ERROR' "$work"/*.log | head -5 || true
if ((status)); then
	# What the server can still tell, without hiding the load tool's status.
	pg_wal_stats || true
	pg_top_statements true || true
	pg_top_statements false || true
	exit "$status"
fi
pg_wal_stats
if [[ -n "${PG_WAL_RECORDS:-}" ]]; then pg_wal_records "$wal_start" "$runs"; fi
pg_top_statements true
pg_top_statements false
