package daemon

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boardreadyops/cloud/pkg/database"
	"github.com/boardreadyops/cloud/pkg/opsserver"
)

// readyInterval is how often a service checks its own readiness, besides every /readyz.
const readyInterval = 5 * time.Second

// readiness runs a service's readiness check and exports its outcome as boardreadyops_ready.
//
// A replica that is not ready leaves its Service's endpoints: when none of ingest's replicas is
// ready (its database unreachable, read-only after a failover, or older than the binary), GitHub's
// deliveries fail at the ingress, ingest counts nothing, and GitHub does not retry them. Only this
// gauge (BoardReadyOpsNotReady) tells. It is checked in the background too, so that it is current
// without a kubelet probing (a replica outside Kubernetes, or one whose probe is off).
//
// With slowIsReady (ingest: a delivery stored in the last 30 s), a check that fails only because
// its time ran out (ReadyTimeout: the database slow, or every pooled connection busy in a burst)
// leaves the replica ready while the service's work still succeeds: taking every replica out of
// the Service at once for a slow database would refuse at the ingress the deliveries it still
// stores within its own store timeout. A replica whose checks time out and whose work fails (cut
// off from the database, its DNS stale after a failover) is not ready, so the others take its
// traffic; a definite answer (read-only, schema behind) is never counted as slow.
type readiness struct {
	ready       func(context.Context) error
	slowIsReady func() bool
	gauge       prometheus.Gauge
	logger      *slog.Logger

	mu    sync.Mutex
	known bool
	last  readyState
}

// readyState is the outcome of a readiness check, for logging its changes once.
type readyState int

const (
	stateReady readyState = iota
	stateNotReady
	stateSlow // timed out, ready all the same (slowIsReady reported true)
)

func newReadiness(reg prometheus.Registerer, ready func(context.Context) error, slowIsReady func() bool, logger *slog.Logger) *readiness {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "boardreadyops_ready",
		Help: "1 when the replica's last readiness check passed (database reachable, writable and migrated, and the service's own checks; for ingest a check that only timed out passes while deliveries are being stored), 0 when it failed; checked every 5 s and on every /readyz.",
	})
	reg.MustRegister(g)
	return &readiness{ready: ready, slowIsReady: slowIsReady, gauge: g, logger: logger}
}

// check runs the readiness check once, sets the gauge and logs a change of state: once when it
// fails, with its error, and once when it passes again, not on every probe (during an outage the
// probes' and the background check's errors differ, a refused connection or a timeout).
func (r *readiness) check(ctx context.Context) error {
	err := r.ready(ctx)
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		return err // the caller went away (a probe's connection closed, shutdown): nothing learned
	}
	state := stateReady
	switch {
	case err != nil && r.slowIsReady != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) &&
		!errors.Is(err, database.ErrReadOnly) && !errors.Is(err, database.ErrSchemaBehind) && r.slowIsReady():
		state = stateSlow
	case err != nil:
		state = stateNotReady
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	changed := !r.known || r.last != state
	switch state {
	case stateNotReady:
		r.gauge.Set(0)
		if changed {
			r.logger.Warn("not ready", "error", err)
		}
	case stateSlow:
		r.gauge.Set(1)
		if changed {
			r.logger.Warn("readiness check timed out, staying ready while the service's work succeeds: the database is slow or every pooled connection is busy",
				"timeout", opsserver.ReadyTimeout, "error", err)
		}
		err = nil
	default:
		r.gauge.Set(1)
		if changed && r.known {
			r.logger.Info("ready again")
		}
	}
	r.known, r.last = true, state
	return err
}

// watch checks readiness every interval until ctx ends, starting at once.
func (r *readiness) watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, opsserver.ReadyTimeout)
		_ = r.check(cctx)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
