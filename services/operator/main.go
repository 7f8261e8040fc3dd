// Command operator is the BoardReadyOps operator service; see internal/app.
package main

import (
	"os"

	"github.com/boardreadyops/cloud/pkg/daemon"
	"github.com/boardreadyops/cloud/services/operator/internal/app"
)

func main() { os.Exit(daemon.Main("operator", app.Run)) }
