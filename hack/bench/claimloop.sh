#!/usr/bin/env bash
# The queue machinery's two statements without the dispatcher (docs/performance.md, "Levers
# measured"): pgbench clients each claim k github.check_run.complete effects with
# boardreadyops_outbox_claim and complete them with
# boardreadyops_outbox_complete_check_run_complete_batch, each in its own transaction, over the
# fixture of BenchmarkQueueMachinery (30,000 effects, one per release run; here the release runs and
# attempts are vacuumed too, so that autovacuum does not meet them during the loop). Prints the
# rate and PostgreSQL's CPU per effect for each batch size, each on a fresh copy of the database.
#
#   hack/bench/claimloop.sh [--batch 64] [--count 1] [--clients 4] [--ddl FILE]
#
# --batch takes a comma-separated list (8,32,64,128). --ddl runs a SQL file on each copy before
# the fixture is loaded: an upper bound of a lever, measured by dropping what it would remove
# (DROP INDEX …, ALTER TABLE … DROP CONSTRAINT …, ALTER FUNCTION … SET …). Scratch only: never
# a product change.
batches=64 count=1 clients=4 ddl=""
while (($#)); do
	case "$1" in
	--batch) batches=$2; shift 2 ;;
	--count) count=$2; shift 2 ;;
	--clients) clients=$2; shift 2 ;;
	--ddl) ddl=$(realpath "$2"); shift 2 ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
source "$(dirname "$0")/lib.sh"

base=${db%%\?*}
admin="${base%/*}/postgres?sslmode=disable"
copy="${base%/*}/claimloop?sslmode=disable"
n=30000
cat >"$work/fixture.sql" <<'SQL'
INSERT INTO installations (id, account_login, account_type) SELECT i, 'org-' || i, 'Organization' FROM generate_series(1, 5) i;
INSERT INTO repositories (id, installation_id, full_name) SELECT r, 1 + r % 5, 'org-' || (1 + r % 5) || '/repo-' || r FROM generate_series(1, 50) r;
SELECT count(boardreadyops_release_run_create(1 + g % 50, 1 + (1 + g % 50) % 5, 'refs/tags/v' || g,
	substr(md5(g::text) || md5(g::text || 'x'), 1, 40), 'boardreadyops-release.yml', 'BoardReadyOps release')) FROM generate_series(1, 30000) g;
TRUNCATE control_plane_outbox;
INSERT INTO control_plane_outbox (effect_type, idempotency_key, payload, release_run_id, execution_attempt_id, installation_id)
SELECT 'github.check_run.complete', 'github.check_run.complete:' || r.id || ':' || a.id,
       jsonb_build_object('repository_full_name', p.full_name, 'check_run_id', 1, 'conclusion', 'success'), r.id, a.id, r.installation_id
FROM release_runs r JOIN execution_attempts a ON a.release_run_id = r.id JOIN repositories p ON p.id = r.repository_id
ORDER BY r.created_at, r.id;
VACUUM (ANALYZE) control_plane_outbox, release_runs, execution_attempts;
CHECKPOINT;
SQL

for round in $(seq 1 "$count"); do
	for k in ${batches//,/ }; do
		PGOPTIONS='-c client_min_messages=warning' psql -q "$admin" -c 'DROP DATABASE IF EXISTS claimloop WITH (FORCE)' \
			-c "CREATE DATABASE claimloop TEMPLATE ${base##*/}"
		if [[ -n "$ddl" ]]; then psql -q -v ON_ERROR_STOP=1 "$copy" -f "$ddl"; fi
		psql -q -v ON_ERROR_STOP=1 "$copy" -f "$work/fixture.sql" >/dev/null
		# The fixture's backend must be gone (and reaped) before the CPU count starts: its seconds
		# of work would otherwise land in the loop's.
		for _ in $(seq 1 100); do
			[[ $(psql -Atq "$admin" -c "SELECT count(*) FROM pg_stat_activity WHERE datname = 'claimloop'") == 0 ]] && break
			sleep 0.1
		done
		sleep 0.5
		# pgbench substitutes variables as text: the claimed ids come back as an ARRAY literal.
		printf '%s\n' \
			"SELECT 'ARRAY[' || string_agg(id::text, ',') || ']::bigint[]' AS ids FROM boardreadyops_outbox_claim('w' || :client_id, $k, '1 minute') \\gset" \
			"SELECT count(*) FROM boardreadyops_outbox_complete_check_run_complete_batch(:ids, 'w' || :client_id);" >"$work/loop.sql"
		tx=$((n / k / clients))
		cpu0=$(pg_cpu_seconds)
		start=$(date +%s.%N)
		pgbench -n -f "$work/loop.sql" -c "$clients" -j 2 -t "$tx" "$copy" >"$work/pgbench.log" 2>&1 || { cat "$work/pgbench.log"; exit 1; }
		end=$(date +%s.%N)
		cpu1=$(pg_cpu_seconds)
		done_n=$(psql -Atq "$copy" -c "SELECT count(*) FROM control_plane_outbox WHERE status = 'completed'")
		awk -v r="$round" -v k="$k" -v n="$done_n" -v s0="$start" -v s1="$end" -v c0="$cpu0" -v c1="$cpu1" -v d="${ddl:+ ($(basename "$ddl"))}" \
			'BEGIN {printf "round %d, batch %d%s: %d effects in %.2f s = %d effects/s; PostgreSQL CPU %.1f µs per effect\n", r, k, d, n, s1 - s0, n / (s1 - s0), 1e6 * (c1 - c0) / n}'
	done
done
