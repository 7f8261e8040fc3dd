package githubsim

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
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
				if r.Header.Get("X-GitHub-Delivery") == "guid-7" {
					w.WriteHeader(http.StatusServiceUnavailable) // an answer, not a failure to send
					return
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
