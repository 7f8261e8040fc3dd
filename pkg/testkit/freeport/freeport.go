// Package freeport finds loopback ports for servers that are started a moment later — another
// process (PostgreSQL, a service binary) or a server bound after its address was configured.
//
// A port taken with ":0" comes from the kernel's ephemeral range, which is also where outgoing
// connections get their local ports: between the check and the bind, any of the thousands of
// connections a test run opens can be given it ("address already in use", seen in CI). Ports
// from here are free when checked, never handed out twice by one process, and outside the
// ephemeral range, so only another process doing the same could race for them.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
)

// MinPort keeps clear of well-known and registered service ports.
const MinPort = 10000

var (
	mu        sync.Mutex
	handedOut = map[int]bool{}
)

// Port returns a loopback TCP port as described in the package comment.
func Port() (int, error) {
	lo, hi := EphemeralRange()
	var ranges [][2]int // [first, last] outside the ephemeral range
	if lo > MinPort {
		ranges = append(ranges, [2]int{MinPort, lo - 1})
	}
	if hi < 65535 {
		ranges = append(ranges, [2]int{max(hi+1, MinPort), 65535})
	}
	mu.Lock()
	defer mu.Unlock()
	for range 1000 {
		if len(ranges) == 0 {
			break
		}
		r := ranges[rand.IntN(len(ranges))]
		port := r[0] + rand.IntN(r[1]-r[0]+1)
		if handedOut[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		_ = l.Close()
		handedOut[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port outside the ephemeral range %d-%d", lo, hi)
}

// Addr returns "127.0.0.1:<Port()>".
func Addr() (string, error) {
	p, err := Port()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", p), nil
}

// EphemeralRange is the kernel's range for outgoing connections' local ports (Linux's default
// when /proc does not say).
func EphemeralRange() (int, int) {
	lo, hi := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var a, z int
		if n, _ := fmt.Sscan(string(b), &a, &z); n == 2 && a > 0 && a <= z && z <= 65535 {
			lo, hi = a, z
		}
	}
	return lo, hi
}
