// Package app is the ingest service: the GitHub webhook endpoint that verifies deliveries and
// writes inbox and job rows in one transaction. This revision serves the operational endpoints;
// the webhook endpoint is tracked as its own issue.
package app

import (
	"context"
	"io"

	"github.com/boardreadyops/cloud/pkg/config"
	"github.com/boardreadyops/cloud/pkg/daemon"
)

// Run runs the ingest service until ctx ends.
func Run(ctx context.Context, args []string, getenv config.Getenv, stderr io.Writer) error {
	return daemon.Run(ctx, daemon.Spec{Name: "ingest"}, args, getenv, stderr)
}
