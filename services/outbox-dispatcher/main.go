// Command outbox-dispatcher is the BoardReadyOps outbox-dispatcher service; see internal/app.
package main

import (
	"os"

	"github.com/boardreadyops/cloud/pkg/daemon"
	"github.com/boardreadyops/cloud/services/outbox-dispatcher/internal/app"
)

func main() { os.Exit(daemon.Main("outbox-dispatcher", app.Run)) }
