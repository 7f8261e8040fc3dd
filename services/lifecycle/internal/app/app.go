// Package app is the lifecycle service: it claims control-plane jobs and applies installation,
// repository and release-run state changes with their outbox effects. This revision serves the
// operational endpoints; the job worker is tracked as its own issue.
package app

import (
	"context"
	"io"

	"github.com/boardreadyops/cloud/pkg/config"
	"github.com/boardreadyops/cloud/pkg/daemon"
)

// Run runs the lifecycle service until ctx ends.
func Run(ctx context.Context, args []string, getenv config.Getenv, stderr io.Writer) error {
	return daemon.Run(ctx, daemon.Spec{Name: "lifecycle"}, args, getenv, stderr)
}
