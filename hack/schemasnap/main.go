// Command schemasnap writes the schema snapshot, schema/current: the live schema after every
// migration, one file per table (tables/), per function entity (functions/, after the naming
// pattern boardreadyops_<entity>_<verb>), the old names kept as wrappers (functions/aliases.sql)
// and the roles with the schema-wide privileges (roles.sql).
//
// It applies the embedded migrations to a scratch PostgreSQL cluster (pkg/testkit/pgcluster) and
// dumps it with pg_dump --schema-only; roles, which pg_dump of one database leaves out, come from
// the catalog. The output is the same on every run and machine: no versions, dates or random
// keys, objects sorted by name. It needs PostgreSQL 15's binaries, the version whose pg_dump
// formatting the committed snapshot has (Debian 12's postgresql package).
//
// The snapshot is for reading and review: `make generate` writes it, `make verify-generate`
// fails when it is stale, and the migrations stay the only thing ever applied.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	out := flag.String("out", "schema/current", "directory to write the snapshot into (every file in it is replaced)")
	flag.Parse()
	err := func() error {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		files, err := snapshot(ctx)
		if err != nil {
			return err
		}
		return write(*out, files)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "schemasnap:", err)
		os.Exit(1)
	}
}
