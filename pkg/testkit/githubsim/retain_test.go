package githubsim

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// With RetainFinished, the oldest finished check runs and workflow runs beyond the bound are
// forgotten — from the API's lists and lookups too — and nothing unfinished ever is; a check run
// finished again counts from its last finish. Without it, everything is kept.
func TestRetainFinished(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		retain int
		// check runs to create (completed or not), in order; the indexes of those to reopen and
		// complete again afterwards; then how many more to create completed
		completed []bool
		again     []int
		more      int
		want      []int // indexes of the check runs still there, in id order
	}{
		{"keep everything", 0, []bool{true, true, true, true}, nil, 0, []int{0, 1, 2, 3}},
		{"oldest finished forgotten", 2, []bool{true, true, true, true}, nil, 0, []int{2, 3}},
		{"unfinished never forgotten", 1, []bool{false, true, false, true}, nil, 0, []int{0, 2, 3}},
		{"finished again counts from then", 2, []bool{true, true}, []int{0}, 1, []int{0, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := New(Options{AppID: 1, RetainFinished: tt.retain})
			t.Cleanup(s.Close)
			do := simAPI(t, s)
			var ids []int64
			create := func(i int, done bool) {
				body := fmt.Sprintf(`{"name":"c","head_sha":"abc","external_id":"%d"}`, i)
				if done {
					body = fmt.Sprintf(`{"name":"c","head_sha":"abc","external_id":"%d","conclusion":"success"}`, i)
				}
				var c CheckRun
				if code := do("POST", "/repos/octo/repo/check-runs", body, &c); code != 201 {
					t.Fatalf("create %d: %d", i, code)
				}
				ids = append(ids, c.ID)
			}
			for i, done := range tt.completed {
				create(i, done)
			}
			for _, i := range tt.again {
				if code := do("PATCH", fmt.Sprintf("/repos/octo/repo/check-runs/%d", ids[i]), `{"status":"in_progress"}`, nil); code != 200 {
					t.Fatalf("reopen %d: %d", i, code)
				}
				if code := do("PATCH", fmt.Sprintf("/repos/octo/repo/check-runs/%d", ids[i]), `{"conclusion":"failure"}`, nil); code != 200 {
					t.Fatalf("complete %d again: %d", i, code)
				}
			}
			for range tt.more {
				create(len(ids), true)
			}
			var want []int64
			for _, i := range tt.want {
				want = append(want, ids[i])
			}
			var kept []int64
			for _, c := range s.AllCheckRuns() {
				kept = append(kept, c.ID)
			}
			var listed struct {
				CheckRuns []CheckRun `json:"check_runs"`
			}
			do("GET", "/repos/octo/repo/commits/abc/check-runs?filter=all", "", &listed)
			var fromAPI []int64
			for _, c := range listed.CheckRuns {
				fromAPI = append(fromAPI, c.ID)
			}
			slices.Sort(fromAPI)
			if !slices.Equal(kept, want) || !slices.Equal(fromAPI, want) {
				t.Fatalf("kept %v, listed %v; want %v (created %v)", kept, fromAPI, want, ids)
			}
			for i, id := range ids {
				code := do("PATCH", fmt.Sprintf("/repos/octo/repo/check-runs/%d", id), `{"status":"completed","conclusion":"success"}`, nil)
				if slices.Contains(tt.want, i) != (code == 200) {
					t.Errorf("update of check run %d: %d", i, code)
				}
				if code == 200 {
					break // updates finish check runs again: one is enough to show the lookup
				}
			}
		})
	}
}

// Finished workflow runs are bounded the same way; their dispatch counts stay.
func TestRetainFinishedWorkflowRuns(t *testing.T) {
	t.Parallel()
	s := New(Options{AppID: 1, RetainFinished: 2})
	t.Cleanup(s.Close)
	for i := range 4 {
		id := s.id()
		run := &WorkflowRun{ID: id, Status: "in_progress", Inputs: map[string]string{"execution_attempt_id": fmt.Sprint(i)}}
		s.mu.Lock()
		s.runs[id] = run
		s.dispatches[fmt.Sprint(i)]++
		s.mu.Unlock()
		if i == 1 {
			continue // stays in progress
		}
		if err := s.FinishWorkflowRun(id, "success"); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var statuses []string
	for _, r := range s.runs {
		statuses = append(statuses, r.Inputs["execution_attempt_id"]+":"+r.Status)
	}
	slices.Sort(statuses)
	if want := []string{"1:in_progress", "2:completed", "3:completed"}; !slices.Equal(statuses, want) {
		t.Fatalf("runs %v, want %v", statuses, want)
	}
	if len(s.dispatches) != 4 {
		t.Fatalf("dispatch counts %v, want all 4", s.dispatches)
	}
}

// The delivery log, payloads and all, keeps the newest RetainFinished deliveries when that is
// set (journalCap otherwise): it was most of a load run's heap.
func TestRetainFinishedDeliveries(t *testing.T) {
	t.Parallel()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) }))
	t.Cleanup(hook.Close)
	for _, tt := range []struct{ retain, sent, want int }{{0, 5, 5}, {3, 5, 3}, {3, 2, 2}} {
		s := New(Options{AppID: 1, RetainFinished: tt.retain, WebhookURL: hook.URL, WebhookSecret: []byte("test-secret")})
		t.Cleanup(s.Close)
		var guids []string
		for i := range tt.sent {
			guid := fmt.Sprintf("guid-%d", i)
			guids = append(guids, guid)
			if i%2 == 1 { // recorded as tests record them
				s.RecordDelivery(guid, "ping", "", http.StatusAccepted, []byte(`{}`), time.Now())
				continue
			}
			if code := s.send(t.Context(), clientPoster{http.DefaultClient}, guid, "ping", "", []byte(`{}`), false); code != http.StatusAccepted {
				t.Fatalf("send %d: %d", i, code)
			}
		}
		var kept []string
		for _, d := range s.Deliveries() {
			kept = append(kept, d.GUID)
		}
		if want := guids[tt.sent-tt.want:]; !slices.Equal(kept, want) {
			t.Errorf("retain %d, %d sent: kept %v, want the newest %v", tt.retain, tt.sent, kept, want)
		}
	}
}
