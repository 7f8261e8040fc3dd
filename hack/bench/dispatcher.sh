#!/usr/bin/env bash
# Dispatcher benchmarks (docs/performance.md) on a fresh durable PostgreSQL: the queue machinery
# with a no-op GitHub (30,000 check-run completions, one per release run; 256 deliveries in
# flight) and end to end against the GitHub simulator over loopback HTTP (10,000 release runs:
# check-run creation + workflow dispatch each; 64 in flight), each three times, then
# pgbench -N -c 8 -j 2 on the same server.
#
#   hack/bench/dispatcher.sh [--count 3]
count=3
while (($#)); do
	case "$1" in
	--count) count=$2; shift 2 ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
source "$(dirname "$0")/lib.sh"

TEST_DATABASE_URL=$pgbench_db go test -run '^$' -bench . -benchtime 1x -count "$count" -timeout 30m \
	./services/outbox-dispatcher/internal/dispatcher/ | grep -oE 'Benchmark[A-Za-z]+: [0-9]+ effects in .* p99 <= [0-9.]+ ms'
bin/loadgen pgbench --database-url "$pgbench_db" --duration 30s
