package checkrun

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func at(s string) *time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return &t
}

// TestRenderGolden renders every state and compares the whole output (status, conclusion,
// title, summary, text, details URL, actions) with testdata/<state>.golden.
func TestRenderGolden(t *testing.T) {
	t.Parallel()
	base := State{Tag: "v1.2.3", HeadSHA: "6dcb09b5b57875f334f61aebed695e2e4193db5e", WorkflowFile: "release.yml"}
	url := "https://github.com/octo-org/hello-world/actions/runs/"
	done := Attempt{Number: 1, Status: "failed", WorkflowRunID: 901, WorkflowRunURL: url + "901", RunAttempt: 1, Conclusion: "failure",
		StartedAt: at("2026-12-01T10:00:00Z"), CompletedAt: at("2026-12-01T10:04:31Z")}
	with := func(state string, f func(*State)) State {
		s := base
		s.State = state
		f(&s)
		return s
	}
	cases := map[string]State{
		"dispatching": with(StateDispatching, func(s *State) { s.Attempts = []Attempt{{Number: 1, Status: "dispatching"}} }),
		"running": with(StateRunning, func(s *State) {
			s.DetailsURL = url + "902"
			s.Attempts = []Attempt{{Number: 1, Status: "running", WorkflowRunID: 902, WorkflowRunURL: url + "902", RunAttempt: 1, StartedAt: at("2026-12-01T10:00:00Z")}}
		}),
		"succeeded": with(StateSucceeded, func(s *State) {
			s.DetailsURL = url + "903"
			s.Attempts = []Attempt{done, {Number: 2, Status: "succeeded", WorkflowRunID: 903, WorkflowRunURL: url + "903", RunAttempt: 1,
				Conclusion: "success", StartedAt: at("2026-12-01T11:00:00Z"), CompletedAt: at("2026-12-01T11:02:05Z")}}
			s.AttemptsTotal = 2
		}),
		"failed": with(StateFailed, func(s *State) {
			s.DetailsURL = url + "901"
			d := done
			d.Conclusion = "timed_out"
			s.Attempts = []Attempt{d}
		}),
		"cancelled": with(StateCancelled, func(s *State) {
			s.Attempts = []Attempt{{Number: 1, Status: "cancelled", WorkflowRunID: 904, RunAttempt: 1, Conclusion: "cancelled",
				StartedAt: at("2026-12-01T10:00:00Z"), CompletedAt: at("2026-12-01T10:00:09Z")}}
		}),
		"dispatch_failed": with(StateDispatchFailed, func(s *State) {
			s.Retry = true
			s.Reason = "dispatch_workflow: 422 Workflow does not have 'workflow_dispatch' trigger"
			s.Attempts = []Attempt{{Number: 1, Status: "dispatching"}}
		}),
		"dispatch_unknown": with(StateDispatchUnknown, func(s *State) {
			s.Reason = "dispatch_workflow: 502 Bad Gateway"
			s.Attempts = []Attempt{{Number: 1, Status: "dispatching"}}
		}),
		"retrying": with(StateRetrying, func(s *State) {
			s.Notice = "Retry requested by @octocat: the dispatch is sent again."
			s.Attempts = []Attempt{{Number: 1, Status: "dispatching"}}
		}),
		"rerun_refused": with(StateRunning, func(s *State) {
			s.Notice = "Re-run requested by @octocat while the release is still running: nothing new was started."
			s.DetailsURL = url + "905"
			s.Attempts = []Attempt{{Number: 1, Status: "running", WorkflowRunID: 905, WorkflowRunURL: url + "905", RunAttempt: 2, StartedAt: at("2026-12-01T10:00:00Z")}}
		}),
		"actions_rerun": with(StateSucceeded, func(s *State) {
			s.DetailsURL = url + "906"
			s.Attempts = []Attempt{{Number: 1, Status: "succeeded", WorkflowRunID: 906, WorkflowRunURL: url + "906", RunAttempt: 2, Conclusion: "success",
				StartedAt: at("2026-12-01T10:00:00Z"), CompletedAt: at("2026-12-01T10:30:00Z")}}
		}),
		"other_commit": with(StateFailed, func(s *State) {
			s.DetailsURL = url + "907"
			s.Notice = "The workflow ran commit 0123456789abcdef0123456789abcdef01234567, not 6dcb09b5b57875f334f61aebed695e2e4193db5e, " +
				"the commit this release run was started for (its tag was moved just before the dispatch; it concluded success), " +
				"so this release is failed. Push a new tag to release that commit."
			s.Attempts = []Attempt{{Number: 1, Status: "failed", WorkflowRunID: 907, WorkflowRunURL: url + "907", RunAttempt: 1, Conclusion: "success",
				StartedAt: at("2026-12-01T10:00:00Z"), CompletedAt: at("2026-12-01T10:03:00Z")}}
		}),
		"history_cut": with(StateFailed, func(s *State) {
			s.Attempts = []Attempt{done}
			s.AttemptsTotal = 14
		}),
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := json.MarshalIndent(Render(s), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if string(want) != string(got)+"\n" {
				t.Errorf("%s differs from the rendering:\n%s", golden, got)
			}
			o := Render(s)
			if !strings.Contains(o.Title, s.Tag) {
				t.Errorf("title %q lost the tag", o.Title)
			}
			if (o.Status == "completed") != (o.Conclusion != "") {
				t.Errorf("status %s with conclusion %q", o.Status, o.Conclusion)
			}
			if len(o.Actions) > MaxActions {
				t.Errorf("%d actions", len(o.Actions))
			}
			for _, a := range o.Actions {
				if utf8.RuneCountInString(a.Label) > MaxActionLabel || utf8.RuneCountInString(a.Identifier) > MaxActionIdentifier ||
					utf8.RuneCountInString(a.Description) > MaxActionDescription {
					t.Errorf("action %+v beyond GitHub's limits", a)
				}
			}
		})
	}
}

// TestRenderBoundsOutput: a reason and notice of any length leave summary and text within
// GitHub's 65,535 characters, ending with the marker.
func TestRenderBoundsOutput(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 70000)
	o := Render(State{State: StateDispatchFailed, Tag: "v1", Reason: long, Notice: long})
	if n := utf8.RuneCountInString(o.Summary); n != MaxOutput {
		t.Fatalf("summary is %d characters, want %d", n, MaxOutput)
	}
	if !strings.HasSuffix(o.Summary, TruncationMarker) || !utf8.ValidString(o.Summary) {
		t.Fatal("summary not cut at a character with the marker")
	}
	if Truncate("short") != "short" {
		t.Fatal("a short text was changed")
	}
}

func FuzzTruncate(f *testing.F) {
	f.Add("abc", 1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		s = strings.Repeat(s, 1+abs(n)%70000/max(1, len(s)))
		out := Truncate(s)
		if utf8.RuneCountInString(out) > MaxOutput && utf8.ValidString(s) {
			t.Fatalf("%d characters", utf8.RuneCountInString(out))
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
