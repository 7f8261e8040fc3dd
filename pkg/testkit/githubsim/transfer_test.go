package githubsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A repository transferred to another installation under a new name: its check runs move with it,
// the old name is redirected as GitHub redirects it (301 for GET, 307 for the rest), and only the
// new installation's token reaches it.
func TestTransferredRepository(t *testing.T) {
	t.Parallel()
	s := New(Options{AppID: 1})
	t.Cleanup(s.Close)
	s.AddInstallation(7, "octo")
	s.AddInstallation(8, "neworg")
	s.AddRepository(7, 70, "octo/repo", map[string]Workflow{"release.yml": ReleaseWorkflow()})
	s.tokens["ghs_old"] = token{installationID: 7, expires: time.Now().Add(time.Hour)}
	s.tokens["ghs_new"] = token{installationID: 8, expires: time.Now().Add(time.Hour)}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(c *http.Client, tok, method, path, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "token "+tok)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := do(http.DefaultClient, "ghs_old", "POST", "/repos/octo/repo/check-runs", `{"name":"c","head_sha":"abc"}`)
	var cr struct{ ID int64 }
	if resp.StatusCode != http.StatusCreated || json.NewDecoder(resp.Body).Decode(&cr) != nil {
		t.Fatalf("create: %d", resp.StatusCode)
	}
	if err := s.TransferRepository("octo/repo", 8, "neworg/repo"); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/repos/octo/repo/check-runs/%d", cr.ID)
	moved := fmt.Sprintf("/repos/neworg/repo/check-runs/%d", cr.ID)
	tests := []struct {
		name         string
		client       *http.Client
		tok, method  string
		path         string
		status       int
		wantLocation string
	}{
		{"GET of the old name: 301", noFollow, "ghs_new", "GET", "/repos/octo/repo/commits/abc/check-runs?name=c",
			http.StatusMovedPermanently, "/repos/neworg/repo/commits/abc/check-runs?name=c"},
		{"PATCH of the old name: 307", noFollow, "ghs_new", "PATCH", path, http.StatusTemporaryRedirect, moved},
		{"the old installation, redirected: 404", http.DefaultClient, "ghs_old", "PATCH", path, http.StatusNotFound, ""},
		{"the old installation, new name: 404", http.DefaultClient, "ghs_old", "PATCH", moved, http.StatusNotFound, ""},
		{"the new installation, redirected: 200", http.DefaultClient, "ghs_new", "PATCH", path, http.StatusOK, ""},
		{"the check run under the new name", http.DefaultClient, "ghs_new", "GET", "/repos/neworg/repo/commits/abc/check-runs", http.StatusOK, ""},
	}
	for _, tt := range tests {
		resp := do(tt.client, tt.tok, tt.method, tt.path, `{"status":"in_progress"}`)
		if resp.StatusCode != tt.status || resp.Header.Get("Location") != tt.wantLocation {
			t.Errorf("%s: %d Location %q; want %d %q", tt.name, resp.StatusCode, resp.Header.Get("Location"), tt.status, tt.wantLocation)
		}
	}
	if all := s.AllCheckRuns(); len(all) != 1 || all[0].repo != "neworg/repo" || all[0].Status != "in_progress" {
		t.Fatalf("check runs %+v, want the one, moved and updated", all)
	}
}
