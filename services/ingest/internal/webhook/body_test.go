package webhook_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/hubsig"
	"github.com/boardreadyops/cloud/services/ingest/internal/webhook"
)

// paddedPing is a signable ping delivery of exactly size bytes, made unique by label.
func paddedPing(t *testing.T, label string, size int) []byte {
	t.Helper()
	head := bytes.TrimRight(bytes.TrimSpace(fixture(t, "ping")), "}")
	tail := `,"pad":"` + label
	pad := size - len(head) - len(tail) - len(`"}`)
	if pad < 0 {
		t.Fatalf("a ping cannot be %d bytes", size)
	}
	body := append(append(head, tail+strings.Repeat("x", pad)+`"`...), '}')
	if len(body) != size {
		t.Fatalf("body is %d bytes, want %d", len(body), size)
	}
	return body
}

// rawPost opens a connection and sends the headers of a ping delivery; length < 0 sends the body
// chunked. The answer's status line arrives on the returned channel.
func rawPost(t *testing.T, e *env, delivery string, body []byte, length int) (net.Conn, <-chan string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	framing := fmt.Sprintf("Content-Length: %d", length)
	if length < 0 {
		framing = "Transfer-Encoding: chunked"
	}
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-GitHub-Event: ping\r\nX-GitHub-Delivery: %s\r\nX-Hub-Signature-256: %s\r\n%s\r\n\r\n",
		delivery, hubsig.Sign(testSecret, body), framing)
	answered := make(chan string, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			answered <- err.Error()
			return
		}
		resp.Body.Close()
		answered <- resp.Status
	}()
	return c, answered
}

// The slow-body hold: a body announced as 25 MiB, sent 16 MiB fast (so that its buffer grows to
// the announced 25 MiB), then trickled a byte every 1.5 s — never a 2 s stall, and the average
// rate since the start stays above the minimum for minutes. The minimum rate holds in every 2 s
// window after the first, so the trickle is cut off within two windows, its reservation given
// back, and a genuine delivery larger than the first-chunk reserve is accepted, where it used to
// wait for the read timeout's worth of trickle and be answered 503.
func TestFastStartThenTrickleIsCutOff(t *testing.T) {
	t.Parallel()
	// The growth pool holds one maximal body; the reserve for first chunks is 1 MiB.
	e := setupWith(t, func(_ *env, o *webhook.Options) {
		o.BodyBudget = webhook.MaxBody + 1<<20
		o.ReadTimeout = 30 * time.Second // the default
	})
	c, answered := rawPost(t, e, "hold", nil, webhook.MaxBody)
	// 16 MiB and one byte: the 16 MiB buffer is full, so it grows to the announced 25 MiB.
	if _, err := c.Write(bytes.Repeat([]byte("x"), 16<<20+1)); err != nil {
		t.Fatal(err)
	}
	fast := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(1500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()

	// The window the fast start ends in, the next one (short of the minimum), and slack.
	const bound = 6 * time.Second
	select {
	case a := <-answered:
		if a != "408 Request Timeout" {
			t.Errorf("trickle answered %q, want 408", a)
		}
		t.Logf("trickle answered %s %v after the fast start", a, time.Since(fast).Round(time.Millisecond))
	case <-time.After(bound):
		t.Errorf("trickle not cut off within %v of a fast start: it still holds its 25 MiB", bound)
	}

	// Meanwhile (the trickle would go on for the 30 s read timeout), genuine deliveries.
	for _, tt := range []struct {
		name string
		size int
	}{
		{"4 KiB, within its first chunk", 4 << 10},
		{"40 KiB, growing from the pool", 40 << 10},
	} {
		status, _, resp := e.send(t, req{event: "ping", body: paddedPing(t, tt.name, tt.size)})
		if status != http.StatusAccepted {
			t.Errorf("genuine delivery of %s during the trickle: %d %v, want 202", tt.name, status, resp)
		}
	}
	if testutilCount(t, e, webhook.ResultOverloaded) != 0 {
		t.Error("deliveries answered 503 overloaded")
	}
}

// The minimum rate applies to every 2 s window after the first: senders that keep it in each
// window, steadily or in bursts, are read to the end; one that stops keeping it after a fast start
// is cut off at the end of the first window that misses it, or by the stall rule.
func TestMinimumRatePerWindow(t *testing.T) {
	t.Parallel()
	const minRate = 8 << 10 // 16 KiB per 2 s window
	tests := []struct {
		name  string
		first int           // bytes sent at once
		every time.Duration // then, at this interval,
		chunk int           // this many bytes (0: nothing more)
		want  string
		// within bounds the answer, from the request's start
		within time.Duration
	}{
		{"fast start, then a byte every 1.5 s", 48 << 10, 1500 * time.Millisecond, 1, "408 Request Timeout", 6 * time.Second}, // an average since the start: 8 s
		{"fast start, then silence", 48 << 10, time.Second, 0, "408 Request Timeout", 5 * time.Second},
		{"steady at twice the minimum", 0, 250 * time.Millisecond, 4 << 10, "202 Accepted", 10 * time.Second},
		{"a burst every 1.2 s, above the minimum in each window", 0, 1200 * time.Millisecond, 20 << 10, "202 Accepted", 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setupWith(t, func(_ *env, o *webhook.Options) {
				o.MinBodyRate = minRate
				o.ReadTimeout = 30 * time.Second
			})
			body := paddedPing(t, tt.name, 64<<10)
			begun := time.Now()
			c, answered := rawPost(t, e, "rate", body, len(body))
			sent, _ := c.Write(body[:tt.first])
			tick := time.NewTicker(tt.every)
			defer tick.Stop()
			timeout := time.After(tt.within)
			for {
				select {
				case a := <-answered:
					if a != tt.want {
						t.Fatalf("answered %q after %d of %d bytes and %v, want %q", a, sent, len(body), time.Since(begun).Round(time.Millisecond), tt.want)
					}
					return
				case <-timeout:
					t.Fatalf("not answered within %v (%d of %d bytes sent), want %q", tt.within, sent, len(body), tt.want)
				case <-tick.C:
					if n := min(tt.chunk, len(body)-sent); n > 0 {
						if _, err := c.Write(body[sent : sent+n]); err == nil {
							sent += n
						}
					}
				}
			}
		})
	}
}

// Chunked bodies near the cap under the smallest budget (the growth pool holds exactly one maximal
// body): the buffer never reserves more than MaxBody, and a body larger than that is found out by
// reading one byte past it, without memory for it. So a 25 MiB chunked delivery is read and a
// larger one refused 413, where both waited for budget that could never be free and got 503.
func TestChunkedBodyNearMaxBodyUnderTheSmallestBudget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		size int
		want string
	}{
		{"exactly MaxBody", webhook.MaxBody, "202 Accepted"},
		{"one byte more", webhook.MaxBody + 1, "413 Request Entity Too Large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setupWith(t, func(_ *env, o *webhook.Options) { o.BodyBudget = webhook.MaxBody })
			body := paddedPing(t, tt.name, tt.size)
			c, answered := rawPost(t, e, "chunked", body, -1)
			go func() { // the server stops reading an oversize body: writes then fail
				w := bufio.NewWriter(c)
				for rest := body; len(rest) > 0; {
					n := min(len(rest), 1<<20)
					fmt.Fprintf(w, "%x\r\n%s\r\n", n, rest[:n])
					rest = rest[n:]
				}
				fmt.Fprint(w, "0\r\n\r\n")
				_ = w.Flush()
			}()
			select {
			case a := <-answered:
				if a != tt.want {
					t.Fatalf("chunked %d-byte body answered %q, want %q", tt.size, a, tt.want)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("chunked %d-byte body not answered", tt.size)
			}
		})
	}
}
