//go:build cluster

package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boardreadyops/cloud/pkg/hubsig"
)

// sender sends signed push webhooks, each a new release tag, to ingest's Service, and counts
// the answers. Keep-alives are off: every delivery opens a connection through kube-proxy's
// rules, as a webhook from GitHub does, so a pod that leaves the Service's endpoints stops
// receiving new deliveries.
type sender struct {
	url    string
	secret []byte
	client *http.Client

	next     atomic.Int64
	accepted atomic.Int64
	mu       sync.Mutex
	failures []string // non-2xx answers and transport errors, at most 20 kept
	failed   atomic.Int64
}

func newSender(url string, secret []byte) *sender {
	return &sender{url: url, secret: secret, client: &http.Client{
		Timeout:   15 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true},
	}}
}

// send delivers one push; it reports whether ingest accepted it (2xx).
func (s *sender) send(ctx context.Context) bool {
	n := s.next.Add(1)
	body, _ := json.Marshal(pushPayload(n))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("cluster-%s-%d", randomHex(4), n))
	req.Header.Set("X-Hub-Signature-256", hubsig.Sign(s.secret, body))
	resp, err := s.client.Do(req)
	if err != nil {
		s.fail(fmt.Sprintf("push %d: %v", n, err))
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		s.fail(fmt.Sprintf("push %d: %s", n, resp.Status))
		return false
	}
	s.accepted.Add(1)
	return true
}

func (s *sender) fail(msg string) {
	s.failed.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failures) < 20 {
		s.failures = append(s.failures, time.Now().UTC().Format("15:04:05.000")+" "+msg)
	}
}

// run sends continuously, every interval, until stop is called; stop waits for the last send.
func (s *sender) run(interval time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				s.send(context.Background())
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
