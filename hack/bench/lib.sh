# Shared by the benchmark scripts: a fresh durable PostgreSQL (fsync on) in a temporary
# directory, migrated, with cleanup of every process on exit. Source it; it sets $work, $db
# (the product database URL) and $pgbench_db (a separate database on the same server).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

make -s build >/dev/null
go build -o bin/loadgen ./hack/loadgen
work=$(mktemp -d /tmp/boardreadyops-bench-XXXXXX)
chmod 755 "$work"
pids=()
bench_cleanup() {
	if ((${#pids[@]})); then
		kill -TERM "${pids[@]}" 2>/dev/null || true
		wait "${pids[@]}" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap bench_cleanup EXIT

port=${BENCH_PG_PORT:-55440}
# PG_STATEMENTS=1 loads pg_stat_statements (statements inside functions too) for profiling runs;
# its overhead makes those runs unfit for the recorded figures.
pg_settings=()
if [[ -n "${PG_STATEMENTS:-}" ]]; then
	pg_settings=(--set shared_preload_libraries=pg_stat_statements --set pg_stat_statements.track=all)
fi
# PG_SET="name=value …" sets server parameters for the run (e.g. autovacuum_naptime=10s).
for setting in ${PG_SET:-}; do pg_settings+=(--set "$setting"); done
bin/pgdev --dir "$work/pg" --port "$port" --url-file "$work/url" "${pg_settings[@]}" >"$work/pg.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do [[ -s "$work/url" ]] && break; sleep 0.1; done
[[ -s "$work/url" ]] || { cat "$work/pg.log"; exit 1; }
db=$(<"$work/url")
pgbench_db="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
bin/brops migrate up --database-url "$db" >/dev/null
if [[ -n "${PG_STATEMENTS:-}" ]]; then psql -q "$db" -c 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements' >/dev/null; fi

# pg_top_statements: the statements that used the most time (PG_STATEMENTS=1 runs).
pg_top_statements() {
	[[ -n "${PG_STATEMENTS:-}" ]] || return 0
	psql "$db" -P pager=off -c "SELECT calls, round(total_exec_time) AS total_ms, round(mean_exec_time::numeric, 3) AS mean_ms,
		left(regexp_replace(query, '\s+', ' ', 'g'), 110) AS query
		FROM pg_stat_statements WHERE toplevel = ${1:-false} ORDER BY total_exec_time DESC LIMIT 25"
	if [[ "${1:-false}" == false ]]; then
		psql "$db" -P pager=off -c "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd,
			round(100.0 * n_tup_hot_upd / nullif(n_tup_upd, 0)) AS hot_pct FROM pg_stat_user_tables ORDER BY n_tup_upd DESC LIMIT 8"
	fi
}

# pg_wal_stats: WAL written and checkpoints since the server started (full-page images show
# whether checkpoints during the run inflated the WAL).
pg_wal_stats() {
	psql "$db" -Atc "SELECT format('WAL: %s records, %s full-page images, %s; checkpoints: %s timed, %s requested; %s commits, %s rollbacks',
		wal_records, wal_fpi, pg_size_pretty(wal_bytes), checkpoints_timed, checkpoints_req, d.xact_commit, d.xact_rollback)
		FROM pg_stat_wal, pg_stat_bgwriter, pg_stat_database d WHERE d.datname = current_database()"
}

# wait_ready URL: until the service's /readyz answers 200.
wait_ready() {
	for _ in $(seq 1 100); do curl -fsS "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done
	echo "not ready: $1" >&2
	return 1
}

echo "machine: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), $(free -g | awk '/Mem:/{print $2}') GiB; PostgreSQL $(psql "$db" -Atc 'SHOW server_version' | cut -d' ' -f1), fsync on"
