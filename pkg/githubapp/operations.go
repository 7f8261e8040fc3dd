package githubapp

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
)

// Operation names: span names, metric labels and error prefixes (a closed set).
const (
	OpListCheckRuns    = "list_check_runs"
	OpCreateCheckRun   = "create_check_run"
	OpUpdateCheckRun   = "update_check_run"
	OpDispatchWorkflow = "dispatch_workflow"
	OpListWorkflowRuns = "list_workflow_runs"
	OpGetWorkflowRun   = "get_workflow_run"
	// OpGetCollaboratorPermission reads a user's permission on a repository.
	OpGetCollaboratorPermission = "get_collaborator_permission"
	// OpGetTagCommit reads the commit a tag points at now.
	OpGetTagCommit   = "get_tag_commit"
	OpListDeliveries = "list_deliveries"
	OpRedeliver      = "redeliver"
)

// maxCheckRunPages bounds the search for an existing check run (100 per page).
const maxCheckRunPages = 10

// CheckRun identifies the check run of a release run.
type CheckRun struct {
	InstallationID int64
	Repository     string // owner/name
	HeadSHA        string
	Name           string
	ExternalID     string // the release run's check-run identity (pkg/checkrun.ExternalID)
	// EarlierExternalIDs are other external_ids that identify the same release run's check run
	// (the release run id, written before migration 00031): a check run carrying one is reused,
	// one carrying ExternalID preferred. A new check run always carries ExternalID.
	EarlierExternalIDs []string
	Title, Summary     string
}

// FindOrCreateCheckRun is replay-safe check-run creation: it lists the commit's check runs with
// this name of this App and reuses the one whose external_id matches (ExternalID first, else one of
// EarlierExternalIDs); only when none does it creates one. It
// returns the check run id and whether it was created now. The search runs on every call, the
// first attempt too: after a point-in-time restore the database may not remember a creation that
// GitHub does, and one GET per release run is what that safety costs.
func (c *Client) FindOrCreateCheckRun(ctx context.Context, cr CheckRun) (int64, bool, error) {
	owner, repo, err := splitRepo(cr.Repository)
	if err != nil {
		return 0, false, err
	}
	// Only our App's check runs: another App, or a workflow whose token has checks: write, can create
	// one with our name and external_id (both derive from public data), and adopting it would hand
	// the release's check to whoever made it (our updates of it are refused).
	opts := &github.ListCheckRunsOptions{CheckName: &cr.Name, AppID: &c.cfg.AppID, Filter: github.String("all"),
		ListOptions: github.ListOptions{PerPage: 100}}
	var earlier int64 // the first check run found under an earlier external_id
	for page := 0; page < maxCheckRunPages; page++ {
		var res *github.ListCheckRunsResults
		var next int
		err := c.call(ctx, OpListCheckRuns, cr.InstallationID, func(ctx context.Context, gh *github.Client) (*github.Response, error) {
			var resp *github.Response
			var err error
			res, resp, err = gh.Checks.ListCheckRunsForRef(ctx, owner, repo, cr.HeadSHA, opts)
			if resp != nil {
				next = resp.NextPage
			}
			return resp, err
		})
		if err != nil {
			return 0, false, err
		}
		for _, run := range res.CheckRuns {
			if run.GetName() != cr.Name || run.GetApp().GetID() != c.cfg.AppID {
				continue
			}
			if run.GetExternalID() == cr.ExternalID {
				return run.GetID(), false, nil
			}
			if earlier == 0 && slices.Contains(cr.EarlierExternalIDs, run.GetExternalID()) {
				earlier = run.GetID()
			}
		}
		if next == 0 {
			break
		}
		opts.Page = next
	}
	if earlier != 0 {
		return earlier, false, nil
	}
	var created *github.CheckRun
	err = c.call(ctx, OpCreateCheckRun, cr.InstallationID, func(ctx context.Context, gh *github.Client) (*github.Response, error) {
		var resp *github.Response
		var err error
		created, resp, err = gh.Checks.CreateCheckRun(ctx, owner, repo, github.CreateCheckRunOptions{
			Name: cr.Name, HeadSHA: cr.HeadSHA, ExternalID: &cr.ExternalID, Status: github.String("in_progress"),
			Output: &github.CheckRunOutput{Title: &cr.Title, Summary: &cr.Summary},
		})
		return resp, err
	})
	if err != nil {
		return 0, false, err
	}
	return created.GetID(), true, nil
}

// Dispatch is a workflow_dispatch request.
type Dispatch struct {
	InstallationID int64
	Repository     string
	WorkflowFile   string
	Ref            string
	Inputs         map[string]string
}

// DispatchedRun is the workflow run GitHub created for a dispatch.
type DispatchedRun struct {
	ID      int64
	HTMLURL string // the run's page, for the check run's details_url
}

// DispatchWorkflow is DispatchWorkflowRun returning only the run's id.
func (c *Client) DispatchWorkflow(ctx context.Context, d Dispatch) (int64, error) {
	run, err := c.DispatchWorkflowRun(ctx, d)
	return run.ID, err
}

// DispatchWorkflowRun dispatches the workflow and returns the run GitHub created. It asks
// for the run's details (return_run_details: true), a field go-github v62 predates, so the request
// is built with NewRequest and Do. A 204 (no details) is ErrNoRunDetails, classed MaybeDelivered:
// GitHub did create a run, but which one is unknown.
func (c *Client) DispatchWorkflowRun(ctx context.Context, d Dispatch) (DispatchedRun, error) {
	owner, repo, err := splitRepo(d.Repository)
	if err != nil {
		return DispatchedRun{}, err
	}
	var out struct {
		WorkflowRunID int64  `json:"workflow_run_id"`
		RunURL        string `json:"run_url"`
		HTMLURL       string `json:"html_url"`
	}
	var status int
	err = c.call(ctx, OpDispatchWorkflow, d.InstallationID, func(ctx context.Context, gh *github.Client) (*github.Response, error) {
		req, err := gh.NewRequest(http.MethodPost, fmt.Sprintf("repos/%s/%s/actions/workflows/%s/dispatches",
			url.PathEscape(owner), url.PathEscape(repo), url.PathEscape(d.WorkflowFile)), map[string]any{
			"ref": d.Ref, "inputs": d.Inputs, "return_run_details": true,
		})
		if err != nil {
			return nil, err
		}
		resp, err := gh.Do(ctx, req, &out)
		if resp != nil {
			status = resp.StatusCode
		}
		return resp, err
	})
	if err != nil {
		return DispatchedRun{}, err
	}
	if status == http.StatusNoContent || out.WorkflowRunID <= 0 {
		return DispatchedRun{}, &Error{Op: OpDispatchWorkflow, Class: MaybeDelivered, Status: status, Err: ErrNoRunDetails}
	}
	return DispatchedRun{ID: out.WorkflowRunID, HTMLURL: out.HTMLURL}, nil
}

// ErrTagMissing: GitHub knows no tag of that name in the repository (it answers 422, "No commit
// found for SHA: …"). The error returned with it is Rejected. A 404 is not this: the repository is
// gone or the installation cannot see it.
var ErrTagMissing = errors.New("the tag does not exist")

// TagCommit reads the commit tag points at now (GET /repos/{owner}/{repo}/commits/tags/{tag} with
// the sha media type; read-only, replay-safe). An annotated tag is peeled to its commit. expected,
// when set, is sent as the ETag (If-None-Match), as GitHub's docs describe for checking that a
// reference still points at a known commit: GitHub then answers 304, which does not count against
// the installation's primary rate limit (it still counts towards the secondary limits), and
// TagCommit returns expected. A tag GitHub does not know (422) is an *Error of class Rejected
// wrapping ErrTagMissing.
func (c *Client) TagCommit(ctx context.Context, installationID int64, repository, tag, expected string) (string, error) {
	owner, repo, err := splitRepo(repository)
	if err != nil {
		return "", err
	}
	if tag == "" {
		return "", fmt.Errorf("%s: empty tag", OpGetTagCommit)
	}
	var sha string
	err = c.call(ctx, OpGetTagCommit, installationID, func(ctx context.Context, gh *github.Client) (*github.Response, error) {
		// go-github's RepositoriesService.GetCommitSHA1 sends this request; it escapes the ref as
		// one path segment per part, as here, but returns a 304 as an error.
		parts := strings.Split(tag, "/")
		for i := range parts {
			parts[i] = url.PathEscape(parts[i])
		}
		req, err := gh.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/%s/commits/tags/%s",
			url.PathEscape(owner), url.PathEscape(repo), strings.Join(parts, "/")), nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/vnd.github.sha")
		if expected != "" {
			req.Header.Set("If-None-Match", `"`+expected+`"`)
		}
		var body strings.Builder
		resp, err := gh.Do(ctx, req, &body)
		if resp != nil && resp.StatusCode == http.StatusNotModified {
			sha = expected
			return resp, nil
		}
		sha = strings.TrimSpace(body.String())
		return resp, err
	})
	var e *Error
	if errors.As(err, &e) && e.Class == Rejected && e.Status == http.StatusUnprocessableEntity {
		e.Err = fmt.Errorf("tag %s: %w (%w)", tag, ErrTagMissing, e.Err)
		return "", e
	}
	if err != nil {
		return "", err
	}
	if !isCommitSHA(sha) {
		return "", &Error{Op: OpGetTagCommit, Class: Rejected, Status: http.StatusOK,
			Err: fmt.Errorf("tag %s: the answer %.50q is not a commit SHA", tag, sha)}
	}
	return strings.ToLower(sha), nil
}

// isCommitSHA reports whether s is a 40- or 64-digit hexadecimal object name (SHA-1 or SHA-256).
func isCommitSHA(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && (len(s) == 40 || len(s) == 64)
}

// Completion completes a check run.
type Completion struct {
	InstallationID int64
	Repository     string
	CheckRunID     int64
	Name           string
	Conclusion     string
	Title, Summary string
	DetailsURL     string
}

// CompleteCheckRun sets the check run to completed with the conclusion (replay-safe: completing
// twice leaves the same state).
func (c *Client) CompleteCheckRun(ctx context.Context, cc Completion) error {
	owner, repo, err := splitRepo(cc.Repository)
	if err != nil {
		return err
	}
	opts := github.UpdateCheckRunOptions{
		Name: cc.Name, Status: github.String("completed"), Conclusion: &cc.Conclusion,
		CompletedAt: &github.Timestamp{Time: time.Now().UTC()},
		Output:      &github.CheckRunOutput{Title: &cc.Title, Summary: &cc.Summary},
	}
	if cc.DetailsURL != "" {
		opts.DetailsURL = &cc.DetailsURL
	}
	return c.call(ctx, OpUpdateCheckRun, cc.InstallationID, func(ctx context.Context, gh *github.Client) (*github.Response, error) {
		_, resp, err := gh.Checks.UpdateCheckRun(ctx, owner, repo, cc.CheckRunID, opts)
		return resp, err
	})
}

// CheckRunUpdate sets a check run to a state: status, conclusion (when completed), output with
// text, details URL and the full list of requested actions (an empty list removes earlier ones;
// go-github's options would omit it, so the request is built here).
type CheckRunUpdate struct {
	InstallationID int64
	Repository     string
	CheckRunID     int64
	Name           string
	Status         string // in_progress or completed
	Conclusion     string
	Title          string
	Summary, Text  string
	DetailsURL     string
	Actions        []CheckRunAction
}

// CheckRunAction is a requested action button (label and identifier ≤ 20 characters,
// description ≤ 40, at most 3 per check run).
type CheckRunAction struct {
	Label       string `json:"label"`
	Description string `json:"description"`
	Identifier  string `json:"identifier"`
}

// UpdateCheckRun PATCHes the check run to the state (replay-safe: the same update twice leaves
// the same check run).
func (c *Client) UpdateCheckRun(ctx context.Context, u CheckRunUpdate) error {
	owner, repo, err := splitRepo(u.Repository)
	if err != nil {
		return err
	}
	output := map[string]any{"title": u.Title, "summary": u.Summary}
	if u.Text != "" {
		output["text"] = u.Text
	}
	actions := u.Actions
	if actions == nil {
		actions = []CheckRunAction{}
	}
	body := map[string]any{"status": u.Status, "output": output, "actions": actions}
	if u.Name != "" {
		body["name"] = u.Name
	}
	if u.Status == "completed" {
		body["conclusion"] = u.Conclusion
		body["completed_at"] = time.Now().UTC().Format(time.RFC3339)
	}
	if u.DetailsURL != "" {
		body["details_url"] = u.DetailsURL
	}
	var got struct {
		Status     string  `json:"status"`
		Conclusion *string `json:"conclusion"`
	}
	err = c.call(ctx, OpUpdateCheckRun, u.InstallationID, func(ctx context.Context, gh *github.Client) (*github.Response, error) {
		req, err := gh.NewRequest(http.MethodPatch, fmt.Sprintf("repos/%s/%s/check-runs/%d",
			url.PathEscape(owner), url.PathEscape(repo), u.CheckRunID), body)
		if err != nil {
			return nil, err
		}
		return gh.Do(ctx, req, &got)
	})
	if err != nil || got.Status == "" || c.cfg.OnCheckRunStateIgnored == nil {
		return err
	}
	// A check run reset after it completed (a Re-run, a Retry) relies on GitHub reopening it: its
	// description of "Rerequest a check run" leaves the reset to the App's update, but reports
	// differ on whether a completed check run's status and conclusion can change. GitHub answers
	// 200 either way, so the answer's state is what tells.
	state := func(status string, conclusion *string) string {
		if status == "completed" && conclusion != nil {
			return status + "/" + *conclusion
		}
		return status
	}
	sent, answered := state(u.Status, &u.Conclusion), state(got.Status, got.Conclusion)
	if (u.Status == "completed") != (got.Status == "completed") || (u.Status == "completed" && sent != answered) {
		c.cfg.OnCheckRunStateIgnored(u.InstallationID, u.CheckRunID, sent, answered)
	}
	return nil
}

// WorkflowRun is what reconciliation needs to know of a run.
type WorkflowRun struct {
	ID           int64     `json:"id"`
	Name         string    `json:"name"`
	DisplayTitle string    `json:"display_title"`
	Event        string    `json:"event"`
	Status       string    `json:"status"`
	Conclusion   string    `json:"conclusion,omitempty"`
	HeadBranch   string    `json:"head_branch"`
	HeadSHA      string    `json:"head_sha"`
	CreatedAt    time.Time `json:"created_at"`
	HTMLURL      string    `json:"html_url"`
	RunAttempt   int       `json:"run_attempt,omitempty"`
}

// GetWorkflowRun reads one workflow run (read-only; replay-safe).
func (c *Client) GetWorkflowRun(ctx context.Context, installationID int64, repository string, id int64) (WorkflowRun, error) {
	owner, repo, err := splitRepo(repository)
	if err != nil {
		return WorkflowRun{}, err
	}
	var r *github.WorkflowRun
	err = c.call(ctx, OpGetWorkflowRun, installationID, func(ctx context.Context, gh *github.Client) (*github.Response, error) {
		var resp *github.Response
		var err error
		r, resp, err = gh.Actions.GetWorkflowRunByID(ctx, owner, repo, id)
		return resp, err
	})
	if err != nil {
		return WorkflowRun{}, err
	}
	return WorkflowRun{ID: r.GetID(), Name: r.GetName(), DisplayTitle: r.GetDisplayTitle(), Event: r.GetEvent(),
		Status: r.GetStatus(), Conclusion: r.GetConclusion(), HeadBranch: r.GetHeadBranch(), HeadSHA: r.GetHeadSHA(),
		CreatedAt: r.GetCreatedAt().Time, HTMLURL: r.GetHTMLURL(), RunAttempt: r.GetRunAttempt()}, nil
}

// CollaboratorPermission is GitHub's answer to "Get repository permissions for a user".
type CollaboratorPermission struct {
	// Collaborator is false when GitHub answered 404: the user is not a collaborator (or not a
	// user at all); Permission and RoleName are then empty.
	Collaborator bool
	// Permission is the legacy base role: admin, write, read or none (maintain reads as write,
	// triage as read).
	Permission string `json:"permission"`
	// RoleName is the role itself, custom roles included (admin, maintain, write, triage, read, …).
	RoleName string `json:"role_name"`
}

// GetCollaboratorPermission reads username's permission on the repository (GET
// /repos/{owner}/{repo}/collaborators/{username}/permission; read-only, replay-safe). A 404 is
// an answer, not a failure: Collaborator false (GitHub answers a repository the installation
// cannot see the same way; no permission either way). go-github v62's Repositories.GetPermissionLevel
// sends this request but decodes only permission and user; the request is built the same way
// and decoded with role_name too.
func (c *Client) GetCollaboratorPermission(ctx context.Context, installationID int64, repository, username string) (CollaboratorPermission, error) {
	owner, repo, err := splitRepo(repository)
	if err != nil {
		return CollaboratorPermission{}, err
	}
	if username == "" || strings.ContainsAny(username, "/?#%") {
		return CollaboratorPermission{}, fmt.Errorf("%s: %q is not a GitHub login", OpGetCollaboratorPermission, username)
	}
	var p CollaboratorPermission
	err = c.call(ctx, OpGetCollaboratorPermission, installationID, func(ctx context.Context, gh *github.Client) (*github.Response, error) {
		req, err := gh.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/%s/collaborators/%s/permission",
			url.PathEscape(owner), url.PathEscape(repo), url.PathEscape(username)), nil)
		if err != nil {
			return nil, err
		}
		return gh.Do(ctx, req, &p)
	})
	var respErr *github.ErrorResponse
	if err != nil && errors.As(err, &respErr) && respErr.Response != nil && respErr.Response.StatusCode == http.StatusNotFound {
		return CollaboratorPermission{}, nil
	}
	if err != nil {
		return CollaboratorPermission{}, err
	}
	p.Collaborator = true
	return p, nil
}

// ListWorkflowRuns lists (read-only) the workflow's runs of event created at or after since,
// newest first, at most limit. truncated says that more were created since: the oldest of them,
// those nearest since, were not read.
func (c *Client) ListWorkflowRuns(ctx context.Context, installationID int64, repository, workflowFile, event string, since time.Time, limit int) (out []WorkflowRun, truncated bool, err error) {
	owner, repo, err := splitRepo(repository)
	if err != nil {
		return nil, false, err
	}
	opts := &github.ListWorkflowRunsOptions{Event: event, Created: ">=" + since.UTC().Format(time.RFC3339),
		ListOptions: github.ListOptions{PerPage: 100}}
	more := false
	for len(out) < limit {
		var runs *github.WorkflowRuns
		var next int
		err := c.call(ctx, OpListWorkflowRuns, installationID, func(ctx context.Context, gh *github.Client) (*github.Response, error) {
			var resp *github.Response
			var err error
			runs, resp, err = gh.Actions.ListWorkflowRunsByFileName(ctx, owner, repo, workflowFile, opts)
			if resp != nil {
				next = resp.NextPage
			}
			return resp, err
		})
		if err != nil {
			return nil, false, err
		}
		for _, r := range runs.WorkflowRuns {
			out = append(out, WorkflowRun{ID: r.GetID(), Name: r.GetName(), DisplayTitle: r.GetDisplayTitle(), Event: r.GetEvent(),
				Status: r.GetStatus(), Conclusion: r.GetConclusion(), HeadBranch: r.GetHeadBranch(), HeadSHA: r.GetHeadSHA(), CreatedAt: r.GetCreatedAt().Time,
				HTMLURL: r.GetHTMLURL()})
		}
		more = next != 0
		if !more {
			break
		}
		opts.Page = next
	}
	if len(out) > limit {
		out, more = out[:limit], true
	}
	return out, more, nil
}

// HookDelivery is one attempt of the App's webhook deliveries.
type HookDelivery struct {
	ID          int64     `json:"id"`
	GUID        string    `json:"guid"`
	DeliveredAt time.Time `json:"delivered_at"`
	Redelivery  bool      `json:"redelivery"`
	StatusCode  int       `json:"status_code"`
	Event       string    `json:"event"`
	Action      string    `json:"action,omitempty"`
}

// ListHookDeliveries lists the App's webhook delivery attempts, newest first, back to since, at
// most maxPages pages of 100 (App JWT; cursor pagination). truncated says that it stopped at
// maxPages with older attempts of the window left unread.
func (c *Client) ListHookDeliveries(ctx context.Context, since time.Time, maxPages int) (out []HookDelivery, truncated bool, err error) {
	opts := &github.ListCursorOptions{PerPage: 100}
	for page := 0; page < maxPages; page++ {
		var list []*github.HookDelivery
		var cursor string
		err := c.call(ctx, OpListDeliveries, 0, func(ctx context.Context, gh *github.Client) (*github.Response, error) {
			var resp *github.Response
			var err error
			list, resp, err = gh.Apps.ListHookDeliveries(ctx, opts)
			if resp != nil {
				cursor = resp.Cursor
			}
			return resp, err
		})
		if err != nil {
			return nil, false, err
		}
		for _, d := range list {
			at := d.GetDeliveredAt().Time
			if at.Before(since) {
				return out, false, nil
			}
			out = append(out, HookDelivery{ID: d.GetID(), GUID: d.GetGUID(), DeliveredAt: at, Redelivery: d.GetRedelivery(),
				StatusCode: d.GetStatusCode(), Event: d.GetEvent(), Action: d.GetAction()})
		}
		if cursor == "" || len(list) == 0 {
			return out, false, nil
		}
		opts.Cursor = cursor
	}
	return out, true, nil
}

// RedeliverHookDelivery asks GitHub to deliver an attempt's payload again (same GUID).
func (c *Client) RedeliverHookDelivery(ctx context.Context, id int64) error {
	return c.call(ctx, OpRedeliver, 0, func(ctx context.Context, gh *github.Client) (*github.Response, error) {
		_, resp, err := gh.Apps.RedeliverHookDelivery(ctx, id)
		var accepted *github.AcceptedError
		if errors.As(err, &accepted) {
			return resp, nil // 202: accepted
		}
		return resp, err
	})
}
