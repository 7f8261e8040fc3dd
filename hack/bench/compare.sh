#!/usr/bin/env bash
# One change at a time (docs/performance.md): BenchmarkQueueMachinery of a base revision (A) and
# of the working tree (B), round by round on one fresh durable PostgreSQL, so that the machine's
# noise falls on both alike; prints every round, the medians and B/A. A round of River at its
# best goes with each pair when --river is given.
#
#   hack/bench/compare.sh [--count 3] [--base REV] [--env-a 'GOGC=100'] [--env-b '…'] [--river]
#
# Without --base both sides are the working tree (compare environments: --env-a GOGC=100).
# The base revision must migrate the same way as the working tree or older: the server is
# migrated by the working tree's brops, and each benchmark database is a copy of it.
count=3 base="" env_a="" env_b="" river=0
while (($#)); do
	case "$1" in
	--count) count=$2; shift 2 ;;
	--base) base=$2; shift 2 ;;
	--env-a) env_a=$2; shift 2 ;;
	--env-b) env_b=$2; shift 2 ;;
	--river) river=1; shift ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
source "$(dirname "$0")/lib.sh"

pkg=./services/outbox-dispatcher/internal/dispatcher/
go test -c -o "$work/b.test" "$pkg"
if [[ -n "$base" ]]; then
	git worktree add --detach "$work/base" "$base" >/dev/null 2>&1
	(cd "$work/base" && go test -c -o "$work/a.test" "$pkg")
	git worktree remove --force "$work/base"
else
	cp "$work/b.test" "$work/a.test"
fi
if ((river)); then (cd hack && go build -o ../bin/river-bench ./bench/river); fi

median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.0f\n", (a[NR/2]+a[NR/2+1])/2}'; }
machinery() { # side env…
	local side=$1; shift
	env TEST_DATABASE_URL="$pgbench_db" "$@" "$work/$side.test" -test.run '^$' -test.bench '^BenchmarkQueueMachinery$' \
		-test.benchtime 1x -test.count 1 -test.timeout 30m | grep -oE 'Benchmark[A-Za-z]+: [0-9]+ effects in .*'
}
rate() { sed -E 's/.*= ([0-9]+) effects\/s.*/\1/'; }
as=() bs=() rs=()
for round in $(seq 1 "$count"); do
	# Alternate which side goes first, so neither always meets the warmer server.
	for side in $( ((round % 2)) && echo "a b" || echo "b a"); do
		if [[ $side == a ]]; then
			# shellcheck disable=SC2086 # the env strings are NAME=value words
			line=$(machinery a $env_a); echo "round $round A${base:+ ($base)}${env_a:+ [$env_a]}: $line"; as+=("$(rate <<<"$line")")
		else
			# shellcheck disable=SC2086
			line=$(machinery b $env_b); echo "round $round B${env_b:+ [$env_b]}: $line"; bs+=("$(rate <<<"$line")")
		fi
	done
	if ((river)); then
		line=$(bin/river-bench --database-url "$pgbench_db" --jobs 30000 --best); echo "round $round: $line"
		rs+=("$(sed -E 's/.*: ([0-9]+) jobs\/s.*/\1/' <<<"$line")")
	fi
done
a=$(printf '%s\n' "${as[@]}" | median)
b=$(printf '%s\n' "${bs[@]}" | median)
echo "median of $count: A $a effects/s; B $b effects/s"
awk -v a="$a" -v b="$b" 'BEGIN {printf "ratio: B / A = %.3f\n", b/a}'
if ((river)); then
	r=$(printf '%s\n' "${rs[@]}" | median)
	awk -v a="$a" -v b="$b" -v r="$r" 'BEGIN {printf "River best %d jobs/s; A / River = %.2f; B / River = %.2f\n", r, a/r, b/r}'
fi
