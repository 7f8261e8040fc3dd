// Command ingest is the BoardReadyOps ingest service; see internal/app.
package main

import (
	"os"

	"github.com/boardreadyops/cloud/pkg/daemon"
	"github.com/boardreadyops/cloud/services/ingest/internal/app"
)

func main() { os.Exit(daemon.Main("ingest", app.Run)) }
