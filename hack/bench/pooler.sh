#!/usr/bin/env bash
# End to end through PgBouncer against direct connections (docs/performance.md, issue 24): the
# same burst (hack/bench/e2e.sh) with the three services behind Debian's PgBouncer in transaction
# pooling mode (default_query_exec_mode=exec, LISTEN off) and connected directly with LISTEN off
# (polling in both, so the pooler is the only difference), alternately, each on a fresh durable
# server, and the medians of each with the pgbench -N of the same runs.
#
#   hack/bench/pooler.sh [--runs 10000] [--count 3]
runs=10000 count=3
while (($#)); do
	case "$1" in
	--runs) runs=$2; shift 2 ;;
	--count) count=$2; shift 2 ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d /tmp/boardreadyops-pooler-XXXXXX)
trap 'rm -rf "$out"' EXIT
for i in $(seq 1 "$count"); do
	for pooler in pgbouncer none; do
		LOADGEN_JSON=1 hack/bench/e2e.sh --runs "$runs" --pooler "$pooler" --listen off >"$out/$pooler-$i.txt" 2>&1 ||
			{ cat "$out/$pooler-$i.txt"; exit 1; }
		head -1 "$out/$pooler-$i.txt"
		line=$(grep -m1 '^{' "$out/$pooler-$i.txt")
		echo "pooler $pooler, run $i: $line" | cut -c1-400
		echo "$line" >>"$out/$pooler.jsonl"
	done
done
median() { jq -s "map(.$1) | sort | .[(length / 2 | floor)]" "$out/$2.jsonl"; }
for pooler in pgbouncer none; do
	echo "pooler $pooler: median $(median release_runs_per_second "$pooler") runs/s, $(median seconds "$pooler") s," \
		"median pgbench -N $(median pgbench_tps "$pooler") tps; not terminal $(jq -s 'map(.release_runs_not_terminal) | add' "$out/$pooler.jsonl")," \
		"attempts without exactly one dispatch $(jq -s 'map(.attempts_with_other_than_one_dispatch) | add' "$out/$pooler.jsonl")"
done
