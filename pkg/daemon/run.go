package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"golang.org/x/sync/errgroup"

	"github.com/boardreadyops/cloud/pkg/config"
	"github.com/boardreadyops/cloud/pkg/opsserver"
)

// Spec describes a long-running service for Run.
type Spec struct {
	// Name of the service ("ingest", "lifecycle", ...): the logger's service attribute, the
	// database application_name and the prefix of the worker identity.
	Name string
	// Flags registers the service's own settings; nil when it has none.
	Flags func(e *config.Env)
	// Validate checks the service's own settings after parsing; nil when there is nothing to check.
	Validate func() error
	// Work runs the service's work until ctx ends and then returns after a graceful drain. nil
	// means the service only serves its operational endpoints.
	Work func(ctx context.Context, b *Base) error
	// Ready adds readiness checks to the database check.
	Ready []opsserver.ReadyFunc
	// SlowIsReady: StartConfig.SlowIsReady.
	SlowIsReady func() bool
}

// Run parses the configuration, starts the base, runs the work and the operational endpoints side
// by side until ctx ends or either fails, and shuts down gracefully.
func Run(ctx context.Context, spec Spec, args []string, getenv config.Getenv, stderr io.Writer) error {
	fs := flag.NewFlagSet(spec.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := config.NewEnv(fs, getenv)
	var common config.Common
	common.Register(env)
	if spec.Flags != nil {
		spec.Flags(env)
	}
	if err := env.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		fmt.Fprintf(stderr, "%s: configuration: %v\n", spec.Name, err)
		return ErrUsage
	}
	err := common.Validate()
	if spec.Validate != nil {
		err = errors.Join(err, spec.Validate())
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: configuration: %v\n", spec.Name, err)
		return ErrUsage
	}

	base, err := Start(ctx, StartConfig{Name: spec.Name, Common: common, Getenv: getenv, Stderr: stderr, Ready: spec.Ready,
		SlowIsReady: spec.SlowIsReady})
	if err != nil {
		return err
	}
	defer base.Close()
	base.Logger.Info("starting", "metrics_addr", base.Ops.Addr())

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return base.ServeOps(gctx) })
	if spec.Work != nil {
		g.Go(func() error { return spec.Work(gctx, base) })
	}
	err = g.Wait()
	if err != nil && ctx.Err() == nil {
		base.Logger.Error("stopped on error", "error", err)
		return err
	}
	base.Logger.Info("stopped")
	return err
}
