package githubsim

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/hubsig"
)

// TestWebhookSendsReuseConnections: webhook deliveries go over kept-alive connections, through
// an http.Client and through a sender's own connection (hookconn.go). A response body closed
// unread makes a transport drop the connection, and every webhook then paid a new TCP connection
// on both sides (under load, 15 % of the simulator's CPU was dialling). The server's answers are
// what the sender reports, and the requests carry GitHub's headers and a valid signature.
func TestWebhookSendsReuseConnections(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		poster func() poster
	}{
		{"http.Client", func() poster {
			return clientPoster{&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}}
		}},
		{"own connection", func() poster { return newConnPoster(5 * time.Second) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var conns atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if hubsig.Verify([][]byte{[]byte("test-secret")}, r.Header.Get("X-Hub-Signature-256"), body) != nil ||
					r.Header.Get("X-GitHub-Event") != "ping" || !strings.HasPrefix(r.Header.Get("X-GitHub-Delivery"), "guid-") ||
					r.Header.Get("Content-Type") != "application/json" || r.URL.Path != "/webhook" {
					w.WriteHeader(http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				switch r.Header.Get("X-GitHub-Delivery") {
				case "guid-7":
					w.WriteHeader(http.StatusServiceUnavailable) // an answer, not a failure to send
					return
				case "guid-9": // chunked, in two pieces
					w.WriteHeader(http.StatusAccepted)
					_, _ = w.Write([]byte(`{"status":`))
					w.(http.Flusher).Flush()
					_, _ = w.Write([]byte(`"accepted"}`))
					return
				case "guid-11": // with an interim answer first
					w.Header().Set("Link", "</style.css>; rel=preload")
					w.WriteHeader(http.StatusEarlyHints)
				}
				w.WriteHeader(http.StatusAccepted)
				_, _ = w.Write([]byte(`{"status":"accepted"}`)) // as ingest answers
			}))
			srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			defer srv.Close()
			s := New(Options{WebhookURL: srv.URL + "/webhook", WebhookSecret: []byte("test-secret"), WebhookSenders: 1})
			defer s.Close()
			p := tt.poster()
			if c, ok := p.(*connPoster); ok {
				defer c.close()
			}
			for i := range 20 {
				want := http.StatusAccepted
				if i == 7 {
					want = http.StatusServiceUnavailable
				}
				if code := s.send(context.Background(), p, fmt.Sprintf("guid-%d", i), "ping", "", []byte(`{"zen":"x"}`), false); code != want {
					t.Fatalf("send %d: status %d, want %d", i, code, want)
				}
			}
			if n := conns.Load(); n != 1 {
				t.Fatalf("20 sequential webhooks opened %d connections, want 1", n)
			}
			if _, own := p.(*connPoster); !own {
				return // what follows is net/http's own (it may answer an error for a connection closed just then)
			}
			// The server closes its kept-alive connections: the next webhook dials again.
			srv.CloseClientConnections()
			if code := s.send(context.Background(), p, "guid-20", "ping", "", []byte(`{"zen":"x"}`), false); code != http.StatusAccepted {
				t.Fatalf("send after the server closed the connection: status %d", code)
			}
		})
	}
}

// The own-connection sender does not send a request again when the server may have processed it:
// after a timeout on a kept-alive connection it reports no answer (deliver decides, and records
// the next attempt), where a resend would go out at once, unrecorded, while the first may still
// be handled. A connection the server closes after answering is dialled again.
func TestConnPosterResendsOnlyWhatCannotHaveArrived(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]int{}
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		guid := r.Header.Get("X-GitHub-Delivery")
		mu.Lock()
		seen[guid]++
		mu.Unlock()
		switch guid {
		case "slow":
			time.Sleep(600 * time.Millisecond)
		case "close":
			w.Header().Set("Connection", "close")
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	p := newConnPoster(300 * time.Millisecond)
	defer p.close()
	post := func(guid string) int {
		return p.post(context.Background(), srv.URL, &hookHeader{event: "ping", guid: guid, signature: "sha256=00"}, []byte(`{}`))
	}
	for _, step := range []struct {
		guid      string
		code      int
		sent      int
		connsOpen int64
	}{
		{"first", http.StatusAccepted, 1, 1},
		{"slow", 0, 1, 1},                    // timed out on a reused connection: not sent again
		{"after", http.StatusAccepted, 1, 2}, // a new connection
		{"close", http.StatusAccepted, 1, 2}, // answered, then the server closes
		{"again", http.StatusAccepted, 1, 3}, // dialled again
	} {
		if code := post(step.guid); code != step.code {
			t.Fatalf("%s: status %d, want %d", step.guid, code, step.code)
		}
		mu.Lock()
		n := seen[step.guid]
		mu.Unlock()
		if n != step.sent || conns.Load() != step.connsOpen {
			t.Fatalf("%s: sent %d times over %d connections, want %d and %d", step.guid, n, conns.Load(), step.sent, step.connsOpen)
		}
	}
}
