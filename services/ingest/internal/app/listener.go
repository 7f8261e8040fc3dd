package app

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// limitListener caps concurrent connections: Accept waits while n are open, so a flood of idle
// or slow clients cannot exhaust file descriptors or memory. Idle keep-alive connections are the
// cheapest to lose (their client reconnects when it has a request), so near the cap — above nine
// tenths of it — the oldest idle ones are closed first, and at the cap a waiting Accept closes
// idle ones to make room rather than leave a new delivery in the kernel's queue. A connection idle
// for less than shedMinIdle is left alone: its client may be sending its next request right now,
// and a request lost on a closed keep-alive connection is not retried (POST is not idempotent).
func limitListener(l net.Listener, n int) *limited {
	return &limited{Listener: l, sem: make(chan struct{}, n), high: n - n/10, idle: map[net.Conn]time.Time{}}
}

type limited struct {
	net.Listener
	sem  chan struct{}
	high int // open connections above which idle ones are shed

	mu   sync.Mutex
	idle map[net.Conn]time.Time // idle since
}

const (
	// shedPoll is how often an Accept waiting at the cap looks for idle connections to close.
	shedPoll = 50 * time.Millisecond
	// shedMinIdle is how long a connection must have been idle before it may be shed.
	shedMinIdle = time.Second
)

func (l *limited) Accept() (net.Conn, error) {
	for acquired := false; !acquired; {
		select {
		case l.sem <- struct{}{}:
			acquired = true
		default:
			if l.shedOldestIdle() {
				continue
			}
			select {
			case l.sem <- struct{}{}:
				acquired = true
			case <-time.After(shedPoll):
			}
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	l.shedAbove(l.high)
	return &limitedConn{Conn: c, release: func() { <-l.sem }}, nil
}

// shedAbove closes idle connections, oldest first, while more than high are open.
func (l *limited) shedAbove(high int) {
	for len(l.sem) > high {
		if !l.shedOldestIdle() {
			return
		}
	}
}

// track is the server's ConnState hook: it keeps the set of idle connections.
func (l *limited) track(c net.Conn, state http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if state == http.StateIdle {
		l.idle[c] = time.Now()
	} else {
		delete(l.idle, c)
	}
}

// shedOldestIdle closes the connection idle longest, if for at least shedMinIdle; false when
// there is none.
func (l *limited) shedOldestIdle() bool {
	l.mu.Lock()
	var oldest net.Conn
	since := time.Now().Add(-shedMinIdle)
	for c, t := range l.idle {
		if !t.After(since) {
			oldest, since = c, t
		}
	}
	delete(l.idle, oldest)
	l.mu.Unlock()
	if oldest == nil {
		return false
	}
	_ = oldest.Close()
	return true
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
