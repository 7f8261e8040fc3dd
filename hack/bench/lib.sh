# Shared by the benchmark scripts: a fresh durable PostgreSQL (fsync on) in a temporary
# directory, migrated, with cleanup of every process on exit. Source it; it sets $work, $db
# (the product database URL) and $pgbench_db (a separate database on the same server).
set -euo pipefail
# BENCH_DDL (below) is a path from where the script was started.
if [[ -n "${BENCH_DDL:-}" ]]; then BENCH_DDL=$(realpath "$BENCH_DDL"); fi
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# The toolchain go.work requires (Makefile, GO_TOOLCHAIN), for the go commands below.
export GOTOOLCHAIN=${GOTOOLCHAIN:-go$(sed -n 's/^go //p' go.work)}

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
#
# wal_init_zero=off: a fresh server has no WAL segments to recycle, so every 16 MB of WAL made it
# create and zero-fill a new segment inside some commit: 10-20 ms, the slowest claims of the
# machinery benchmark, every 80 claims of 128. A server in service recycles its segments at
# checkpoints and zero-fills a new one only when its WAL outgrows those (docs/performance.md, "In
# flight and claim size against River").
# The setting only skips the zero fill of a new segment (its size is still written): WAL is
# flushed and fsynced as before.
pg_settings=(--set wal_init_zero=off)
if [[ -n "${PG_STATEMENTS:-}" ]]; then
	pg_settings+=(--set shared_preload_libraries=pg_stat_statements --set pg_stat_statements.track=all)
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
# BENCH_DDL=FILE runs a SQL file on the migrated database, before anything starts: an earlier
# function definition (a migration's Down section), to measure a change that is only a migration
# with the same binaries. Scratch only, like claimloop.sh --ddl: never a product change.
if [[ -n "${BENCH_DDL:-}" ]]; then psql -q -v ON_ERROR_STOP=1 "$db" -f "$BENCH_DDL" >/dev/null; fi
if [[ -n "${PG_STATEMENTS:-}" ]]; then psql -q "$db" -c 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements' >/dev/null; fi

# pg_top_statements: the statements that used the most time (PG_STATEMENTS=1 runs), then those
# that touched the most buffers. Under a saturated load the times are wall time (a statement
# waiting for a core counts), the buffers are not: judge the cost of a statement by its buffers
# per call and the count of calls. PG_TOP=n lists n statements in each (default 25 and 15).
pg_top_statements() {
	if [[ "${1:-false}" == false ]]; then pg_table_stats; fi
	[[ -n "${PG_STATEMENTS:-}" ]] || return 0
	psql "$db" -Atc "SELECT format('%s statements: %s calls, %s buffers', CASE WHEN ${1:-false} THEN 'top-level' ELSE 'nested' END,
		sum(calls), sum(shared_blks_hit + shared_blks_read)) FROM pg_stat_statements
		WHERE toplevel = ${1:-false} AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
	psql "$db" -P pager=off -c "SELECT calls, round(total_exec_time) AS total_ms, round(mean_exec_time::numeric, 3) AS mean_ms,
		round((shared_blks_hit + shared_blks_read)::numeric / nullif(calls, 0), 1) AS bufs_per_call,
		left(regexp_replace(query, '\s+', ' ', 'g'), 110) AS query
		FROM pg_stat_statements WHERE toplevel = ${1:-false} ORDER BY total_exec_time DESC LIMIT ${PG_TOP:-25}"
	psql "$db" -P pager=off -c "SELECT calls, shared_blks_hit + shared_blks_read AS buffers,
		round((shared_blks_hit + shared_blks_read)::numeric / nullif(calls, 0), 1) AS bufs_per_call, rows,
		left(regexp_replace(query, '\s+', ' ', 'g'), 110) AS query
		FROM pg_stat_statements WHERE toplevel = ${1:-false} ORDER BY shared_blks_hit + shared_blks_read DESC LIMIT ${PG_TOP:-15}"
}

# pg_table_stats: rows written, HOT share, sequential scans, dead rows and autovacuum runs per
# table. Rows read by sequential scans of a growing table are the mark of a plan cached while it
# was small; dead rows a queue's claim index still points at slow its claims until a vacuum.
pg_table_stats() {
	psql "$db" -P pager=off -c "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd,
		round(100.0 * n_tup_hot_upd / nullif(n_tup_upd, 0)) AS hot_pct, seq_scan, seq_tup_read,
		n_dead_tup, autovacuum_count AS autovacuums, autoanalyze_count AS autoanalyzes
		FROM pg_stat_user_tables ORDER BY n_tup_upd + seq_tup_read DESC LIMIT 10"
}

# pg_wal_stats: WAL written and checkpoints since the server started (full-page images show
# whether checkpoints during the run inflated the WAL).
pg_wal_stats() {
	psql "$db" -Atc "SELECT format('WAL: %s records, %s full-page images, %s; checkpoints: %s timed, %s requested; %s commits, %s rollbacks',
		wal_records, wal_fpi, pg_size_pretty(wal_bytes), checkpoints_timed, checkpoints_req, d.xact_commit, d.xact_rollback)
		FROM pg_stat_wal, pg_stat_bgwriter, pg_stat_database d WHERE d.datname = current_database()"
}

# pg_wal_mark, then pg_wal_records START PER: the WAL written from LSN START (pg_wal_mark's output,
# taken before the load) to the last flushed record, by record type, then by record type and
# relation, with counts per PER units of work (release runs): how many index insertions, row
# locks, inserts and non-HOT updates a unit of work costs. pg_walinspect (contrib, PostgreSQL 15)
# reads the WAL back from pg_wal; pg_wal_mark's replication slot keeps it there through
# checkpoints until pg_wal_records drops it (about 26 kB of WAL per release run). Everything the
# server writes in between is counted, autovacuum included: only the product's load may run
# (e2e.sh skips pgbench when PG_WAL_RECORDS is set).
pg_wal_mark() {
	psql -q "$db" -c 'CREATE EXTENSION IF NOT EXISTS pg_walinspect' >/dev/null
	psql -Atq "$db" -c "SELECT lsn FROM pg_create_physical_replication_slot('bench_wal_records', true)"
}
pg_wal_records() {
	local end
	end=$(psql -Atq "$db" -c 'SELECT pg_current_wal_flush_lsn()')
	psql "$db" -P pager=off -c "SELECT \"resource_manager/record_type\" AS record, count,
		round(count::numeric / $2, 2) AS per_unit, round(count_percentage::numeric, 1) AS pct,
		pg_size_pretty(combined_size) AS size, round(combined_size_percentage::numeric, 1) AS size_pct
		FROM pg_get_wal_stats('$1', '$end', true) WHERE count > 0 ORDER BY count DESC LIMIT ${PG_TOP:-15}"
	psql "$db" -P pager=off -c "WITH r AS (
			SELECT resource_manager || '/' || record_type AS record,
			       (regexp_match(block_ref, 'rel \\d+/\\d+/(\\d+)'))[1]::oid AS relfilenode
			FROM pg_get_wal_records_info('$1', '$end'))
		SELECT record, coalesce(c.relname, r.relfilenode::text, '') AS relation, count(*),
		       round(count(*)::numeric / $2, 2) AS per_unit
		FROM r LEFT JOIN pg_class c ON c.relfilenode = r.relfilenode
		GROUP BY 1, 2 ORDER BY 3 DESC LIMIT ${PG_TOP:-40}"
	psql -q "$db" -c "SELECT pg_drop_replication_slot('bench_wal_records')" >/dev/null
}

# wait_ready URL: until the service's /readyz answers 200.
wait_ready() {
	for _ in $(seq 1 100); do curl -fsS "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done
	echo "not ready: $1" >&2
	return 1
}

echo "machine: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), $(free -g | awk '/Mem:/{print $2}') GiB; PostgreSQL $(psql "$db" -Atc 'SHOW server_version' | cut -d' ' -f1), fsync on"

# pg_cpu_seconds: CPU seconds the benchmark server has used so far (postmaster, live children,
# exited backends it waited for), from /proc — as pkg/testkit/proccpu counts it.
pg_cpu_seconds() {
	local pm ticks=0 pid f
	pm=$(head -1 "$work/pg/data/postmaster.pid")
	read -ra f <<<"$(sed 's/.*) //' "/proc/$pm/stat")"
	ticks=$((f[11] + f[12] + f[13] + f[14]))
	for pid in $(pgrep -P "$pm"); do
		[[ -r /proc/$pid/stat ]] || continue
		read -ra f <<<"$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null)" || continue
		((${#f[@]} > 12)) && ticks=$((ticks + f[11] + f[12]))
	done
	awk -v t="$ticks" 'BEGIN {printf "%.2f\n", t / 100}'
}

# pg_update_floor: PostgreSQL's CPU per row of the least a queue transition can be, a minimal
# `UPDATE … WHERE id = ANY($1)` of 64 rows per transaction (4 clients, 10 s, pgbench), on a table
# of a primary key and one integer: the floor against which CPU per effect is compared.
pg_update_floor() {
	PGOPTIONS='-c client_min_messages=warning' psql -q "$pgbench_db" -c 'DROP TABLE IF EXISTS update_floor' \
		-c 'CREATE TABLE update_floor (id bigint PRIMARY KEY, n integer NOT NULL)' \
		-c 'INSERT INTO update_floor SELECT g, 0 FROM generate_series(1, 30000) g' -c 'VACUUM ANALYZE update_floor'
	printf '%s\n' '\set s random(1, 30000 - 64)' \
		'UPDATE update_floor SET n = n + 1 WHERE id = ANY (ARRAY(SELECT generate_series(:s::bigint, :s + 63)));' >"$work/floor.sql"
	local cpu0 cpu1 tx
	cpu0=$(pg_cpu_seconds)
	tx=$(pgbench -n -f "$work/floor.sql" -c 4 -j 2 -T 10 "$pgbench_db" 2>&1 | sed -nE 's/^number of transactions actually processed: ([0-9]+).*/\1/p')
	cpu1=$(pg_cpu_seconds)
	awk -v c0="$cpu0" -v c1="$cpu1" -v tx="$tx" 'BEGIN {printf "update floor: %d rows in 10 s (%d rows/s); PostgreSQL CPU %.1f µs per row\n", 64 * tx, 6.4 * tx, 1e6 * (c1 - c0) / (64 * tx)}'
}

# start_pgbouncer: Debian's PgBouncer in transaction pooling mode in front of the benchmark server
# (20 server connections per database and user, as docs/operations.md suggests); sets
# $pooled_db, the URL the services use through it.
start_pgbouncer() {
	local bport=$((port + 1)) dir=$work/pgbouncer bin
	bin=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
	mkdir -p "$dir"
	printf '"postgres" ""\n' >"$dir/userlist.txt"
	cat >"$dir/pgbouncer.ini" <<-EOF
		[databases]
		* = host=127.0.0.1 port=$port
		[pgbouncer]
		listen_addr = 127.0.0.1
		listen_port = $bport
		unix_socket_dir =
		auth_type = trust
		auth_file = $dir/userlist.txt
		logfile = $dir/pgbouncer.log
		pool_mode = transaction
		default_pool_size = 20
		max_client_conn = 1000
		ignore_startup_parameters = extra_float_digits
	EOF
	local user=()
	if ((EUID == 0)); then chown -R nobody "$dir"; user=(-u nobody); fi # it refuses to run as root
	"$bin" "${user[@]}" "$dir/pgbouncer.ini" >"$dir/stdout.log" 2>&1 &
	pids+=($!)
	local url=${db/:$port\//:$bport/}
	url+=$([[ $url == *\?* ]] && echo '&' || echo '?')default_query_exec_mode=exec
	for _ in $(seq 1 100); do psql -Atq "${url%%\?*}" -c 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.1; done
	pooled_db=$url
}
