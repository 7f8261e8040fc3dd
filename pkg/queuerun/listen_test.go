package queuerun_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boardreadyops/cloud/pkg/notify"
	"github.com/boardreadyops/cloud/pkg/queuerun"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// A NOTIFY on the channel wakes the sleepers, and Listen leaves nothing running once ctx ends.
// Not parallel: the leak check sees every goroutine of the test binary.
func TestListenWakesOnNotify(t *testing.T) {
	pool := pgtest.NewPool(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	// An hour's poll interval: only a wake-up can end these sleeps.
	w, err := queuerun.NewWaker(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	connected := w.Next()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Listen(ctx, pool.Config().ConnConfig, notify.Jobs, slog.New(slog.DiscardHandler))
	}()
	// The (re)connect wake-up comes once LISTEN is in place.
	if !w.Sleep(ctx, connected) {
		t.Fatal("no wake-up when the listener connected")
	}

	notified := w.Next()
	if _, err := pool.Exec(ctx, "SELECT pg_notify($1, '')", notify.Jobs); err != nil {
		t.Fatal(err)
	}
	if !w.Sleep(ctx, notified) {
		t.Fatal("the NOTIFY did not wake the sleeper")
	}

	cancel()
	<-done
}
