// Package migrate applies the schema's embedded migrations with goose, under a PostgreSQL
// advisory lock so that concurrent runners (two Helm hook Jobs, parallel test processes against one
// database) apply each migration exactly once.
package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/boardreadyops/cloud/schema"
)

// Runner applies and inspects migrations on one database.
type Runner struct {
	db       *sql.DB
	provider *goose.Provider
}

// Status is one migration and whether it is applied.
type Status struct {
	Version   int64  `json:"version"`
	Name      string `json:"name"`
	Applied   bool   `json:"applied"`
	AppliedAt string `json:"applied_at,omitempty"`
}

// Result is one migration applied or rolled back by a call.
type Result struct {
	Version    int64  `json:"version"`
	Name       string `json:"name"`
	Direction  string `json:"direction"`
	DurationMS int64  `json:"duration_ms"`
}

// Open connects to databaseURL. logger may be nil (silent).
func Open(databaseURL string, logger *slog.Logger) (*Runner, error) {
	db, err := sql.Open("pgx", databaseURL)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("create migration lock: %w", err)
	}
	opts := []goose.ProviderOption{goose.WithSessionLocker(locker)}
	if logger != nil {
		opts = append(opts, goose.WithSlog(logger), goose.WithVerbose(true))
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, schema.Migrations(), opts...)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return &Runner{db: db, provider: p}, nil
}

// Close releases the connection pool.
func (r *Runner) Close() error { return r.db.Close() }

// Up applies every pending migration. With nothing pending it changes nothing and returns no
// results.
func (r *Runner) Up(ctx context.Context) ([]Result, error) {
	res, err := r.provider.Up(ctx)
	if err != nil {
		return convert(res), fmt.Errorf("migrate up: %w", err)
	}
	return convert(res), nil
}

// UpTo applies the pending migrations up to and including version.
func (r *Runner) UpTo(ctx context.Context, version int64) ([]Result, error) {
	res, err := r.provider.UpTo(ctx, version)
	if err != nil {
		return convert(res), fmt.Errorf("migrate up to %d: %w", version, err)
	}
	return convert(res), nil
}

// Down rolls back the newest applied migration. Meant for development: roles are cluster-wide
// and are never dropped.
func (r *Runner) Down(ctx context.Context) ([]Result, error) {
	res, err := r.provider.Down(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate down: %w", err)
	}
	return convert([]*goose.MigrationResult{res}), nil
}

// Version is the newest applied migration's version (0 for an empty database).
func (r *Runner) Version(ctx context.Context) (int64, error) {
	v, err := r.provider.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// Status lists every embedded migration and whether it is applied.
func (r *Runner) Status(ctx context.Context) ([]Status, error) {
	st, err := r.provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	out := make([]Status, 0, len(st))
	for _, s := range st {
		item := Status{Version: s.Source.Version, Name: baseName(s.Source.Path), Applied: s.State == goose.StateApplied}
		if item.Applied {
			item.AppliedAt = s.AppliedAt.UTC().Format("2006-01-02T15:04:05Z")
		}
		out = append(out, item)
	}
	return out, nil
}

func convert(in []*goose.MigrationResult) []Result {
	out := make([]Result, 0, len(in))
	for _, r := range in {
		if r == nil || r.Source == nil {
			continue
		}
		out = append(out, Result{
			Version: r.Source.Version, Name: baseName(r.Source.Path),
			Direction: r.Direction, DurationMS: r.Duration.Milliseconds(),
		})
	}
	return out
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

// Ensure the pgx database/sql driver is linked in; sql.Open("pgx") needs its registration.
var _ = stdlib.GetDefaultDriver
