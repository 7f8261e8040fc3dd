// Command ingest is the BoardReadyOps ingest service; see internal/app.
package main

import (
	"os"

	"github.com/boardreadyops/cloud/pkg/daemon"
	"github.com/boardreadyops/cloud/services/ingest/internal/app"
)

// Ingest holds up to its body budget (256 MiB by default) in request bodies: its soft memory
// limit leaves room for that budget, where the other services' 96 MiB would make the collector
// run continuously under a burst of large deliveries.
func main() {
	os.Exit(daemon.MainGC("ingest", daemon.GC{Percent: daemon.DefaultGC().Percent, MemoryLimit: 384 << 20}, app.Run))
}
