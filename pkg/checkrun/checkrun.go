// Package checkrun renders a release run's check run — its status, conclusion, title, summary,
// text, details URL and requested actions — from the state a github.check_run.complete effect
// carries. The SQL functions that enqueue the effect write only facts (state, tag, commit,
// attempts); the words are chosen here, at delivery, so that they are tested as Go (golden files)
// and bounded by GitHub's limits whatever the facts hold.
package checkrun

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// GitHub's limits for a check run (REST API, "Create a check run" / "Update a check run").
const (
	// MaxOutput is the maximum length of output.summary and output.text, in characters.
	MaxOutput = 65535
	// MaxActions is the maximum number of requested actions on one check run.
	MaxActions = 3
	// MaxActionLabel and MaxActionIdentifier bound an action's label and identifier;
	// MaxActionDescription its description.
	MaxActionLabel       = 20
	MaxActionIdentifier  = 20
	MaxActionDescription = 40
)

// TruncationMarker ends an output field cut to MaxOutput.
const TruncationMarker = "\n\n… (truncated by BoardReadyOps: see `brops release-runs show` for the rest)"

// ActionRetry is the identifier of the "Retry" requested action.
const ActionRetry = "retry"

// States a check-run effect carries (payload "state").
const (
	StateDispatching     = "dispatching"      // waiting for GitHub to accept the workflow dispatch
	StateRunning         = "running"          // the workflow run is known and not finished
	StateSucceeded       = "succeeded"        // the workflow run concluded success
	StateFailed          = "failed"           // it concluded anything but success or cancelled
	StateCancelled       = "cancelled"        // it was cancelled
	StateDispatchFailed  = "dispatch_failed"  // the dispatch dead-lettered: it never started
	StateDispatchUnknown = "dispatch_unknown" // the dispatch awaits reconciliation
	StateRetrying        = "retrying"         // a Retry replayed the dead letter
)

// Attempt is one execution attempt of the run, as the payload lists it.
type Attempt struct {
	Number         int        `json:"number"`
	Status         string     `json:"status"`
	WorkflowRunID  int64      `json:"workflow_run_id,omitempty"`
	WorkflowRunURL string     `json:"workflow_run_url,omitempty"`
	RunAttempt     int        `json:"run_attempt,omitempty"`
	Conclusion     string     `json:"conclusion,omitempty"`
	StartedAt      *time.Time `json:"started_at,omitempty"`
	CompletedAt    *time.Time `json:"completed_at,omitempty"`
}

// State is what a check-run effect's payload says of the run.
type State struct {
	State        string `json:"state"`
	Tag          string `json:"tag"`
	HeadSHA      string `json:"head_sha"`
	WorkflowFile string `json:"workflow_file"`
	// Reason is why the dispatch failed or is in doubt (the effect's last error).
	Reason string `json:"reason,omitempty"`
	// Notice answers a request (a Re-run or Retry that started nothing), with who asked.
	Notice string `json:"notice,omitempty"`
	// Retry offers the "Retry" requested action.
	Retry bool `json:"retry,omitempty"`
	// DetailsURL is the current attempt's workflow run page, once known.
	DetailsURL    string    `json:"details_url,omitempty"`
	Attempts      []Attempt `json:"attempts,omitempty"`
	AttemptsTotal int       `json:"attempts_total,omitempty"`
}

// Action is a requested action button.
type Action struct {
	Label       string `json:"label"`
	Description string `json:"description"`
	Identifier  string `json:"identifier"`
}

// Output is the check run as GitHub is asked to show it.
type Output struct {
	Status     string // in_progress or completed
	Conclusion string // set when Status is completed
	Title      string
	Summary    string
	Text       string
	DetailsURL string
	// Actions is the full list of buttons (an empty list removes earlier ones).
	Actions []Action
}

// Render turns a state into the check run's output.
func Render(s State) Output {
	o := Output{Status: "in_progress", DetailsURL: s.DetailsURL, Actions: []Action{}}
	tag := s.Tag
	if tag == "" {
		tag = "(unknown tag)"
	}
	var lead, waiting string
	rerun := "Press **Re-run** to start another attempt."
	switch s.State {
	case StateDispatching:
		o.Title = fmt.Sprintf("Release %s: starting", tag)
		lead = fmt.Sprintf("BoardReadyOps is dispatching %s.", workflow(s))
		waiting = "GitHub to accept the workflow dispatch."
	case StateRetrying:
		o.Title = fmt.Sprintf("Release %s: retrying", tag)
		lead = fmt.Sprintf("BoardReadyOps is dispatching %s again.", workflow(s))
		waiting = "GitHub to accept the workflow dispatch."
	case StateRunning:
		o.Title = fmt.Sprintf("Release %s: running", tag)
		lead = "The release workflow is running" + runLink(s) + "."
		waiting = "the workflow run to complete."
	case StateSucceeded:
		o.Status, o.Conclusion = "completed", "success"
		o.Title = fmt.Sprintf("Release %s: succeeded", tag)
		lead = "The release workflow succeeded" + runLink(s) + "."
	case StateCancelled:
		o.Status, o.Conclusion = "completed", "cancelled"
		o.Title = fmt.Sprintf("Release %s: cancelled", tag)
		lead = "The release workflow was cancelled" + runLink(s) + "."
	case StateDispatchFailed:
		o.Status, o.Conclusion = "completed", "failure"
		o.Title = fmt.Sprintf("Release %s: could not start", tag)
		lead = "The release workflow could not be started: " + oneLine(s.Reason, "no reason was recorded") + "."
		if s.Retry {
			lead += "\n\nOnce the cause is fixed (the workflow file, its `workflow_dispatch` trigger, the App's permissions), press **Retry** above to start it."
		}
		waiting = "someone to press Retry, or an operator to replay the dispatch."
	case StateDispatchUnknown:
		o.Title = fmt.Sprintf("Release %s: start unknown", tag)
		lead = "It is not known whether the release workflow started; an operator has been asked to check." +
			"\n\nBoardReadyOps does not start it again by itself: a second start could release twice."
		if s.Reason != "" {
			lead += "\n\nWhat happened: " + oneLine(s.Reason, "") + "."
		}
		waiting = "an operator to find out whether the workflow run exists (`brops reconcile`)."
	default: // failed, and anything unknown is shown as a failure
		o.Status, o.Conclusion = "completed", "failure"
		o.Title = fmt.Sprintf("Release %s: failed", tag)
		lead = "The release workflow failed" + runLink(s) + conclusionNote(s) + "."
		if a := current(s); a != nil && a.Conclusion == "success" {
			// A workflow that succeeded and still failed its run: it ran another commit than the
			// run's (docs/lifecycle.md, migrations 00079 and 00080, the only transitions that write
			// this), which the notice names. Said here too: a later answer replaces the notice.
			lead = "The release workflow concluded `success`" + runLink(s) + ", but it ran another commit than this release run's " +
				"(its tag was moved just before the dispatch), so this release run is failed."
			rerun = "**Re-run** dispatches the tag again only while it points at this commit."
		}
	}
	if s.Retry {
		o.Actions = []Action{{Label: "Retry", Description: "Start the release workflow again", Identifier: ActionRetry}}
	}

	var b strings.Builder
	b.WriteString(lead)
	if s.Notice != "" {
		b.WriteString("\n\n> " + oneLine(s.Notice, ""))
	}
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "- **Tag:** `%s`\n", tag)
	if s.HeadSHA != "" {
		fmt.Fprintf(&b, "- **Commit:** `%s`\n", s.HeadSHA)
	}
	if s.WorkflowFile != "" {
		fmt.Fprintf(&b, "- **Workflow:** `%s`\n", s.WorkflowFile)
	}
	if waiting != "" {
		fmt.Fprintf(&b, "- **Waiting for:** %s\n", waiting)
	} else {
		b.WriteString("- **Waiting for:** nothing; the release run is finished. " + rerun + "\n")
	}
	o.Summary = Truncate(strings.TrimRight(b.String(), "\n"))
	o.Text = Truncate(history(s))
	return o
}

func workflow(s State) string {
	if s.WorkflowFile == "" {
		return "the release workflow"
	}
	return fmt.Sprintf("the release workflow `%s`", s.WorkflowFile)
}

func runLink(s State) string {
	a := current(s)
	if a == nil || a.WorkflowRunID == 0 {
		return ""
	}
	label := fmt.Sprintf("workflow run %d", a.WorkflowRunID)
	if a.RunAttempt > 1 {
		label += fmt.Sprintf(", run attempt %d", a.RunAttempt)
	}
	if a.WorkflowRunURL != "" {
		return fmt.Sprintf(" ([%s](%s))", label, a.WorkflowRunURL)
	}
	return " (" + label + ")"
}

func conclusionNote(s State) string {
	if a := current(s); a != nil && a.Conclusion != "" && a.Conclusion != "failure" {
		return fmt.Sprintf(": it concluded `%s`", a.Conclusion)
	}
	return ""
}

// current is the newest attempt listed (the payload lists them oldest first).
func current(s State) *Attempt {
	if len(s.Attempts) == 0 {
		return nil
	}
	return &s.Attempts[len(s.Attempts)-1]
}

func history(s State) string {
	if len(s.Attempts) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("### Attempts\n\n| Attempt | Workflow run | Conclusion | Duration |\n|---|---|---|---|\n")
	if omitted := s.AttemptsTotal - len(s.Attempts); omitted > 0 {
		fmt.Fprintf(&b, "| … | %d earlier attempts not listed | | |\n", omitted)
	}
	for _, a := range s.Attempts {
		run := "—"
		if a.WorkflowRunID != 0 {
			run = fmt.Sprintf("%d", a.WorkflowRunID)
			if a.WorkflowRunURL != "" {
				run = fmt.Sprintf("[%d](%s)", a.WorkflowRunID, a.WorkflowRunURL)
			}
			if a.RunAttempt > 1 {
				run += fmt.Sprintf(" (run attempt %d)", a.RunAttempt)
			}
		}
		conclusion := a.Conclusion
		if conclusion == "" {
			conclusion = a.Status
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s |\n", a.Number, run, cell(conclusion), duration(a))
	}
	return strings.TrimRight(b.String(), "\n")
}

func duration(a Attempt) string {
	if a.StartedAt == nil || a.CompletedAt == nil {
		return "—"
	}
	return a.CompletedAt.Sub(*a.StartedAt).Round(time.Second).String()
}

// cell keeps a value from breaking the table.
func cell(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ", "\r", " ").Replace(s)
}

func oneLine(s, def string) string {
	s = strings.TrimSpace(strings.NewReplacer("\r", " ", "\n", " ").Replace(s))
	s = strings.TrimRight(s, ".")
	if s == "" {
		return def
	}
	return s
}

// Truncate cuts s to MaxOutput characters, ending it with TruncationMarker when it was longer.
func Truncate(s string) string {
	if utf8.RuneCountInString(s) <= MaxOutput {
		return s
	}
	keep := MaxOutput - utf8.RuneCountInString(TruncationMarker)
	n := 0
	for i := range s {
		if n == keep {
			return s[:i] + TruncationMarker
		}
		n++
	}
	return s
}
