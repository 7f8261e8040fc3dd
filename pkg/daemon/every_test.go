package daemon_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/daemon"
)

func TestEvery(t *testing.T) {
	t.Parallel()
	for _, now := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		var n atomic.Int64
		done := make(chan struct{})
		go func() { daemon.Every(ctx, time.Hour, now, func(context.Context) { n.Add(1) }); close(done) }()
		time.Sleep(20 * time.Millisecond)
		cancel()
		<-done
		if want := map[bool]int64{true: 1, false: 0}[now]; n.Load() != want {
			t.Fatalf("now=%v: %d runs before the first interval, want %d", now, n.Load(), want)
		}
	}
}
