#!/usr/bin/env bash
# End to end against a base revision, in the same hour (docs/performance.md): hack/bench/e2e.sh
# of a base revision (A: its own scripts, binaries, migrations and load tool, from a temporary
# worktree) and of the working tree (B), alternately, one burst each per round; prints every
# burst, the medians of runs/s, CPU per run and `pgbench -N`, and B/A.
#
#   hack/bench/e2e-compare.sh [--base e86371c] [--count 3] [--runs 50000] [--keep DIR]
#
# The default base is the code whose three 50,000-run bursts gave the 372 runs/s that issue 25
# starts from (2026-12-03, `pgbench -N` 6,683–6,956 tps then). This machine's pace changes by a
# third between hours, so a runs/s figure alone says little; B/A measured in one sitting moves far
# less with it. B/A compares everything each side's e2e.sh brings, its harness too (the
# simulator's senders, the server's settings). Both sides build with the Go toolchain go.work
# names (GOTOOLCHAIN, when not set), whatever the base's own scripts did. Each burst starts its own
# server (BENCH_PG_PORT, as e2e.sh), so the two never share one; bursts run one at a time. Run
# nothing else meanwhile. Every burst's whole output stays in --keep DIR (a new directory in /tmp
# when not given), named a-N.txt and b-N.txt.
set -euo pipefail
count=3 base=e86371c runs=50000 keep=""
while (($#)); do
	case "$1" in
	--count | --base | --runs | --keep)
		(($# >= 2)) || { echo "$1 needs a value" >&2; exit 2; }
		declare "${1#--}=$2"
		shift 2
		;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
[[ $count =~ ^[1-9][0-9]*$ && $runs =~ ^[1-9][0-9]*$ ]] || { echo "--count and --runs take positive integers" >&2; exit 2; }
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export GOTOOLCHAIN=${GOTOOLCHAIN:-go$(sed -n 's/^go //p' go.work)}
out=${keep:-$(mktemp -d /tmp/boardreadyops-e2e-compare-XXXXXX)}
mkdir -p "$out"
tree=$(mktemp -d /tmp/boardreadyops-e2e-compare-base-XXXXXX)
cleanup() {
	git worktree remove --force "$tree/base" >/dev/null 2>&1 || true
	rm -rf "$tree"
}
trap cleanup EXIT
git worktree add --quiet --detach "$tree/base" "$base" >/dev/null || { echo "cannot check out $base" >&2; exit 2; }

median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.2f\n", (a[NR/2]+a[NR/2+1])/2}'; }
# burst DIR FILE: one e2e.sh burst of DIR's code, its whole output in FILE.
burst() {
	if ! (cd "$1" && hack/bench/e2e.sh --runs "$runs") >"$2" 2>&1; then
		tail -20 "$2" >&2
		echo "burst of $1 failed; its output: $2" >&2
		exit 1
	fi
}
# figures FILE: runs/s, CPU ms per run and pgbench -N tps of one burst's output. CPU per run is the
# load tool's own "total X ms per run" where it prints one, else the sum of the processes'
# "NAME S s (" seconds over the runs (older load tools).
figures() {
	local rate cpu tps
	rate=$(grep -oE '[0-9]+ runs/s' "$1" | head -1 | cut -d' ' -f1 || true)
	cpu=$(grep -m1 '^CPU seconds used' "$1" | grep -oE 'total [0-9.]+ ms per run' | cut -d' ' -f2 || true)
	if [[ -z $cpu ]]; then
		cpu=$(grep -m1 '^CPU seconds used' "$1" | grep -oE '[0-9.]+ s \(' | awk -v n="$runs" 'NR {s += $1} END {if (NR) printf "%.2f", 1000 * s / n}' || true)
	fi
	tps=$(grep -oE 'pgbench -N[^;]* [0-9]+ tps' "$1" | grep -oE '[0-9]+ tps' | cut -d' ' -f1 || true)
	if [[ -z $rate || -z $cpu || -z $tps ]]; then
		echo "cannot read runs/s, CPU per run and pgbench -N from $1 (PG_WAL_RECORDS skips pgbench)" >&2
		exit 1
	fi
	echo "$rate $cpu $tps"
}
a_rate=() a_cpu=() a_tps=() b_rate=() b_cpu=() b_tps=()
for round in $(seq 1 "$count"); do
	# Alternate which side goes first, so that neither always meets the same moment of the hour.
	for side in $( ((round % 2)) && echo "b a" || echo "a b"); do
		file=$out/$side-$round.txt
		if [[ $side == a ]]; then
			burst "$tree/base" "$file"
			vals=$(figures "$file")
			read -r r c t <<<"$vals"
			a_rate+=("$r") a_cpu+=("$c") a_tps+=("$t")
			echo "round $round A ($base): $r runs/s, $c ms of CPU per run, pgbench -N $t tps"
		else
			burst . "$file"
			vals=$(figures "$file")
			read -r r c t <<<"$vals"
			b_rate+=("$r") b_cpu+=("$c") b_tps+=("$t")
			echo "round $round B: $r runs/s, $c ms of CPU per run, pgbench -N $t tps"
		fi
	done
done
a=$(printf '%s\n' "${a_rate[@]}" | median) b=$(printf '%s\n' "${b_rate[@]}" | median)
ac=$(printf '%s\n' "${a_cpu[@]}" | median) bc=$(printf '%s\n' "${b_cpu[@]}" | median)
echo "median of $count: A $a runs/s at $ac ms of CPU per run (pgbench -N $(printf '%s\n' "${a_tps[@]}" | median) tps);" \
	"B $b runs/s at $bc ms (pgbench -N $(printf '%s\n' "${b_tps[@]}" | median) tps)"
awk -v a="$a" -v b="$b" -v ac="$ac" -v bc="$bc" 'BEGIN {printf "ratio of the medians: B / A = %.2f runs/s, %.2f CPU per run\n", b/a, bc/ac}'
ratios=$(paste -d' ' <(printf '%s\n' "${a_rate[@]}") <(printf '%s\n' "${b_rate[@]}") | awk '{printf "%.2f\n", $2/$1}')
echo "B / A round by round: $(tr '\n' ' ' <<<"$ratios")(median $(median <<<"$ratios"))"
echo "outputs: $out"
