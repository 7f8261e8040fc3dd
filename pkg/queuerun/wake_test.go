package queuerun

import (
	"context"
	"testing"
	"time"
)

// fakeTimers stand in for time.NewTimer: each started timer is announced on started and fires
// only when the test sends on its channel.
type fakeTimers struct {
	started chan fakeTimer
}

type fakeTimer struct {
	d    time.Duration
	fire chan time.Time
}

func newFakeTimers() *fakeTimers { return &fakeTimers{started: make(chan fakeTimer, 16)} }

func (f *fakeTimers) timer(d time.Duration) (<-chan time.Time, func() bool) {
	t := fakeTimer{d: d, fire: make(chan time.Time, 1)}
	f.started <- t
	return t.fire, func() bool { return true }
}

func testWaker(t *testing.T, poll time.Duration) (*Waker, *fakeTimers) {
	t.Helper()
	w, err := NewWaker(poll)
	if err != nil {
		t.Fatal(err)
	}
	timers := newFakeTimers()
	w.timer = timers.timer
	return w, timers
}

func TestWakerSleep(t *testing.T) {
	t.Parallel()
	type step func(w *Waker, timer fakeTimer, cancel context.CancelFunc)
	wake := func(w *Waker, _ fakeTimer, _ context.CancelFunc) { w.Wake() }
	fire := func(_ *Waker, timer fakeTimer, _ context.CancelFunc) { timer.fire <- time.Now() }
	stop := func(_ *Waker, _ fakeTimer, cancel context.CancelFunc) { cancel() }
	tests := []struct {
		name string
		// armed: Sleep gets the channel taken by Next before the steps; otherwise nil.
		armed     bool
		wakeFirst bool // Wake before Next is taken
		steps     []step
		wantWoken bool
	}{
		{"a wake-up ends the sleep", true, false, []step{wake}, true},
		{"the poll interval ends the sleep", true, false, []step{fire}, false},
		{"shutdown ends the sleep", true, false, []step{stop}, false},
		{"without a channel a wake-up does not end the sleep", false, false, []step{wake, fire}, false},
		{"a wake-up before the channel was taken is not this sleep's", true, true, []step{fire}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w, timers := testWaker(t, 750*time.Millisecond)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.wakeFirst {
				w.Wake()
			}
			var ch <-chan struct{}
			if tt.armed {
				ch = w.Next()
			}
			woken := make(chan bool, 1)
			go func() { woken <- w.Sleep(ctx, ch) }()
			timer := <-timers.started
			if timer.d != 750*time.Millisecond {
				t.Fatalf("sleep waits %v, want the poll interval", timer.d)
			}
			for _, s := range tt.steps {
				s(w, timer, cancel)
			}
			if got := <-woken; got != tt.wantWoken {
				t.Fatalf("woken = %v, want %v", got, tt.wantWoken)
			}
		})
	}
}

func TestNewWakerRejectsAPollIntervalThatIsNotPositive(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := NewWaker(d); err == nil {
			t.Errorf("NewWaker(%v) accepted", d)
		}
	}
}

// One Wake ends one of several sleeps; the others sleep on until the next Wake or their poll
// interval. A loop whose claim was running when the Wake came takes it as well as a sleeper
// would, once: whoever looks first.
func TestWakerWakesOneSleeper(t *testing.T) {
	t.Parallel()
	w, timers := testWaker(t, time.Minute)
	ctx := context.Background()
	const sleepers = 3
	woken := make(chan bool, sleepers)
	var fires []fakeTimer
	for range sleepers {
		ch := w.Next()
		go func() { woken <- w.Sleep(ctx, ch) }()
		fires = append(fires, <-timers.started)
	}
	w.Wake()
	if !<-woken {
		t.Fatal("the first sleep to end was not the wake-up's")
	}
	select {
	case got := <-woken:
		t.Fatalf("a second sleep ended (woken %v) after one Wake", got)
	case <-time.After(100 * time.Millisecond):
	}
	w.Wake()
	if !<-woken {
		t.Fatal("the second Wake did not end a second sleep")
	}
	for _, f := range fires {
		f.fire <- time.Now()
	}
	if <-woken {
		t.Fatal("the last sleep ended by a wake-up nobody sent")
	}

	// A loop that took its channel before a claim the Wake overlapped looks again at once; a
	// second look at the same Wake does not.
	running := w.Next()
	w.Wake()
	go func() { woken <- w.Sleep(ctx, running) }()
	<-timers.started
	if !<-woken {
		t.Fatal("a Wake during the claim was lost")
	}
	go func() { woken <- w.Sleep(ctx, running) }()
	(<-timers.started).fire <- time.Now()
	if <-woken {
		t.Fatal("one Wake ended two sleeps")
	}
}
