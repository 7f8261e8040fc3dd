#!/usr/bin/env bash
# Paced claims of several replicas side by side (docs/performance.md, "Paced claims beside each
# other"): pgbench clients, each a dispatcher replica, claim back to back with
# boardreadyops_outbox_claim_paced at the dispatcher's default pace (one delivery in flight per
# installation, 1 s between mutations) from one backlog: 20,000 check-run creations of 20,000
# installations whose pacing rows exist, as in a deployment in service. Nothing is delivered or
# released, so every installation gives one effect. Each round runs the schema up to --base (the
# claim before 00064 by default) and the current one, each on a fresh copy of its fixture,
# alternately, and prints for each: claims/s, effects/s, effects per claim and how many claims came
# back empty or full; then the medians. The two sides' fixtures are made by the same script (the
# effects in a random order, each side its own), not copied from one database.
#
#   hack/bench/pacedclaims.sh [--clients 4] [--batch 8] [--claims 600] [--count 3] [--base 63]
#
# --claims is per client; clients × claims × batch + 4 × batch (a claim's candidates) must stay
# within 20,000, so that the backlog never runs short and an empty claim means a claim that missed.
clients=4 batch=8 claims=600 count=3 base=63
while (($#)); do
	case "$1" in
	--clients | --batch | --claims | --count | --base)
		(($# >= 2)) || { echo "$1 needs a value" >&2; exit 2; }
		[[ $2 =~ ^[1-9][0-9]*$ ]] || { echo "$1 takes a positive integer" >&2; exit 2; }
		declare "${1#--}=$2"
		shift 2
		;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
n=20000
((batch <= 1000)) || { echo "--batch is at most 1000 (the claim's limit)" >&2; exit 2; }
((clients * claims * batch + 4 * batch <= n)) || { echo "clients × claims × batch + 4 × batch must be at most $n" >&2; exit 2; }
[[ -z "${BENCH_DDL:-}" ]] || { echo "BENCH_DDL would change only the current side; --base sets the other" >&2; exit 2; }
source "$(dirname "$0")/lib.sh"

server=${db%%\?*}
server=${server%/*}
admin="$server/postgres?sslmode=disable"
before="$server/pacedbase?sslmode=disable"
copy="$server/pacedclaims?sslmode=disable"
psql -q "$admin" -c 'CREATE DATABASE pacedbase'
bin/brops migrate up --to "$base" --database-url "$before" >/dev/null

cat >"$work/fixture.sql" <<SQL
INSERT INTO installations (id, account_login, account_type) SELECT g, 'org-' || g, 'Organization' FROM generate_series(1, $n) g;
INSERT INTO repositories (id, installation_id, full_name) SELECT g, g, 'org-' || g || '/repo' FROM generate_series(1, $n) g;
INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status)
SELECT g, g, 'refs/tags/v1.0.0', substr(md5(g::text) || md5(g::text || 'x'), 1, 40), 'boardreadyops-release.yml', 'check_pending'
FROM generate_series(1, $n) g;
SELECT count(boardreadyops_outbox_enqueue('github.check_run.create', r.id, NULL, r.installation_id,
	jsonb_build_object('release_run_id', r.id, 'head_sha', r.head_sha)))
FROM (SELECT id, installation_id, head_sha FROM release_runs ORDER BY random()) r;
INSERT INTO github_installation_limits (installation_id, updated_at) SELECT g, now() FROM generate_series(1, $n) g;
CREATE TABLE pacedclaims_log (client integer, n integer);
VACUUM (ANALYZE);
CHECKPOINT;
SQL
for template in pacedbase "${db##*/}"; do
	template=${template%%\?*}
	psql -q -v ON_ERROR_STOP=1 "$server/$template?sslmode=disable" -f "$work/fixture.sql" >/dev/null
done
printf '%s\n' "INSERT INTO pacedclaims_log SELECT :client_id, count(*) FROM boardreadyops_outbox_claim_paced('w' || :client_id, $batch, '1 minute', 1, '1 second');" >"$work/loop.sql"

echo "$clients clients claiming $batch at a time, $claims claims each, at the default pace"
results=()
for round in $(seq 1 "$count"); do
	order=(base current)
	((round % 2)) || order=(current base)
	for side in "${order[@]}"; do
		template=${db##*/}
		template=${template%%\?*}
		[[ $side == base ]] && template=pacedbase
		PGOPTIONS='-c client_min_messages=warning' psql -q "$admin" -c 'DROP DATABASE IF EXISTS pacedclaims WITH (FORCE)' \
			-c "CREATE DATABASE pacedclaims TEMPLATE $template"
		pgbench -n -f "$work/loop.sql" -c "$clients" -j 2 -t "$claims" "$copy" >"$work/pgbench.log" 2>&1 || { cat "$work/pgbench.log"; exit 1; }
		tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$work/pgbench.log")
		line=$(psql -Atq -F ' ' "$copy" -c "SELECT count(*), sum(n), count(*) FILTER (WHERE n = 0), count(*) FILTER (WHERE n = $batch) FROM pacedclaims_log")
		read -r total effects empty full <<<"$line"
		results+=("$side $tps $effects $total")
		awk -v r="$round" -v s="$side" -v tps="$tps" -v t="$total" -v e="$effects" -v z="$empty" -v f="$full" \
			'BEGIN {printf "round %d, %-7s: %d claims/s, %d effects/s, %.2f effects per claim; %d of %d claims empty, %d full\n", r, s, tps, tps * e / t, e / t, z, t, f}'
	done
done
median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.0f\n", (a[NR/2]+a[NR/2+1])/2}'; }
for side in base current; do
	printf '%s\n' "${results[@]}" | awk -v s="$side" '$1 == s {printf "%d\n", $2}' | median >"$work/$side.tps"
	printf '%s\n' "${results[@]}" | awk -v s="$side" '$1 == s {printf "%d\n", $2 * $3 / $4}' | median >"$work/$side.eps"
	echo "median $side: $(<"$work/$side.tps") claims/s, $(<"$work/$side.eps") effects/s"
done
awk -v b="$(<"$work/base.eps")" -v c="$(<"$work/current.eps")" 'BEGIN {printf "current/base, effects/s: %.2f\n", c / b}'
