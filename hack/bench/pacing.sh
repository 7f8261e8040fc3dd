#!/usr/bin/env bash
# Per-installation pacing against no pacing, end to end (docs/performance.md, issue 21): a burst
# of release runs over as many installations (one run each, so GitHub's pace of one request per
# installation per second and at least a second between its mutations never binds a run by
# more than its own three effects), pacing on and off alternately, each on a fresh durable
# server (hack/bench/e2e.sh), and the medians of each.
#
#   hack/bench/pacing.sh [--runs 5000] [--count 3]
runs=5000 count=3
while (($#)); do
	case "$1" in
	--runs) runs=$2; shift 2 ;;
	--count) count=$2; shift 2 ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d /tmp/boardreadyops-pacing-XXXXXX)
trap 'rm -rf "$out"' EXIT
for i in $(seq 1 "$count"); do
	for pacing in on off; do
		LOADGEN_JSON=1 hack/bench/e2e.sh --runs "$runs" --installations "$runs" --repositories "$runs" --pacing "$pacing" \
			>"$out/$pacing-$i.txt" 2>&1 || { cat "$out/$pacing-$i.txt"; exit 1; }
		head -1 "$out/$pacing-$i.txt"
		line=$(grep -m1 '^{' "$out/$pacing-$i.txt")
		echo "pacing $pacing, run $i: $line" | cut -c1-400
		echo "$line" >>"$out/$pacing.jsonl"
	done
done
median() { jq -s "map(.$1) | sort | .[(length / 2 | floor)]" "$out/$2.jsonl"; }
for pacing in on off; do
	echo "pacing $pacing: median $(median release_runs_per_second "$pacing") runs/s, $(median seconds "$pacing") s," \
		"median pgbench -N $(median pgbench_tps "$pacing") tps; not terminal $(jq -s 'map(.release_runs_not_terminal) | add' "$out/$pacing.jsonl")," \
		"attempts without exactly one dispatch $(jq -s 'map(.attempts_with_other_than_one_dispatch) | add' "$out/$pacing.jsonl")"
done
