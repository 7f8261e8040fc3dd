package dispatcher

import (
	"context"
	"testing"
	"time"
)

func TestAcquire(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		fill      bool
		claimFill time.Duration
		cancel    bool
		want      int
	}{
		{"not backlogged: what is free now", false, time.Minute, false, 3},
		{"backlogged: the fill ends with its timer", true, 10 * time.Millisecond, false, 3},
		{"backlogged: shutdown during the fill claims nothing", true, time.Minute, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := &Dispatcher{cfg: Config{ClaimFill: tt.claimFill}, slots: make(chan struct{}, 4)}
			d.slots <- struct{}{} // one delivery in flight, never finishing here
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				go func() { time.Sleep(20 * time.Millisecond); cancel() }()
			}
			if got := d.acquire(ctx, 4, tt.fill); got != tt.want {
				t.Fatalf("acquired %d slots, want %d", got, tt.want)
			}
			if held := len(d.slots); held != 1+tt.want {
				t.Fatalf("%d slots held after acquire, want %d", held, 1+tt.want)
			}
		})
	}
}
