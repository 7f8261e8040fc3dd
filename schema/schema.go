// Package schema holds the PostgreSQL migrations of BoardReadyOps Cloud and embeds them, so
// that every binary (the brops migration runner, the services' readiness checks and the test
// harness) agrees on one schema and one expected version.
//
// The migrations are goose v3 SQL files named NNNNN_description.sql. Each file is applied in its
// own transaction; the highest NNNNN is the version a binary built from this tree expects.
package schema

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the migration files, rooted so that the .sql files are at the top level,
// which is the layout goose's provider expects.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		// fs.Sub fails only for an invalid path literal, which the embed directive above rules out.
		panic(fmt.Sprintf("schema: embedded migrations: %v", err))
	}
	return sub
}

// ExpectedVersion is the version of the newest embedded migration: the schema version a binary
// built from this tree needs before it reports ready.
func ExpectedVersion() int64 {
	versions, err := Versions()
	if err != nil || len(versions) == 0 {
		panic(fmt.Sprintf("schema: embedded migrations have no valid versions: %v", err))
	}
	return versions[len(versions)-1]
}

// Versions lists the versions of the embedded migrations in ascending order. It fails when a
// file name does not start with a positive number or when two files share a version.
func Versions() ([]int64, error) {
	entries, err := fs.ReadDir(migrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	seen := make(map[int64]string, len(entries))
	versions := make([]int64, 0, len(entries))
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || path.Ext(name) != ".sql" {
			continue
		}
		prefix, _, ok := strings.Cut(name, "_")
		if !ok {
			return nil, fmt.Errorf("migration %q: name must be NNNNN_description.sql", name)
		}
		v, err := strconv.ParseInt(prefix, 10, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: version %q is not a positive number", name, prefix)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %q and %q share version %d", other, name, v)
		}
		seen[v] = name
		versions = append(versions, v)
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i] < versions[j] })
	return versions, nil
}
