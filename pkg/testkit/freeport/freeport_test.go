package freeport_test

import (
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/boardreadyops/cloud/pkg/testkit/freeport"
)

// TestAddrStaysOutOfTheEphemeralRange: addresses handed out, also concurrently, are distinct,
// bindable and never ones the kernel could give an outgoing connection meanwhile.
func TestAddrStaysOutOfTheEphemeralRange(t *testing.T) {
	t.Parallel()
	lo, hi := freeport.EphemeralRange()
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				addr, err := freeport.Addr()
				if err != nil {
					t.Error(err)
					return
				}
				host, p, err := net.SplitHostPort(addr)
				port, _ := strconv.Atoi(p)
				if err != nil || host != "127.0.0.1" || port >= lo && port <= hi || port < freeport.MinPort {
					t.Errorf("address %q (%v): want loopback, outside %d-%d, at least %d", addr, err, lo, hi, freeport.MinPort)
				}
				mu.Lock()
				if seen[addr] {
					t.Errorf("%s handed out twice", addr)
				}
				seen[addr] = true
				mu.Unlock()
				l, err := net.Listen("tcp", addr)
				if err != nil {
					t.Errorf("listen on %s: %v", addr, err)
					continue
				}
				l.Close()
			}
		}()
	}
	wg.Wait()
}
