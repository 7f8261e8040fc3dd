package notify_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/pkg/notify"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// retryLog passes on the retry_in of every "LISTEN connection lost" record: the delay Listen
// chose before its next attempt.
type retryLog chan time.Duration

func (r retryLog) Enabled(context.Context, slog.Level) bool { return true }
func (r retryLog) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r retryLog) WithGroup(string) slog.Handler            { return r }
func (r retryLog) Handle(_ context.Context, rec slog.Record) error {
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "retry_in" {
			r <- a.Value.Duration()
		}
		return true
	})
	return nil
}

// The reconnect backoff is per outage. A listener whose established connections are dropped again
// and again (restarts, failovers, pooler reloads over a process's life) reconnects each time
// after the first delay, not after the cap its earlier outages doubled it to; while connecting
// fails, the delay doubles, and the next session that gets as far as LISTEN starts it over.
func TestListenBackoffStartsOverAfterEachOutage(t *testing.T) {
	t.Parallel()
	const first, limit = 50 * time.Millisecond, 5 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dbURL := pgtest.NewURL(t)
	admin, err := pgxpool.New(ctx, dbURL) // a superuser: it terminates the listener's sessions
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	cfg, err := pgx.ParseConfig(pgtest.NewLogin(t, dbURL))
	if err != nil {
		t.Fatal(err)
	}
	role := pgx.Identifier{cfg.User}.Sanitize()

	wakes := make(chan struct{}, 100)
	retries := make(retryLog, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		notify.ListenWithDelays(ctx, cfg, "notify_test", func() { wakes <- struct{}{} }, slog.New(retries), first, limit)
	}()
	defer func() { cancel(); <-done }()

	// awaitWake waits for the (re)connect's wake-up, which comes once LISTEN is in place.
	awaitWake := func(what string) {
		t.Helper()
		select {
		case <-wakes:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no wake-up within 5 s", what)
		}
	}
	nextRetry := func(what string) time.Duration {
		t.Helper()
		select {
		case d := <-retries:
			return d
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no reconnect attempt logged within 5 s", what)
			return 0
		}
	}
	drop := func() {
		t.Helper()
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE usename = $1 AND datname = current_database()`, cfg.User).Scan(&n); err != nil || n != 1 {
			t.Fatalf("terminated %d listener sessions (%v), want 1", n, err)
		}
	}
	awaitWake("connect")

	// Six drops of an established session. With the delay kept across them, the fifth would wait
	// 16 times the first and the sixth 32 times (in production, 1 s doubled to the 30 s cap).
	// Each reconnect takes the first delay and a connect; the bound leaves room for a slow machine.
	for i := 1; i <= 6; i++ {
		start := time.Now()
		drop()
		if d := nextRetry("drop"); d != first {
			t.Fatalf("drop %d: retry in %v, want %v", i, d, first)
		}
		awaitWake("reconnect")
		if took := time.Since(start); took > 16*first {
			t.Fatalf("drop %d: reconnected after %v, want about %v", i, took, first)
		}
	}

	// An outage in which connecting fails: the delay doubles with every failed attempt.
	if _, err := admin.Exec(ctx, "ALTER ROLE "+role+" NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	drop()
	for _, want := range []time.Duration{first, 2 * first, 4 * first, 8 * first} {
		if d := nextRetry("outage"); d != want {
			t.Fatalf("during the outage: retry in %v, want %v", d, want)
		}
	}
	if _, err := admin.Exec(ctx, "ALTER ROLE "+role+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	awaitWake("reconnect after the outage")
	// Attempts logged before the login came back are behind us.
	for len(retries) > 0 {
		<-retries
	}
	drop()
	if d := nextRetry("drop after the outage"); d != first {
		t.Fatalf("drop after the outage: retry in %v, want %v", d, first)
	}
	awaitWake("reconnect after the last drop")
}
