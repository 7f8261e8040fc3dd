#!/usr/bin/env bash
# Lifecycle benchmark (docs/performance.md): the real lifecycle binary drains preloaded push-tag
# jobs (each: a release run, an attempt and a github.check_run.create effect), three times, each
# followed by pgbench -N -c 8 -j 2 on the same server.
#
#   hack/bench/lifecycle.sh [--jobs 60000] [--runs 3] [--concurrency 4] [--batch 100]
jobs=60000 runs=3 concurrency=4 batch=100
while (($#)); do
	case "$1" in
	--jobs) jobs=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--concurrency) concurrency=$2; shift 2 ;;
	--batch) batch=$2; shift 2 ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
source "$(dirname "$0")/lib.sh"

DATABASE_URL=$db METRICS_ADDR=127.0.0.1:19191 BOARDREADYOPS_LIFECYCLE_CONCURRENCY=$concurrency BOARDREADYOPS_LIFECYCLE_BATCH_SIZE=$batch \
	BOARDREADYOPS_DB_MAX_CONNS=$((concurrency + 4)) LOG_LEVEL=warn bin/lifecycle >"$work/lifecycle.log" 2>&1 &
pids+=($!)
wait_ready http://127.0.0.1:19191/readyz
echo "lifecycle: concurrency $concurrency, batch $batch"
bin/loadgen lifecycle --database-url "$db" --jobs "$jobs" --runs "$runs" --pgbench-database-url "$pgbench_db" --pgbench-duration 30s
