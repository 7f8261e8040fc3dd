// Package pgtest gives every test its own real, migrated PostgreSQL database.
//
// With TEST_DATABASE_URL set, databases are created on that server (the user needs CREATEDB and,
// for the role migrations, CREATEROLE). Otherwise one private server is started per test process
// (package pgcluster) on first use and stopped by Main when the tests end; if the process dies
// instead, the server dies with it.
//
// The schema is migrated once per process into a template database; each test then gets a
// CREATE DATABASE … TEMPLATE copy, so tests run in parallel and never see each other's rows.
//
// Use it from a package's TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// and in a test:
//
//	pool := pgtest.NewPool(t)
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/migrate"
	"github.com/boardreadyops/cloud/pkg/testkit/pgcluster"
)

// EnvURL names the variable that points the harness at an existing server.
const EnvURL = "TEST_DATABASE_URL"

// server is the per-process state. A test process needs exactly one shared server and template;
// this is the single piece of package state in the project, confined to test code.
var server struct {
	once     sync.Once
	err      error
	cluster  *pgcluster.Cluster // nil when TEST_DATABASE_URL is used
	adminURL string             // a maintenance database URL on the server
	template string
	prefix   string
	counter  atomic.Int64
	mu       sync.Mutex
	created  []string
}

// Main runs the package's tests and then drops what the harness created and stops the private
// server, also when tests fail. The package's own cleanups run after the tests, before that:
// what a test process builds once for all its tests (TestMain has no t.Cleanup). Neither runs when
// the process dies inside m.Run (a panic, -timeout, a signal).
func Main(m *testing.M, cleanups ...func()) {
	code := m.Run()
	for _, c := range cleanups {
		func() {
			defer func() {
				if p := recover(); p != nil {
					fmt.Fprintln(os.Stderr, "pgtest: a package cleanup panicked:", p)
				}
			}()
			c()
		}()
	}
	if err := shutdown(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest: cleanup:", err)
	}
	os.Exit(code)
}

// NewURL creates a fresh migrated database for this test and returns its URL. The database is
// dropped when the test ends.
func NewURL(tb testing.TB) string {
	tb.Helper()
	if err := setup(); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	name := fmt.Sprintf("%s_%d", server.prefix, server.counter.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := adminExec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s STRATEGY FILE_COPY",
		pgx.Identifier{name}.Sanitize(), pgx.Identifier{server.template}.Sanitize())); err != nil {
		tb.Fatalf("pgtest: create database: %v", err)
	}
	server.mu.Lock()
	server.created = append(server.created, name)
	server.mu.Unlock()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dropDatabase(ctx, name); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return withDatabase(server.adminURL, name)
}

// NewPool creates a fresh migrated database for this test and a pool connected to it as a
// superuser (or the TEST_DATABASE_URL user). Pool and database go away when the test ends.
func NewPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	dbURL := NewURL(tb)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		tb.Fatalf("pgtest: connect: %v", err)
	}
	tb.Cleanup(pool.Close) // runs before the drop registered by NewURL (cleanups are LIFO)
	return pool
}

// NewEmptyURL creates a fresh database without any migration applied, for migration tests.
func NewEmptyURL(tb testing.TB) string {
	tb.Helper()
	if err := setup(); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	name := fmt.Sprintf("%s_%d", server.prefix, server.counter.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := adminExec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: create database: %v", err)
	}
	server.mu.Lock()
	server.created = append(server.created, name)
	server.mu.Unlock()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dropDatabase(ctx, name); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return withDatabase(server.adminURL, name)
}

func setup() error {
	server.once.Do(func() { server.err = start() })
	return server.err
}

func start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return fmt.Errorf("random suffix: %w", err)
	}
	server.prefix = fmt.Sprintf("brtest_%d_%s", os.Getpid(), hex.EncodeToString(suffix[:]))
	server.template = server.prefix + "_template"

	if u := os.Getenv(EnvURL); u != "" {
		server.adminURL = u
	} else {
		c, err := pgcluster.Start(ctx, pgcluster.Options{})
		if err != nil {
			return fmt.Errorf("start private PostgreSQL: %w", err)
		}
		server.cluster = c
		server.adminURL = c.URL("postgres")
	}

	if err := adminExec(ctx, "CREATE DATABASE "+pgx.Identifier{server.template}.Sanitize()); err != nil {
		return fmt.Errorf("create template database: %w", err)
	}
	runner, err := migrate.Open(withDatabase(server.adminURL, server.template), nil)
	if err != nil {
		return err
	}
	_, upErr := runner.Up(ctx)
	// The template must have no open connection when it is copied.
	if err := runner.Close(); err != nil && upErr == nil {
		upErr = err
	}
	if upErr != nil {
		return fmt.Errorf("migrate template: %w", upErr)
	}
	return nil
}

func shutdown() error {
	if server.adminURL == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var firstErr error
	if server.cluster == nil {
		// On a shared server, drop everything this process created; leftovers of tests that
		// already dropped theirs are skipped by IF EXISTS.
		server.mu.Lock()
		names := append([]string{server.template}, server.created...)
		server.mu.Unlock()
		for _, n := range names {
			if err := dropDatabase(ctx, n); err != nil && firstErr == nil {
				firstErr = err
			}
		}
		return firstErr
	}
	return server.cluster.Stop()
}

func adminExec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, server.adminURL)
	if err != nil {
		return fmt.Errorf("connect to server: %w", err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func dropDatabase(ctx context.Context, name string) error {
	return adminExec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

func withDatabase(rawURL, database string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		// A keyword/value connection string: appending a later dbname overrides the first.
		return rawURL + " dbname=" + database
	}
	u.Path = "/" + database
	return u.String()
}
