// Package app is the outbox dispatcher: it claims outbox effects, performs the GitHub requests and
// commits the matching transitions. This revision serves the operational endpoints; delivery is
// tracked as its own issue.
package app

import (
	"context"
	"io"

	"github.com/boardreadyops/cloud/pkg/config"
	"github.com/boardreadyops/cloud/pkg/daemon"
)

// Run runs the dispatcher until ctx ends.
func Run(ctx context.Context, args []string, getenv config.Getenv, stderr io.Writer) error {
	return daemon.Run(ctx, daemon.Spec{Name: "outbox-dispatcher"}, args, getenv, stderr)
}
