package githubsim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// GitHub's limits for a check run's requested actions and output (REST API, "Create a check
// run": actions "maximum of 3", label and identifier 20 characters, description 40; output
// summary and text 65535 characters).
const (
	MaxActions           = 3
	MaxActionLabel       = 20
	MaxActionIdentifier  = 20
	MaxActionDescription = 40
	MaxOutputText        = 65535
)

// CheckRunAction is a requested action button on a check run.
type CheckRunAction struct {
	Label       string `json:"label"`
	Description string `json:"description"`
	Identifier  string `json:"identifier"`
}

func validateActions(actions []CheckRunAction) string {
	if len(actions) > MaxActions {
		return fmt.Sprintf("Invalid request.\n\nFor 'properties/actions', %d items is more than the maximum of %d.", len(actions), MaxActions)
	}
	for _, a := range actions {
		switch {
		case a.Label == "" || a.Identifier == "" || a.Description == "":
			return "Invalid request.\n\n\"label\", \"description\" and \"identifier\" are required for each action."
		case utf8.RuneCountInString(a.Label) > MaxActionLabel:
			return fmt.Sprintf("Invalid request.\n\nFor 'properties/label', %q is too long (maximum is %d characters).", a.Label, MaxActionLabel)
		case utf8.RuneCountInString(a.Identifier) > MaxActionIdentifier:
			return fmt.Sprintf("Invalid request.\n\nFor 'properties/identifier', %q is too long (maximum is %d characters).", a.Identifier, MaxActionIdentifier)
		case utf8.RuneCountInString(a.Description) > MaxActionDescription:
			return fmt.Sprintf("Invalid request.\n\nFor 'properties/description', %q is too long (maximum is %d characters).", a.Description, MaxActionDescription)
		}
	}
	return ""
}

func validURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

// RequestAction presses the check run's requested-action button identifier as the user login:
// GitHub sends check_run requested_action, with requested_action.identifier and the user as
// sender, to the App that created the check run only. Only a button the check run offers can be
// pressed.
func (s *Simulator) RequestAction(ctx context.Context, checkRunID int64, identifier, login string) error {
	s.mu.Lock()
	c := s.checkRuns[checkRunID]
	offered := c != nil && slices.ContainsFunc(c.Actions, func(a CheckRunAction) bool { return a.Identifier == identifier })
	s.mu.Unlock()
	if !offered {
		return fmt.Errorf("check run %d offers no action %q", checkRunID, identifier)
	}
	return s.sendCheckRunEvent(ctx, checkRunID, "requested_action", map[string]any{"identifier": identifier}, login)
}

// Rerequest presses "Re-run" on the check run as the user login (check_run rerequested; GitHub
// offers it on a completed check run).
func (s *Simulator) Rerequest(ctx context.Context, checkRunID int64, login string) error {
	return s.sendCheckRunEvent(ctx, checkRunID, "rerequested", nil, login)
}

// RerequestSuite presses "Re-run all checks" (or "Re-run failed checks", which sends the same)
// as the user login on the App's check suite of the check run's commit: GitHub sends check_suite
// rerequested to the App that owns the suite.
func (s *Simulator) RerequestSuite(ctx context.Context, checkRunID int64, login string) error {
	return s.sendCheckRunPress(ctx, checkRunID, "check_suite", "rerequested", login, func(c *CheckRun, body map[string]any) {
		body["check_suite"] = map[string]any{"id": RepositoryID(c.repo + "@" + c.HeadSHA), "head_branch": nil, "head_sha": c.HeadSHA,
			"status": "queued", "conclusion": nil, "app": map[string]any{"id": c.App.ID, "slug": c.App.Slug}}
	})
}

func (s *Simulator) sendCheckRunEvent(ctx context.Context, checkRunID int64, action string, requested map[string]any, login string) error {
	return s.sendCheckRunPress(ctx, checkRunID, "check_run", action, login, func(c *CheckRun, body map[string]any) {
		body["check_run"] = c
		if requested != nil {
			body["requested_action"] = requested
		}
	})
}

// sendCheckRunPress sends the event GitHub sends when the user login presses a button of the
// check run (or of its suite): the repository, installation and sender, and what fill adds.
func (s *Simulator) sendCheckRunPress(ctx context.Context, checkRunID int64, event, action, login string, fill func(c *CheckRun, body map[string]any)) error {
	if s.opts.WebhookURL == "" {
		return fmt.Errorf("no webhook URL configured")
	}
	s.mu.Lock()
	c := s.checkRuns[checkRunID]
	var payload []byte
	if c != nil {
		repo := s.repos[strings.ToLower(c.repo)]
		owner, name, _ := strings.Cut(c.repo, "/")
		body := map[string]any{
			"action": action,
			"repository": map[string]any{"id": repo.id, "name": name, "full_name": repo.fullName, "private": true,
				"owner": map[string]any{"login": owner, "type": "Organization"}, "default_branch": "main"},
			"installation": map[string]any{"id": repo.installationID},
			"sender":       map[string]any{"login": login, "id": int64(len(login)) + 583000, "type": "User"},
		}
		fill(c, body)
		payload, _ = json.Marshal(body)
	}
	s.mu.Unlock()
	if payload == nil {
		return fmt.Errorf("check run %d does not exist", checkRunID)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	if code := s.send(ctx, clientPoster{client}, newGUID(), event, action, payload, false); code < 200 || code > 299 {
		return fmt.Errorf("%s %s webhook answered %d", event, action, code)
	}
	return nil
}

// RerunWorkflowRun re-runs a finished workflow run as the Actions UI's "Re-run all jobs" does:
// the same run id with the next run_attempt, played again (requested, in_progress, completed
// with conclusion) as workflow_run webhooks.
func (s *Simulator) RerunWorkflowRun(runID int64, conclusion string) error {
	s.mu.Lock()
	run := s.runs[runID]
	if run == nil || run.Status != "completed" {
		s.mu.Unlock()
		return fmt.Errorf("workflow run %d is not a completed run", runID)
	}
	run.RunAttempt++
	run.Status, run.Conclusion, run.CheckSuiteID = "queued", nil, s.id() // each attempt has a suite of its own
	s.mu.Unlock()
	if s.opts.WebhookURL != "" {
		s.playRun(runID, conclusion)
	}
	return nil
}

// SetWorkflow replaces one workflow file of a repository (a developer fixing the release
// workflow, or breaking it).
func (s *Simulator) SetWorkflow(fullName, file string, wf Workflow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if repo := s.repos[strings.ToLower(fullName)]; repo != nil {
		repo.workflows[file] = wf
	}
}

// FinishWorkflowRun ends a run without sending its workflow_run webhook: the run finished while
// BoardReadyOps was not listening.
func (s *Simulator) FinishWorkflowRun(runID int64, conclusion string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	run := s.runs[runID]
	if run == nil {
		return fmt.Errorf("workflow run %d does not exist", runID)
	}
	run.Status, run.Conclusion, run.UpdatedAt = "completed", &conclusion, s.now().UTC().Truncate(time.Second)
	s.finishedRunLocked(run)
	return nil
}
