// Package database opens the services' PostgreSQL connection pools and answers the readiness
// question every service asks: is the database reachable and is its schema new enough?
package database

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/boardreadyops/cloud/schema"
)

// DBTX is what query code takes: a pool, a connection or a transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PoolOptions bound a pool. Zero values take pgxpool's defaults.
type PoolOptions struct {
	// MaxConns caps the pool's connections; size PostgreSQL's max_connections for the sum over
	// all replicas (docs/operations.md).
	MaxConns int32
	// MinConns kept open.
	MinConns int32
	// ApplicationName shows in pg_stat_activity.
	ApplicationName string
	// Tracer, when set, spans every query.
	Tracer trace.Tracer
}

// Open creates a pool for databaseURL. It does not wait for the database: a service starts, reports
// not-ready, and becomes ready when the database is reachable.
func Open(ctx context.Context, databaseURL string, opts PoolOptions) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		// pgx's message may quote the URL; name the variable instead of echoing a password.
		return nil, errors.New("parse database URL: invalid connection string (check DATABASE_URL)")
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.MinConns > 0 {
		cfg.MinConns = opts.MinConns
	}
	if opts.ApplicationName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = opts.ApplicationName
	}
	if opts.Tracer != nil {
		cfg.ConnConfig.Tracer = queryTracer{tracer: opts.Tracer}
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create connection pool: %w", err)
	}
	return pool, nil
}

// ErrSchemaBehind means the database's schema is older than this binary needs: migrations have
// not run yet.
var ErrSchemaBehind = errors.New("database schema is older than this binary expects")

// SchemaVersion reads the applied schema version through boardreadyops_schema_version(), which
// every service role may execute.
func SchemaVersion(ctx context.Context, db DBTX) (int64, error) {
	var v int64
	if err := db.QueryRow(ctx, "SELECT boardreadyops_schema_version()").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// ErrReadOnly means the session cannot write: the server is a standby, or the primary is being
// switched over with default_transaction_read_only. Every service writes, so it is not ready.
var ErrReadOnly = errors.New("database is read-only (a standby, or a primary in switchover with default_transaction_read_only)")

// CheckReady reports whether the database is reachable, accepts writes, and is migrated to at
// least the version this binary was built with. A newer schema is ready: migrations are additive,
// and during a rolling upgrade the old pods must keep serving after the pre-upgrade hook migrated.
func CheckReady(ctx context.Context, db DBTX) error {
	var v int64
	var readOnly string
	if err := db.QueryRow(ctx, "SELECT boardreadyops_schema_version(), current_setting('transaction_read_only')").Scan(&v, &readOnly); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if readOnly == "on" {
		return ErrReadOnly
	}
	if want := schema.ExpectedVersion(); v < want {
		return fmt.Errorf("%w: at version %d, need %d (run brops migrate up)", ErrSchemaBehind, v, want)
	}
	return nil
}
