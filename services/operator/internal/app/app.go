// Package app is the BoardReadyOps operator, which will watch the dispatcher's outbox metrics for
// broker-transition triggers. This revision serves the operational endpoints; the controller is
// tracked as its own issue.
package app

import (
	"context"
	"io"

	"github.com/boardreadyops/cloud/pkg/config"
	"github.com/boardreadyops/cloud/pkg/daemon"
)

// Run runs the operator until ctx ends.
func Run(ctx context.Context, args []string, getenv config.Getenv, stderr io.Writer) error {
	return daemon.Run(ctx, daemon.Spec{Name: "operator"}, args, getenv, stderr)
}
