package githubsim

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func limitedSim(t *testing.T, l Limits) (*Simulator, func(method, path string) *http.Response) {
	t.Helper()
	s := New(Options{AppID: 1})
	t.Cleanup(s.Close)
	s.AddInstallation(7, "octo")
	s.AddRepository(7, 70, "octo/repo", map[string]Workflow{"release.yml": ReleaseWorkflow()})
	s.tokens["ghs_simtest"] = token{installationID: 7, expires: time.Now().Add(time.Hour)}
	s.SetLimits(l)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, func(method, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(`{"name":"c","head_sha":"abc"}`))
		req.Header.Set("Authorization", "token ghs_simtest")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
}

func message(t *testing.T, resp *http.Response) string {
	t.Helper()
	var body struct{ Message string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return body.Message
}

func TestLimits(t *testing.T) {
	t.Parallel()
	t.Run("primary budget with reset", func(t *testing.T) {
		t.Parallel()
		_, do := limitedSim(t, Limits{Budget: 2, Window: time.Hour})
		for i, want := range []string{"1", "0"} {
			resp := do("GET", "/repos/octo/repo/commits/abc/check-runs")
			if resp.StatusCode != 200 || resp.Header.Get("x-ratelimit-remaining") != want || resp.Header.Get("x-ratelimit-limit") != "2" {
				t.Fatalf("request %d: %d remaining %q", i, resp.StatusCode, resp.Header.Get("x-ratelimit-remaining"))
			}
		}
		resp := do("GET", "/repos/octo/repo/commits/abc/check-runs")
		if resp.StatusCode != 403 || resp.Header.Get("x-ratelimit-remaining") != "0" || resp.Header.Get("x-ratelimit-reset") == "" ||
			!strings.HasPrefix(message(t, resp), "API rate limit exceeded for installation ID 7") {
			t.Fatalf("over budget: %d %v", resp.StatusCode, resp.Header)
		}
	})
	t.Run("mutations closer than the interval", func(t *testing.T) {
		t.Parallel()
		s, do := limitedSim(t, Limits{Budget: 100, MutationInterval: time.Hour, Strict: true})
		if resp := do("POST", "/repos/octo/repo/check-runs"); resp.StatusCode != 201 {
			t.Fatalf("first mutation: %d", resp.StatusCode)
		}
		if resp := do("GET", "/repos/octo/repo/commits/abc/check-runs"); resp.StatusCode != 200 {
			t.Fatalf("a read is no mutation: %d", resp.StatusCode)
		}
		resp := do("POST", "/repos/octo/repo/check-runs")
		if resp.StatusCode != 403 || resp.Header.Get("Retry-After") != "" || resp.Header.Get("x-ratelimit-remaining") == "0" ||
			!strings.Contains(message(t, resp), "secondary rate limit") {
			t.Fatalf("second mutation: %d %v", resp.StatusCode, resp.Header)
		}
		if v := s.Violations(); len(v) != 1 || v[0].Kind != "mutation_interval" || v[0].InstallationID != 7 || v[0].Method != "POST" {
			t.Fatalf("violations %+v", v)
		}
	})
	t.Run("concurrent requests", func(t *testing.T) {
		t.Parallel()
		s, do := limitedSim(t, Limits{MaxConcurrent: 1, RetryAfter: 30 * time.Second, Strict: true})
		s.AddFault(Fault{Operation: OpListCheckRuns, Latency: 300 * time.Millisecond, Times: 1})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); do("GET", "/repos/octo/repo/commits/abc/check-runs") }()
		// Wait until the slow request is in flight.
		for {
			s.mu.Lock()
			b := s.budgets[7]
			busy := b != nil && b.inFlight == 1
			s.mu.Unlock()
			if busy {
				break
			}
			time.Sleep(time.Millisecond)
		}
		resp := do("POST", "/repos/octo/repo/check-runs")
		wg.Wait()
		if resp.StatusCode != 403 || resp.Header.Get("Retry-After") != "30" {
			t.Fatalf("concurrent request: %d %v", resp.StatusCode, resp.Header)
		}
		if v := s.Violations(); len(v) != 1 || v[0].Kind != "concurrent" || v[0].InFlight != 1 {
			t.Fatalf("violations %+v", v)
		}
	})
}
