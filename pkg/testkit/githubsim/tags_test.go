package githubsim

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// Reading a tag's commit: the sha media type, 304 for the ETag of the current commit (which GitHub
// does not count against the budget), 422 for a tag that does not exist.
func TestGetTagCommit(t *testing.T) {
	t.Parallel()
	const at, moved = "6dcb09b5b57875f334f61aebed695e2e4193db5e", "0123456789abcdef0123456789abcdef01234567"
	s, _ := limitedSim(t, Limits{Budget: 10, Window: time.Hour})
	s.SetTag("octo/repo", "v1.0.0", at)
	get := func(path, etag string) (*http.Response, string) {
		t.Helper()
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "token ghs_simtest")
		req.Header.Set("Accept", "application/vnd.github.sha")
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		return w.Result(), w.Body.String()
	}
	tests := []struct {
		name, path, etag string
		status           int
		body, remaining  string
	}{
		{"the commit, spending one request", "/repos/octo/repo/commits/tags/v1.0.0", "", 200, at, "9"},
		{"the current commit's ETag: 304, free", "/repos/octo/repo/commits/tags/v1.0.0", `"` + at + `"`, 304, "", "9"},
		{"another commit's ETag: the commit", "/repos/octo/repo/commits/tags/v1.0.0", `"` + moved + `"`, 200, at, "8"},
		{"a tag never pushed: 422", "/repos/octo/repo/commits/tags/v2", "", 422, "", "7"},
		{"not a tag: 422", "/repos/octo/repo/commits/main", "", 422, "", "6"},
	}
	for _, tt := range tests { // in order: the budget carries over
		resp, body := get(tt.path, tt.etag)
		if resp.StatusCode != tt.status || (tt.body != "" && body != tt.body) || resp.Header.Get("x-ratelimit-remaining") != tt.remaining {
			t.Fatalf("%s: %d %q remaining %s; want %d %q remaining %s", tt.name, resp.StatusCode, body,
				resp.Header.Get("x-ratelimit-remaining"), tt.status, tt.body, tt.remaining)
		}
	}
	s.DeleteTag("octo/repo", "v1.0.0")
	if resp, _ := get("/repos/octo/repo/commits/tags/v1.0.0", `"`+at+`"`); resp.StatusCode != 422 {
		t.Fatalf("a deleted tag: %d, want 422", resp.StatusCode)
	}
}
