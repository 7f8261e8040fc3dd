package notify_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/notify"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestSignalsAreCoalescedAndDelivered(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dbURL := pgtest.NewURL(t)
	listener, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(context.Background())
	if _, err := listener.Exec(ctx, "LISTEN "+notify.Jobs); err != nil {
		t.Fatal(err)
	}
	sender, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close(context.Background())

	n := notify.New(sender, notify.Jobs, 50*time.Millisecond, slog.New(slog.DiscardHandler))
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { n.Run(runCtx); close(ran) }()
	// A pgx connection is not for concurrent use: stop the notifier before the sender closes.
	defer func() { stopRun(); <-ran }()

	// A burst of signals becomes at most a few notifications.
	for i := 0; i < 1000; i++ {
		n.Signal()
	}
	got := 0
	for {
		wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err := listener.WaitForNotification(wctx)
		wcancel()
		if err != nil {
			break
		}
		got++
	}
	if got < 1 || got > 3 {
		t.Fatalf("1000 signals produced %d notifications, want 1 to 3", got)
	}

	// After a quiet period a single signal is delivered promptly.
	start := time.Now()
	n.Signal()
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	defer wcancel()
	if _, err := listener.WaitForNotification(wctx); err != nil {
		t.Fatalf("no notification: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("notification took %v", d)
	}
}
