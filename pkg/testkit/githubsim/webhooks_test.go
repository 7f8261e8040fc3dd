package githubsim

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestWebhookSendsReuseConnections: webhook deliveries go over kept-alive connections. A response
// body closed unread makes the transport drop the connection, and every webhook then paid a new
// TCP connection on both sides (under load, 15 % of the simulator's CPU was dialling).
func TestWebhookSendsReuseConnections(t *testing.T) {
	t.Parallel()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
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
	s := New(Options{WebhookURL: srv.URL, WebhookSecret: []byte("test-secret"), WebhookSenders: 1})
	defer s.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	for i := range 20 {
		if code := s.send(context.Background(), client, fmt.Sprintf("guid-%d", i), "ping", "", []byte(`{"zen":"x"}`), false); code != http.StatusAccepted {
			t.Fatalf("send %d: status %d", i, code)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("20 sequential webhooks opened %d connections, want 1", n)
	}
}
