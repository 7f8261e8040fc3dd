// Package migrate applies the schema's embedded migrations with goose, under a PostgreSQL
// advisory lock so that concurrent runners (two Helm hook Jobs, parallel test processes against one
// database) apply each migration exactly once.
package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"

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

// ErrForeignObjects means schema public holds objects that neither the migration user nor the
// schema owner created: migrations refuse to run next to them.
var ErrForeignObjects = errors.New("schema public holds objects the migrations did not create")

// foreignObjects lists the functions, operators, relations and types in schema public that are
// owned by neither the migration user (current_user) nor boardreadyops_schema_owner and belong to
// no extension. Such an object could only have been planted by another role while PUBLIC could
// create there (PostgreSQL 14 and older): a function that matches a call more closely than
// pg_catalog's (e.g. format(text, text, text) against format(text, VARIADIC "any")) is chosen
// whatever the search path, so it would run inside the migrations, as the migration user.
const foreignObjects = `
	WITH ours AS (
		SELECT r.oid FROM pg_catalog.pg_roles r
		WHERE r.rolname = current_user OR r.rolname = 'boardreadyops_schema_owner'
	), objects AS (
		SELECT 'function ' || p.oid::pg_catalog.regprocedure::text AS what, p.proowner AS owner, 'pg_proc'::pg_catalog.regclass AS cls, p.oid
		FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'public'::pg_catalog.regnamespace
		UNION ALL
		SELECT 'operator ' || o.oid::pg_catalog.regoperator::text, o.oprowner, 'pg_operator'::pg_catalog.regclass, o.oid
		FROM pg_catalog.pg_operator o WHERE o.oprnamespace = 'public'::pg_catalog.regnamespace
		UNION ALL
		SELECT 'relation ' || c.relname, c.relowner, 'pg_class'::pg_catalog.regclass, c.oid
		FROM pg_catalog.pg_class c WHERE c.relnamespace = 'public'::pg_catalog.regnamespace
		UNION ALL
		SELECT 'type ' || t.typname, t.typowner, 'pg_type'::pg_catalog.regclass, t.oid
		FROM pg_catalog.pg_type t WHERE t.typnamespace = 'public'::pg_catalog.regnamespace
		  AND t.typrelid = 0 AND t.typelem = 0
	)
	SELECT o.what || ' (owner ' || pg_catalog.pg_get_userbyid(o.owner) || ')' FROM objects o
	WHERE o.owner NOT IN (SELECT oid FROM ours)
	  AND o.what NOT IN ('relation goose_db_version', 'relation goose_db_version_id_seq')
	  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = o.cls AND d.objid = o.oid AND d.deptype = 'e')
	ORDER BY 1`

// checkPublicSchema refuses to migrate next to foreign objects (foreignObjects).
func (r *Runner) checkPublicSchema(ctx context.Context) error {
	rows, err := r.db.QueryContext(ctx, foreignObjects)
	if err != nil {
		return fmt.Errorf("inspect schema public: %w", err)
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return fmt.Errorf("inspect schema public: %w", err)
		}
		found = append(found, s)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("inspect schema public: %w", err)
	}
	if len(found) > 0 {
		return fmt.Errorf("%w: %s; drop them, or move them to another schema, before migrating (docs/operations.md, \"Bootstrap\")",
			ErrForeignObjects, strings.Join(found, ", "))
	}
	return nil
}

// Up applies every pending migration. With nothing pending it changes nothing and returns no
// results. It refuses to run while schema public holds foreign objects (ErrForeignObjects).
func (r *Runner) Up(ctx context.Context) ([]Result, error) {
	if err := r.checkPublicSchema(ctx); err != nil {
		return nil, err
	}
	res, err := r.provider.Up(ctx)
	if err != nil {
		return convert(res), fmt.Errorf("migrate up: %w", err)
	}
	return convert(res), nil
}

// UpTo applies the pending migrations up to and including version (tests of upgrades from an
// older schema).
func (r *Runner) UpTo(ctx context.Context, version int64) ([]Result, error) {
	if err := r.checkPublicSchema(ctx); err != nil {
		return nil, err
	}
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
