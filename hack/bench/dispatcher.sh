#!/usr/bin/env bash
# Dispatcher benchmarks (docs/performance.md) on a fresh durable PostgreSQL, interleaved round by
# round so that the machine's noise falls on every contender alike:
#   - the queue machinery with a no-op GitHub (30,000 check-run completions, 1,024 deliveries in
#     flight, claims of 128: BenchmarkQueueMachinery);
#   - River (hack/bench/river), 30,000 pre-inserted no-op jobs, at its best settings (MaxWorkers
#     1000, FetchCooldown 1 ms) and at its defaults;
# then end to end against the GitHub simulator (10,000 release runs, 64 in flight), and
# pgbench -N -c 8 -j 2 on the same server, and the server's CPU per row of a minimal
# `UPDATE … WHERE id = ANY($1)` (pg_update_floor). Prints every run (with CPU per effect or job
# of the client and of PostgreSQL), the medians, and the machinery's ratio to River at its best.
#
#   hack/bench/dispatcher.sh [--count 3] [--no-e2e]
count=3
e2e=1
while (($#)); do
	case "$1" in
	--count) count=$2; shift 2 ;;
	--no-e2e) e2e=0; shift ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
source "$(dirname "$0")/lib.sh"

server_db="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
(cd hack && go build -o ../bin/river-bench ./bench/river)
go test -c -o "$work/dispatcher.test" ./services/outbox-dispatcher/internal/dispatcher/

median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.0f\n", (a[NR/2]+a[NR/2+1])/2}'; }
machinery=() best=() defaults=()
run_machinery() {
	line=$(TEST_DATABASE_URL=$pgbench_db "$work/dispatcher.test" -test.run '^$' -test.bench '^BenchmarkQueueMachinery$' \
		-test.benchtime 1x -test.count 1 -test.timeout 30m | grep -oE 'Benchmark[A-Za-z]+: [0-9]+ effects in .*')
	echo "round $round: $line"
	machinery+=("$(sed -E 's/.*= ([0-9]+) effects\/s.*/\1/' <<<"$line")")
}
run_best() {
	line=$(bin/river-bench --database-url "$server_db" --jobs 30000 --best)
	echo "round $round: $line"
	best+=("$(sed -E 's/.*: ([0-9]+) jobs\/s.*/\1/' <<<"$line")")
}
for round in $(seq 1 "$count"); do
	# The two contenders take turns going first: the one after River at its defaults (30 s, and a
	# database created and dropped) meets whatever that leaves behind. An even --count gives each
	# the first place equally often; the machinery has round 1, on a fresh server.
	if ((round % 2)); then run_machinery; run_best; else run_best; run_machinery; fi
	line=$(bin/river-bench --database-url "$server_db" --jobs 30000)
	echo "round $round: $line"
	defaults+=("$(sed -E 's/.*: ([0-9]+) jobs\/s.*/\1/' <<<"$line")")
done
m=$(printf '%s\n' "${machinery[@]}" | median)
b=$(printf '%s\n' "${best[@]}" | median)
d=$(printf '%s\n' "${defaults[@]}" | median)
echo "median of $count: machinery $m effects/s; River best $b jobs/s; River defaults $d jobs/s"
awk -v m="$m" -v b="$b" -v d="$d" 'BEGIN {printf "ratio: machinery / River best = %.2f; machinery / River defaults = %.2f\n", m/b, m/d}'

if ((e2e)); then
	TEST_DATABASE_URL=$pgbench_db "$work/dispatcher.test" -test.run '^$' -test.bench '^BenchmarkEndToEndSimulator$' \
		-test.benchtime 1x -test.count "$count" -test.timeout 30m | grep -oE 'Benchmark[A-Za-z]+: [0-9]+ effects in .*'
fi
bin/loadgen pgbench --database-url "$pgbench_db" --duration 30s
pg_update_floor
