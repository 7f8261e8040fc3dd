package githubsim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
)

// hookRecorder is a webhook receiver that keeps what it is sent.
type hookRecorder struct {
	mu  sync.Mutex
	got []hookReceived
	srv *httptest.Server
}

type hookReceived struct {
	event, action string
	payload       []byte
}

func newHookRecorder(t *testing.T) *hookRecorder {
	h := &hookRecorder{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p struct {
			Action string `json:"action"`
		}
		_ = json.Unmarshal(body, &p)
		h.mu.Lock()
		h.got = append(h.got, hookReceived{r.Header.Get("X-GitHub-Event"), p.Action, body})
		h.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// wait returns the deliveries once n in all have arrived, and a moment more has brought no
// others.
func (h *hookRecorder) wait(t *testing.T, n int) []hookReceived {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.mu.Lock()
		got := slices.Clone(h.got)
		h.mu.Unlock()
		switch {
		case len(got) > n:
			t.Fatalf("%d webhooks arrived, want %d: %v", len(got), n, got)
		case len(got) == n:
			time.Sleep(200 * time.Millisecond)
			h.mu.Lock()
			defer h.mu.Unlock()
			if len(h.got) != n {
				t.Fatalf("%d webhooks arrived, want %d: %v", len(h.got), n, h.got)
			}
			return got
		case time.Now().After(deadline):
			t.Fatalf("%d webhooks arrived, want %d: %v", len(got), n, got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (d hookReceived) String() string { return d.event + " " + d.action }

// simAPI serves s with an installation token for installation 7 and octo/repo, and returns a
// function making authenticated requests: it decodes the answer into out (when not nil) and
// returns the status.
func simAPI(t *testing.T, s *Simulator) func(method, path, body string, out any) int {
	s.AddInstallation(7, "octo")
	s.AddRepository(7, 70, "octo/repo", map[string]Workflow{"release.yml": ReleaseWorkflow()})
	s.tokens["ghs_simtest"] = token{installationID: 7, expires: time.Now().Add(time.Hour)}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return func(method, path, body string, out any) int {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "token ghs_simtest")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode
	}
}

// simAPIOK is simAPI for requests that must succeed, answering a JSON object.
func simAPIOK(t *testing.T, s *Simulator) func(method, path, body string) map[string]any {
	do := simAPI(t, s)
	return func(method, path, body string) map[string]any {
		t.Helper()
		out := map[string]any{}
		if code := do(method, path, body, &out); code >= 300 {
			t.Fatalf("%s %s: %d", method, path, code)
		}
		return out
	}
}

const testSHA = "0123456789abcdef0123456789abcdef01234567"

// With CheckEvents the simulator sends what GitHub sends an App with the checks permission when
// its check runs change: check_run created, check_run completed on the change to completed only,
// and check_suite completed, with the suite's summed-up conclusion, when that change left every
// check run of the App's suite for the commit completed. Each is a delivery the product's filter
// drops (eventdoc.Filter): GitHub's echo of the App's own writes.
func TestCheckRunEvents(t *testing.T) {
	t.Parallel()
	type step struct {
		run  int    // which check run (0, 1: created in order, on the same commit)
		body string // "" creates it queued; else a PATCH, or the creation's body
		want []string
	}
	tests := []struct {
		name   string
		off    bool
		steps  []step
		suites []string // conclusions of the check_suite completed deliveries, in order
	}{
		{"a run from queued to done", false, []step{
			{0, "", []string{"check_run created"}},
			{0, `{"status":"in_progress"}`, nil},
			{0, `{"conclusion":"success"}`, []string{"check_run completed", "check_suite completed"}},
			{0, `{"output":{"title":"t","summary":"s"}}`, nil}, // already completed: no echo
		}, []string{"success"}},
		{"created completed", false, []step{
			{0, `{"name":"c","head_sha":"` + testSHA + `","conclusion":"neutral"}`, []string{"check_run created", "check_run completed", "check_suite completed"}},
		}, []string{"neutral"}},
		{"the suite waits for its last run", false, []step{
			{0, "", []string{"check_run created"}},
			{1, "", []string{"check_run created"}},
			{0, `{"conclusion":"failure"}`, []string{"check_run completed"}},
			{1, `{"conclusion":"success"}`, []string{"check_run completed", "check_suite completed"}},
			{1, `{"status":"in_progress"}`, nil}, // reopened: the suite runs again
			{1, `{"conclusion":"success"}`, []string{"check_run completed", "check_suite completed"}},
		}, []string{"failure", "failure"}},
		{"off", true, []step{
			{0, "", nil},
			{0, `{"conclusion":"success"}`, nil},
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hook := newHookRecorder(t)
			s := New(Options{AppID: 1, CheckEvents: !tt.off, WebhookURL: hook.srv.URL, WebhookSecret: []byte("test-secret")})
			t.Cleanup(s.Close)
			api := simAPIOK(t, s)
			var ids []int64
			var want []string
			for i, st := range tt.steps {
				switch {
				case st.run == len(ids):
					body := st.body
					if body == "" {
						body = fmt.Sprintf(`{"name":"c%d","head_sha":"%s"}`, st.run, testSHA)
					}
					ids = append(ids, int64(api("POST", "/repos/octo/repo/check-runs", body)["id"].(float64)))
				default:
					api("PATCH", fmt.Sprintf("/repos/octo/repo/check-runs/%d", ids[st.run]), st.body)
				}
				want = append(want, st.want...)
				got := hook.wait(t, len(want))
				var names []string
				for _, d := range got {
					names = append(names, d.String())
				}
				// Senders deliver at once, so only the multiset of each step is fixed.
				slices.Sort(names)
				sortedWant := slices.Sorted(slices.Values(want))
				if !slices.Equal(names, sortedWant) {
					t.Fatalf("after step %d: deliveries %v, want %v", i, names, sortedWant)
				}
			}
			var suites []string
			for _, d := range hook.wait(t, len(want)) {
				doc, err := eventdoc.Normalize(d.event, d.payload)
				if err != nil {
					t.Fatalf("%s: %v\n%s", d, err, d.payload)
				}
				if reason, filtered := eventdoc.Filter(&doc); !filtered || reason != eventdoc.FilterActionUnused {
					t.Errorf("%s: filtered %v (%q), want dropped as %s", d, filtered, reason, eventdoc.FilterActionUnused)
				}
				if d.event == "check_suite" {
					var p struct {
						CheckSuite checkSuiteRef `json:"check_suite"`
					}
					_ = json.Unmarshal(d.payload, &p)
					if p.CheckSuite.Conclusion == nil || p.CheckSuite.App.ID != 1 || p.CheckSuite.ID != suiteID("octo/repo", testSHA) {
						t.Fatalf("check_suite %s", d.payload)
					}
					suites = append(suites, *p.CheckSuite.Conclusion)
				}
			}
			if !slices.Equal(suites, tt.suites) {
				t.Errorf("suite conclusions %v, want %v", suites, tt.suites)
			}
		})
	}
}

// A dispatched run's job is a check run of GitHub Actions' App: created queued when the run is
// requested, completed with it, and its suite completed then, besides the run's workflow_run webhooks. A
// re-run attempt has a job and a suite of its own.
func TestWorkflowJobCheckEvents(t *testing.T) {
	t.Parallel()
	hook := newHookRecorder(t)
	s := New(Options{AppID: 1, CheckEvents: true, WebhookURL: hook.srv.URL, WebhookSecret: []byte("test-secret"),
		RunDelay: 10 * time.Millisecond, TagCommit: func(string, string) string { return testSHA }})
	t.Cleanup(s.Close)
	api := simAPIOK(t, s)
	out := api("POST", "/repos/octo/repo/actions/workflows/release.yml/dispatches",
		`{"ref":"refs/tags/v1","inputs":{"release_run_id":"r","execution_attempt_id":"a"},"return_run_details":true}`)
	runID := int64(out["workflow_run_id"].(float64))
	first := hook.wait(t, 6)
	if err := s.RerunWorkflowRun(runID, "failure"); err != nil {
		t.Fatal(err)
	}
	all := hook.wait(t, 12)
	type job struct{ checkRun, suite int64 }
	jobs := map[int]job{} // by run attempt
	for i, d := range all {
		doc, err := eventdoc.Normalize(d.event, d.payload)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if d.event == "workflow_run" {
			continue
		}
		if reason, filtered := eventdoc.Filter(&doc); !filtered || reason != eventdoc.FilterActionUnused {
			t.Errorf("%s: filtered %v (%q), want dropped as %s", d, filtered, reason, eventdoc.FilterActionUnused)
		}
		var p struct {
			CheckRun *struct {
				ID         int64         `json:"id"`
				ExternalID string        `json:"external_id"`
				Status     string        `json:"status"`
				Conclusion *string       `json:"conclusion"`
				App        appRef        `json:"app"`
				CheckSuite checkSuiteRef `json:"check_suite"`
			} `json:"check_run"`
			CheckSuite *checkSuiteRef `json:"check_suite"`
		}
		_ = json.Unmarshal(d.payload, &p)
		attempt := 1
		if i >= len(first) {
			attempt = 2
		}
		want := map[int]string{1: "success", 2: "failure"}[attempt]
		suite := p.CheckSuite
		if p.CheckRun != nil {
			suite = &p.CheckRun.CheckSuite
			if p.CheckRun.App.ID != actionsAppID || p.CheckRun.ExternalID != fmt.Sprintf("job-%d-%d", runID, attempt) {
				t.Fatalf("%s: %s", d, d.payload)
			}
			if j := jobs[attempt]; j.checkRun != 0 && j.checkRun != p.CheckRun.ID {
				t.Fatalf("attempt %d's job is check run %d and %d", attempt, j.checkRun, p.CheckRun.ID)
			}
			jobs[attempt] = job{p.CheckRun.ID, jobs[attempt].suite}
			if d.action == "created" && (p.CheckRun.Status != "queued" || p.CheckRun.Conclusion != nil || suite.Status != "queued") {
				t.Fatalf("%s of attempt %d, want its job queued: %s", d, attempt, d.payload)
			}
			if d.action == "completed" && (p.CheckRun.Conclusion == nil || *p.CheckRun.Conclusion != want) {
				t.Fatalf("%s of attempt %d: %s", d, attempt, d.payload)
			}
		} else if suite.Conclusion == nil || *suite.Conclusion != want {
			t.Fatalf("%s of attempt %d: %s", d, attempt, d.payload)
		}
		if suite.App.ID != actionsAppID || suite.HeadSHA != testSHA {
			t.Fatalf("%s: suite %+v", d, suite)
		}
		if j := jobs[attempt]; j.suite != 0 && j.suite != suite.ID {
			t.Fatalf("attempt %d's suite is %d and %d", attempt, j.suite, suite.ID)
		}
		jobs[attempt] = job{jobs[attempt].checkRun, suite.ID}
	}
	var names []string
	for _, d := range all {
		names = append(names, d.String())
	}
	slices.Sort(names)
	want := []string{"check_run completed", "check_run completed", "check_run created", "check_run created",
		"check_suite completed", "check_suite completed", "workflow_run completed", "workflow_run completed",
		"workflow_run in_progress", "workflow_run in_progress", "workflow_run requested", "workflow_run requested"}
	if !slices.Equal(names, want) {
		t.Fatalf("deliveries %v, want %v", names, want)
	}
	if jobs[1].checkRun == jobs[2].checkRun || jobs[1].suite == jobs[2].suite {
		t.Fatalf("the attempts share a job or a suite: %+v", jobs)
	}
}
