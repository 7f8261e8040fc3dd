#!/usr/bin/env bash
# End to end against a base revision, in the same hour (docs/performance.md): hack/bench/e2e.sh
# of a base revision (A, its own scripts, binaries and migrations, from a temporary worktree) and
# of the working tree (B), alternately, one burst each per round; prints every burst, the medians
# of runs/s, CPU per run and `pgbench -N`, and B/A.
#
#   hack/bench/e2e-compare.sh [--base e86371c] [--count 3] [--runs 50000]
#
# The default base is the code whose three 50,000-run bursts gave the 372 runs/s that issue 25
# starts from (2026-12-03, `pgbench -N` 6,683–6,956 tps then). This machine's pace changes by a
# third between hours, so a runs/s figure alone says little; B/A measured in one sitting does not
# move with it. Each burst starts its own server (BENCH_PG_PORT, as e2e.sh), so the two never share
# one; bursts run one at a time. Run nothing else meanwhile.
set -euo pipefail
count=3 base=e86371c runs=50000
while (($#)); do
	case "$1" in
	--count) count=$2; shift 2 ;;
	--base) base=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
work=$(mktemp -d /tmp/boardreadyops-e2e-compare-XXXXXX)
cleanup() {
	git worktree remove --force "$work/base" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
git worktree add --detach "$work/base" "$base" >/dev/null 2>&1

median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.2f\n", (a[NR/2]+a[NR/2+1])/2}'; }
# burst DIR OUT: one e2e.sh burst of DIR's code, its output in OUT (kept in /tmp if it fails).
burst() {
	if ! (cd "$1" && hack/bench/e2e.sh --runs "$runs") >"$2" 2>&1; then
		kept=$(mktemp /tmp/boardreadyops-e2e-compare-failed-XXXXXX.txt)
		cp "$2" "$kept"
		tail -20 "$2" >&2
		echo "burst of $1 failed; its output: $kept" >&2
		exit 1
	fi
}
# figures OUT: runs/s, CPU ms per run (the sum of the processes' "NAME S s (" seconds) and
# pgbench -N tps of one burst's output.
figures() {
	local rate cpu tps
	rate=$(grep -oE '[0-9]+ runs/s' "$1" | head -1 | cut -d' ' -f1)
	cpu=$(grep -m1 '^CPU seconds used' "$1" | grep -oE '[0-9.]+ s \(' | awk -v n="$runs" '{s += $1} END {printf "%.2f", 1000 * s / n}')
	tps=$(grep -oE 'pgbench -N[^;]* [0-9]+ tps' "$1" | grep -oE '[0-9]+ tps' | cut -d' ' -f1)
	echo "$rate $cpu $tps"
}
a_rate=() a_cpu=() a_tps=() b_rate=() b_cpu=() b_tps=()
for round in $(seq 1 "$count"); do
	# Alternate which side goes first, so that neither always meets the same moment of the hour.
	for side in $( ((round % 2)) && echo "b a" || echo "a b"); do
		out=$work/$side-$round.txt
		if [[ $side == a ]]; then
			burst "$work/base" "$out"
			read -r r c t < <(figures "$out")
			a_rate+=("$r") a_cpu+=("$c") a_tps+=("$t")
			echo "round $round A ($base): $r runs/s, $c ms of CPU per run, pgbench -N $t tps"
		else
			burst . "$out"
			read -r r c t < <(figures "$out")
			b_rate+=("$r") b_cpu+=("$c") b_tps+=("$t")
			echo "round $round B: $r runs/s, $c ms of CPU per run, pgbench -N $t tps"
		fi
	done
done
a=$(printf '%s\n' "${a_rate[@]}" | median) b=$(printf '%s\n' "${b_rate[@]}" | median)
ac=$(printf '%s\n' "${a_cpu[@]}" | median) bc=$(printf '%s\n' "${b_cpu[@]}" | median)
echo "median of $count: A $a runs/s at $ac ms of CPU per run (pgbench -N $(printf '%s\n' "${a_tps[@]}" | median) tps);" \
	"B $b runs/s at $bc ms (pgbench -N $(printf '%s\n' "${b_tps[@]}" | median) tps)"
awk -v a="$a" -v b="$b" -v ac="$ac" -v bc="$bc" 'BEGIN {printf "ratio: B / A = %.2f runs/s, %.2f CPU per run\n", b/a, bc/ac}'
