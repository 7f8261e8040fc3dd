// Command lifecycle is the BoardReadyOps lifecycle service; see internal/app.
package main

import (
	"os"

	"github.com/boardreadyops/cloud/pkg/daemon"
	"github.com/boardreadyops/cloud/services/lifecycle/internal/app"
)

func main() { os.Exit(daemon.Main("lifecycle", app.Run)) }
