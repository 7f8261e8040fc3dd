package githubsim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// WorkflowRun is a workflow run in GitHub's shape (plus the dispatch inputs, which GitHub does not
// return; the simulator keeps them for assertions and run names).
type WorkflowRun struct {
	ID           int64     `json:"id"`
	Name         string    `json:"name"`
	DisplayTitle string    `json:"display_title"`
	RunNumber    int       `json:"run_number"`
	RunAttempt   int       `json:"run_attempt"`
	Event        string    `json:"event"`
	Status       string    `json:"status"`
	Conclusion   *string   `json:"conclusion"`
	HeadBranch   string    `json:"head_branch"`
	HeadSHA      string    `json:"head_sha"`
	Path         string    `json:"path"`
	WorkflowID   int64     `json:"workflow_id"`
	URL          string    `json:"url"`
	HTMLURL      string    `json:"html_url"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	// CheckSuiteID is the run attempt's check suite (GitHub Actions' App's).
	CheckSuiteID int64 `json:"check_suite_id"`

	Inputs map[string]string `json:"-"`
	// The check run of the run's job, and the run attempt it belongs to (checkevents.go).
	jobCheckRun int64
	jobAttempt  int
	jobStarted  time.Time
	repo        *repository
	file        string
	finishedSeq int64 // its last finish's place (retain.go)
}

// WorkflowRuns returns copies of every run, oldest first.
func (s *Simulator) WorkflowRuns() []WorkflowRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]WorkflowRun, 0, len(s.runs))
	for _, r := range s.runs {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Dispatches is the number of accepted dispatches that carried this execution_attempt_id input.
func (s *Simulator) Dispatches(executionAttemptID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dispatches[executionAttemptID]
}

// DispatchTotal is the number of accepted dispatches.
func (s *Simulator) DispatchTotal() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.dispatches {
		n += c
	}
	return n
}

// AddWorkflowRun records a run as if someone had started it (decoys for reconciliation tests).
func (s *Simulator) AddWorkflowRun(fullName, file, event, displayTitle string, created time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := s.repos[strings.ToLower(fullName)]
	id := s.id()
	s.runs[id] = &WorkflowRun{ID: id, Name: "Release", DisplayTitle: displayTitle, RunNumber: int(id % 100000), RunAttempt: 1,
		Event: event, Status: "completed", Conclusion: ptr("success"), Path: ".github/workflows/" + file, CreatedAt: created,
		UpdatedAt: created, repo: repo, file: file,
		HTMLURL: fmt.Sprintf("https://github.com/%s/actions/runs/%d", fullName, id)}
	return id
}

func ptr[T any](v T) *T { return &v }

type dispatchRequest struct {
	Ref              string            `json:"ref"`
	Inputs           map[string]string `json:"inputs"`
	ReturnRunDetails bool              `json:"return_run_details"`
}

// dispatchWorkflow: POST /repos/{owner}/{repo}/actions/workflows/{file}/dispatches.
func (s *Simulator) dispatchWorkflow(w http.ResponseWriter, r *http.Request, _ *reqInfo, repo *repository) {
	var req dispatchRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	file := r.PathValue("file")
	wf, ok := repo.workflows[file]
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	if !wf.Dispatchable {
		writeError(w, http.StatusUnprocessableEntity, "Workflow does not have 'workflow_dispatch' trigger")
		return
	}
	if req.Ref == "" {
		writeError(w, http.StatusUnprocessableEntity, "Invalid request.\n\n\"ref\" wasn't supplied.")
		return
	}
	declared := map[string]bool{}
	for _, in := range wf.Inputs {
		declared[in] = true
		if _, ok := req.Inputs[in]; !ok {
			writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("Required input '%s' not provided", in))
			return
		}
	}
	var unexpected []string
	for k := range req.Inputs {
		if !declared[k] {
			unexpected = append(unexpected, k)
		}
	}
	if len(unexpected) > 0 {
		sort.Strings(unexpected)
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("Unexpected inputs provided: %q", unexpected))
		return
	}

	now := s.now().UTC().Truncate(time.Second)
	id := s.id()
	title := "Release"
	if rr, ea := req.Inputs["release_run_id"], req.Inputs["execution_attempt_id"]; rr != "" && ea != "" {
		title = fmt.Sprintf("release %s attempt %s", rr, ea) // the documented run-name
	}
	branch := strings.TrimPrefix(strings.TrimPrefix(req.Ref, "refs/tags/"), "refs/heads/")
	head := fmt.Sprintf("%040x", id) // a branch: the simulator keeps no branches
	if tag, isTag := strings.CutPrefix(req.Ref, "refs/tags/"); isTag {
		sha, ok := s.tagCommit(repo.fullName, tag)
		if !ok {
			writeError(w, http.StatusUnprocessableEntity, "No ref found for: "+req.Ref)
			return
		}
		head = sha
	}
	run := &WorkflowRun{ID: id, Name: "Release", DisplayTitle: title, RunNumber: int(id % 100000), RunAttempt: 1,
		Event: "workflow_dispatch", Status: "queued", HeadBranch: branch,
		HeadSHA: head, Path: ".github/workflows/" + file, WorkflowID: int64(len(file)) + 159000,
		URL: s.apiURL(r, "/repos/%s/actions/runs/%d", repo.fullName, id), HTMLURL: fmt.Sprintf("https://github.com/%s/actions/runs/%d", repo.fullName, id),
		CreatedAt: now, UpdatedAt: now, CheckSuiteID: s.id(), Inputs: req.Inputs, repo: repo, file: file}
	s.mu.Lock()
	s.runs[id] = run
	s.dispatches[req.Inputs["execution_attempt_id"]]++
	s.mu.Unlock()
	s.scheduleRun(run)

	if !req.ReturnRunDetails {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"workflow_run_id": id, "run_url": run.URL, "html_url": run.HTMLURL})
}

// getWorkflowRun: GET /repos/{owner}/{repo}/actions/runs/{id}.
func (s *Simulator) getWorkflowRun(w http.ResponseWriter, r *http.Request, _ *reqInfo, repo *repository) {
	id, _ := pathInt(r, "id")
	s.mu.Lock()
	run := s.runs[id]
	var out WorkflowRun
	if run != nil {
		out = *run
	}
	s.mu.Unlock()
	if run == nil || run.repo != repo {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// listWorkflowRuns: GET /repos/{owner}/{repo}/actions/workflows/{file}/runs (event, status,
// created ">=RFC3339", per_page, page), newest first.
func (s *Simulator) listWorkflowRuns(w http.ResponseWriter, r *http.Request, _ *reqInfo, repo *repository) {
	q := r.URL.Query()
	file, event, status := r.PathValue("file"), q.Get("event"), q.Get("status")
	var since time.Time
	if c := q.Get("created"); c != "" {
		t, err := time.Parse(time.RFC3339, strings.TrimPrefix(c, ">="))
		if err != nil {
			writeError(w, http.StatusUnprocessableEntity, "Invalid created filter")
			return
		}
		since = t
	}
	s.mu.Lock()
	var matches []WorkflowRun
	for _, run := range s.runs {
		if run.repo == repo && run.file == file && (event == "" || run.Event == event) && (status == "" || run.Status == status) &&
			!run.CreatedAt.Before(since) {
			matches = append(matches, *run)
		}
	}
	s.mu.Unlock()
	sort.Slice(matches, func(i, j int) bool { return matches[i].ID > matches[j].ID })
	page, perPage := paging(r)
	total := len(matches)
	from, to := min((page-1)*perPage, total), min(page*perPage, total)
	if to < total {
		next := *r.URL
		qq := next.Query()
		qq.Set("page", strconv.Itoa(page+1))
		qq.Set("per_page", strconv.Itoa(perPage))
		next.RawQuery = qq.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, s.apiURL(r, "%s", next.RequestURI())))
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": total, "workflow_runs": matches[from:to]})
}

// scheduleRun plays a dispatched run: requested, in_progress and completed webhooks, RunDelay
// apart, when a webhook URL is configured.
func (s *Simulator) scheduleRun(run *WorkflowRun) {
	if s.opts.WebhookURL == "" {
		return
	}
	conclusion := "success"
	if s.opts.Conclusion != nil {
		conclusion = s.opts.Conclusion(run.repo.fullName, run.HeadBranch, run.Inputs)
	}
	s.playRun(run.ID, conclusion)
}

// playRun schedules a run attempt's requested, in_progress and completed webhooks, RunDelay apart.
func (s *Simulator) playRun(runID int64, conclusion string) {
	start := s.now()
	for i, step := range []string{"requested", "in_progress", "completed"} {
		s.webhooks.schedule(start.Add(time.Duration(i+1)*s.opts.RunDelay), func(ctx context.Context, p poster) {
			s.deliverRunEvent(ctx, p, runID, step, conclusion)
		})
	}
}

// deliverRunEvent advances the run and sends its workflow_run webhook (with Options.CheckEvents,
// its job's check run events too: checkevents.go).
func (s *Simulator) deliverRunEvent(ctx context.Context, p poster, runID int64, action, conclusion string) {
	payload, repo, jobEvents := s.runEvent(runID, action, conclusion)
	if payload == nil {
		return
	}
	if !s.deliver(ctx, p, "workflow_run", action, payload) {
		s.opts.Logger.Warn("workflow_run webhook not accepted after 5 attempts", "repository", repo, "run_id", runID, "action", action)
	}
	if jobEvents != nil {
		jobEvents()
	}
}

// runEvent advances a run and returns the workflow_run webhook payload for it, and what sends
// its job's check events (nil: none).
func (s *Simulator) runEvent(runID int64, action, conclusion string) (payload []byte, repository string, jobEvents func()) {
	s.mu.Lock()
	run := s.runs[runID]
	if run == nil {
		s.mu.Unlock()
		return nil, "", nil
	}
	run.UpdatedAt = s.now().UTC().Truncate(time.Second)
	switch action {
	case "requested":
		run.Status = "queued"
	case "in_progress":
		run.Status = "in_progress"
	case "completed":
		run.Status, run.Conclusion = "completed", &conclusion
		s.finishedRunLocked(run)
	}
	// Encoded from a copy, outside the lock that every request of the simulator takes.
	snapshot := *run
	repo := repoRef{run.repo.id, run.repo.fullName, run.repo.installationID}
	jobEvents = s.jobCheckEventsLocked(run, action)
	s.mu.Unlock()
	p := newHookPayload(action, repo, "boardreadyops[bot]")
	p.WorkflowRun = &snapshot
	p.Workflow = &hookWorkflow{ID: snapshot.WorkflowID, Name: snapshot.Name, Path: snapshot.Path, State: "active"}
	payload, _ = json.Marshal(&p)
	return payload, repo.fullName, jobEvents
}

// SetWorkflowRunHead sets a recorded run's head branch (the tag or branch it ran on) and head
// SHA, as GitHub reports them in its workflow_runs listing.
func (s *Simulator) SetWorkflowRunHead(id int64, branch, sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.runs[id]; r != nil {
		r.HeadBranch, r.HeadSHA = branch, sha
	}
}
