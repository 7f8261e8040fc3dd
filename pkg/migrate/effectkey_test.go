package migrate_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/boardreadyops/cloud/pkg/migrate"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// effectKeyVersion is migration 00035, which moves the effect key's uniqueness to
// control_plane_outbox_effect_key. It runs outside a transaction, so a failure part way leaves
// some of its steps done and goose runs all of them again.
const effectKeyVersion = 35

// TestEffectKeyMigrationRunsAgain: 00035 run again never leaves the outbox without a valid unique
// index on the effect key. Run again after it completed (its version row lost), it keeps the index
// it built and succeeds. After an interrupted build left the index INVALID, it stops before the old
// constraint is dropped, says what to do, and succeeds once that is done.
func TestEffectKeyMigrationRunsAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("after it completed", func(t *testing.T) {
		t.Parallel()
		r, conn := migratedTo(t, effectKeyVersion)
		before := effectKeyIndex(t, conn)
		if _, err := conn.Exec(ctx, `DELETE FROM goose_db_version WHERE version_id = $1`, effectKeyVersion); err != nil {
			t.Fatal(err)
		}
		if _, err := r.UpTo(ctx, effectKeyVersion); err != nil {
			t.Fatalf("00035 again: %v", err)
		}
		after := effectKeyIndex(t, conn)
		if after != before {
			t.Fatalf("index after the second run %+v, want the first run's %+v (kept, not rebuilt)", after, before)
		}
		assertEffectKeyOnly(t, conn)
	})

	t.Run("after an interrupted index build", func(t *testing.T) {
		t.Parallel()
		r, conn := migratedTo(t, effectKeyVersion-1)
		interruptedEffectKeyBuild(t, conn)

		_, err := r.UpTo(ctx, effectKeyVersion)
		if err == nil || !strings.Contains(err.Error(), "INVALID") || !strings.Contains(err.Error(), "DROP INDEX CONCURRENTLY public.control_plane_outbox_effect_key") {
			t.Fatalf("00035 over an INVALID index: %v; want the INVALID error with its fix", err)
		}
		var constraints int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_constraint
			WHERE conname = 'control_plane_outbox_idempotency_key_key' AND conrelid = 'control_plane_outbox'::regclass`).Scan(&constraints); err != nil {
			t.Fatal(err)
		}
		if constraints != 1 {
			t.Fatalf("the idempotency key's constraint was dropped with only an INVALID index left")
		}

		if _, err := conn.Exec(ctx, `DROP INDEX CONCURRENTLY public.control_plane_outbox_effect_key`); err != nil {
			t.Fatal(err)
		}
		if _, err := r.UpTo(ctx, effectKeyVersion); err != nil {
			t.Fatalf("00035 after the fix: %v", err)
		}
		assertEffectKeyOnly(t, conn)
	})
}

// migratedTo is a new database migrated up to version, with its runner and a connection.
func migratedTo(t *testing.T, version int64) (*migrate.Runner, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	dbURL := pgtest.NewEmptyURL(t)
	r, err := migrate.Open(dbURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	if _, err := r.UpTo(ctx, version); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return r, conn
}

// interruptedEffectKeyBuild leaves control_plane_outbox_effect_key INVALID the way an operator's
// cancel or a statement timeout does.
func interruptedEffectKeyBuild(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	interruptedBuild(t, conn, "control_plane_outbox", "control_plane_outbox_effect_key",
		`CREATE UNIQUE INDEX CONCURRENTLY control_plane_outbox_effect_key ON public.control_plane_outbox
		(release_run_id, effect_type, execution_attempt_id, generation) NULLS NOT DISTINCT`)
}

// interruptedBuild leaves the index that build creates on table INVALID the way an operator's
// cancel or a statement timeout does: the build waits for a writer's open transaction and its
// statement timeout cancels it while it waits, after its catalog entry was committed.
func interruptedBuild(t *testing.T, conn *pgx.Conn, table, index, build string) {
	t.Helper()
	ctx := context.Background()
	writer, err := pgx.Connect(ctx, conn.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close(ctx)
	tx, err := writer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE `+table+` IN ROW EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SET statement_timeout = '300ms'`); err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, build)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57014" { // query_canceled
		t.Fatalf("the build while a writer held the table: %v, want a statement timeout", err)
	}
	if _, err := conn.Exec(ctx, `RESET statement_timeout`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := indexOf(t, conn, index); !got.exists || got.valid {
		t.Fatalf("after the cancelled build: %+v, want an INVALID index", got)
	}
}

type indexState struct {
	exists, valid bool
	oid           uint32
}

func effectKeyIndex(t *testing.T, conn *pgx.Conn) indexState {
	t.Helper()
	return indexOf(t, conn, "control_plane_outbox_effect_key")
}

// indexOf is the state of the public schema's index of that name.
func indexOf(t *testing.T, conn *pgx.Conn, name string) indexState {
	t.Helper()
	var s indexState
	err := conn.QueryRow(context.Background(), `SELECT true, i.indisvalid, i.indexrelid::oid FROM pg_index i
		WHERE i.indexrelid = to_regclass('public.' || $1)`, name).Scan(&s.exists, &s.valid, &s.oid)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	return s
}

// assertEffectKeyOnly: the outbox's effect-key uniqueness is the valid effect-key index alone, and
// a second enqueue of an effect writes nothing.
func assertEffectKeyOnly(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	if s := effectKeyIndex(t, conn); !s.exists || !s.valid {
		t.Fatalf("control_plane_outbox_effect_key: %+v, want a valid index", s)
	}
	var old int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_class
		WHERE relname IN ('control_plane_outbox_idempotency_key_key', 'control_plane_outbox_release_run_idx')`).Scan(&old); err != nil {
		t.Fatal(err)
	}
	if old != 0 {
		t.Fatalf("%d of the replaced indexes remain", old)
	}
	const run = `'11111111-1111-1111-1111-111111111111'`
	for _, s := range []string{
		`INSERT INTO installations (id, account_login, account_type) VALUES (1, 'acme', 'Organization')`,
		`INSERT INTO repositories (id, installation_id, full_name) VALUES (1, 1, 'acme/app')`,
		`INSERT INTO release_runs (id, repository_id, installation_id, ref, head_sha, workflow_file) VALUES
			(` + run + `, 1, 1, 'refs/tags/v1', '0123456789abcdef0123456789abcdef01234567', 'release.yml')`,
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	var first, second *int64
	if err := conn.QueryRow(ctx, `SELECT boardreadyops_outbox_enqueue('github.check_run.create', `+run+`, NULL, 1, '{}')`).Scan(&first); err != nil || first == nil {
		t.Fatalf("first enqueue: id %v, %v", first, err)
	}
	if err := conn.QueryRow(ctx, `SELECT boardreadyops_outbox_enqueue('github.check_run.create', `+run+`, NULL, 1, '{}')`).Scan(&second); err != nil || second != nil {
		t.Fatalf("second enqueue: id %v, %v; want no id", second, err)
	}
}
