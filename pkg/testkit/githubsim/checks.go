package githubsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"
)

// CheckRun is a check run in GitHub's shape.
type CheckRun struct {
	ID          int64          `json:"id"`
	NodeID      string         `json:"node_id"`
	HeadSHA     string         `json:"head_sha"`
	ExternalID  string         `json:"external_id"`
	Name        string         `json:"name"`
	Status      string         `json:"status"`
	Conclusion  *string        `json:"conclusion"`
	StartedAt   *time.Time     `json:"started_at"`
	CompletedAt *time.Time     `json:"completed_at"`
	DetailsURL  string         `json:"details_url,omitempty"`
	URL         string         `json:"url"`
	HTMLURL     string         `json:"html_url"`
	Output      CheckRunOutput `json:"output"`
	// Actions are the requested-action buttons last set (GitHub does not return them).
	Actions []CheckRunAction `json:"-"`
	App     struct {
		ID   int64  `json:"id"`
		Slug string `json:"slug"`
	} `json:"app"`
	repo        string
	finishedSeq int64 // its last finish's place (retain.go)
}

// CheckRunOutput is a check run's output.
type CheckRunOutput struct {
	Title   *string `json:"title"`
	Summary *string `json:"summary"`
	Text    *string `json:"text,omitempty"`
}

// CheckRuns returns copies of the check runs whose external_id is externalID.
func (s *Simulator) CheckRuns(externalID string) []CheckRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []CheckRun
	for _, c := range s.checkRuns {
		if c.ExternalID == externalID {
			out = append(out, *c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// AllCheckRuns returns copies of every check run, in id order.
func (s *Simulator) AllCheckRuns() []CheckRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]CheckRun, 0, len(s.checkRuns))
	for _, c := range s.checkRuns {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// AddForeignCheckRun records a check run of another App (appID) on a commit of a known repository,
// in_progress, as a workflow with the checks: write permission or another App could create one
// with any name and external_id. It returns its id.
func (s *Simulator) AddForeignCheckRun(fullName, sha, name, externalID string, appID int64) int64 {
	id := s.id()
	now := s.now().UTC().Truncate(time.Second)
	c := &CheckRun{ID: id, NodeID: fmt.Sprintf("CR_sim%d", id), HeadSHA: sha, Name: name, ExternalID: externalID,
		Status: "in_progress", StartedAt: &now, repo: fullName, HTMLURL: fmt.Sprintf("https://github.com/%s/runs/%d", fullName, id)}
	c.App.ID, c.App.Slug = appID, fmt.Sprintf("app-%d", appID)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkRuns[id] = c
	s.checkRunsAt[fullName+"@"+sha] = append(s.checkRunsAt[fullName+"@"+sha], c)
	return id
}

// Repository is the full name (owner/name) of the repository the check run belongs to.
func (c CheckRun) Repository() string { return c.repo }

// CheckRunCount is the number of check runs in total.
func (s *Simulator) CheckRunCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.checkRuns)
}

// listCheckRuns: GET /repos/{owner}/{repo}/commits/{ref}/check-runs (check_name, filter, status,
// app_id, per_page, page). The ref is a commit SHA here.
func (s *Simulator) listCheckRuns(w http.ResponseWriter, r *http.Request, _ *reqInfo, repo *repository) {
	q := r.URL.Query()
	ref, name, status := r.PathValue("ref"), q.Get("check_name"), q.Get("status")
	latestOnly := q.Get("filter") != "all"
	var appID int64
	if v := q.Get("app_id"); v != "" {
		var err error
		if appID, err = strconv.ParseInt(v, 10, 64); err != nil {
			writeError(w, http.StatusUnprocessableEntity, "Invalid request.\n\nFor 'app_id', \""+v+"\" is not an integer.")
			return
		}
	}
	s.mu.Lock()
	var matches []CheckRun
	for _, c := range s.checkRunsAt[repo.fullName+"@"+ref] {
		if (name == "" || c.Name == name) && (status == "" || c.Status == status) && (appID == 0 || c.App.ID == appID) {
			matches = append(matches, *c)
		}
	}
	s.mu.Unlock()
	sort.Slice(matches, func(i, j int) bool { return matches[i].ID > matches[j].ID }) // newest first
	if latestOnly {
		seen := map[string]bool{}
		kept := matches[:0]
		for _, c := range matches {
			if !seen[c.Name] {
				seen[c.Name] = true
				kept = append(kept, c)
			}
		}
		matches = kept
	}
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
	writeJSON(w, http.StatusOK, map[string]any{"total_count": total, "check_runs": matches[from:to]})
}

func paging(r *http.Request) (page, perPage int) {
	page, perPage = 1, 30
	if v, err := strconv.Atoi(r.URL.Query().Get("page")); err == nil && v > 0 {
		page = v
	}
	if v, err := strconv.Atoi(r.URL.Query().Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	return page, perPage
}

type checkRunRequest struct {
	Name        *string           `json:"name"`
	HeadSHA     *string           `json:"head_sha"`
	ExternalID  *string           `json:"external_id"`
	DetailsURL  *string           `json:"details_url"`
	Status      *string           `json:"status"`
	Conclusion  *string           `json:"conclusion"`
	StartedAt   *time.Time        `json:"started_at"`
	CompletedAt *time.Time        `json:"completed_at"`
	Output      *CheckRunOutput   `json:"output"`
	Actions     *[]CheckRunAction `json:"actions"`
}

var (
	checkStatuses    = map[string]bool{"queued": true, "in_progress": true, "completed": true}
	checkConclusions = map[string]bool{"action_required": true, "cancelled": true, "failure": true, "neutral": true,
		"success": true, "skipped": true, "stale": true, "timed_out": true}
)

func (req *checkRunRequest) validate() string {
	if req.Status != nil && !checkStatuses[*req.Status] {
		return "Invalid request.\n\nNo subschema in \"oneOf\" matched: status"
	}
	if req.Conclusion != nil && !checkConclusions[*req.Conclusion] {
		return "Invalid request.\n\nNo subschema in \"oneOf\" matched: conclusion"
	}
	if req.Status != nil && *req.Status == "completed" && req.Conclusion == nil {
		return "Invalid request.\n\n\"conclusion\" is required when \"status\" is \"completed\"."
	}
	if req.DetailsURL != nil && !validURL(*req.DetailsURL) {
		return "Invalid request.\n\n\"details_url\" is not a valid URL."
	}
	if req.Actions != nil {
		if msg := validateActions(*req.Actions); msg != "" {
			return msg
		}
	}
	if req.Output != nil && ((req.Output.Summary != nil && utf8.RuneCountInString(*req.Output.Summary) > MaxOutputText) ||
		(req.Output.Text != nil && utf8.RuneCountInString(*req.Output.Text) > MaxOutputText)) {
		return "Invalid request.\n\nOnly 65535 characters are allowed; the output is longer."
	}
	return ""
}

func (s *Simulator) apply(c *CheckRun, req *checkRunRequest) {
	now := s.now().UTC().Truncate(time.Second)
	if req.Name != nil {
		c.Name = *req.Name
	}
	if req.ExternalID != nil {
		c.ExternalID = *req.ExternalID
	}
	if req.DetailsURL != nil {
		c.DetailsURL = *req.DetailsURL
	}
	if req.Status != nil {
		c.Status = *req.Status
	}
	if req.Conclusion != nil {
		c.Conclusion = req.Conclusion
		c.Status = "completed"
	}
	if c.Status == "completed" && c.CompletedAt == nil {
		c.CompletedAt = &now
	}
	if c.Status != "completed" {
		c.Conclusion, c.CompletedAt = nil, nil
	}
	if c.Status == "in_progress" && c.StartedAt == nil {
		c.StartedAt = &now
	}
	if req.Output != nil {
		c.Output = *req.Output
	}
	if req.Actions != nil {
		c.Actions = append([]CheckRunAction(nil), *req.Actions...)
	}
}

// createCheckRun: POST /repos/{owner}/{repo}/check-runs.
func (s *Simulator) createCheckRun(w http.ResponseWriter, r *http.Request, _ *reqInfo, repo *repository) {
	var req checkRunRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if req.Name == nil || *req.Name == "" || req.HeadSHA == nil || *req.HeadSHA == "" {
		writeError(w, http.StatusUnprocessableEntity, "Invalid request.\n\n\"name\" and \"head_sha\" are required.")
		return
	}
	if msg := req.validate(); msg != "" {
		writeError(w, http.StatusUnprocessableEntity, msg)
		return
	}
	id := s.id()
	c := &CheckRun{ID: id, NodeID: fmt.Sprintf("CR_sim%d", id), HeadSHA: *req.HeadSHA, Status: "queued", repo: repo.fullName,
		URL:     s.apiURL(r, "/repos/%s/check-runs/%d", repo.fullName, id),
		HTMLURL: fmt.Sprintf("https://github.com/%s/runs/%d", repo.fullName, id)}
	c.App.ID, c.App.Slug = s.opts.AppID, "boardreadyops"
	// Without a details_url GitHub links the App's homepage.
	c.DetailsURL = "https://github.com/apps/boardreadyops"
	s.apply(c, &req)
	s.mu.Lock()
	s.checkRuns[id] = c
	s.checkRunsAt[c.repo+"@"+c.HeadSHA] = append(s.checkRunsAt[c.repo+"@"+c.HeadSHA], c)
	ev := s.checkEventsLocked(c, repo, true, false)
	s.finishedCheckRunLocked(c)
	out := *c
	s.mu.Unlock()
	s.sendCheckEvents(ev)
	writeJSON(w, http.StatusCreated, out)
}

// updateCheckRun: PATCH /repos/{owner}/{repo}/check-runs/{id}.
func (s *Simulator) updateCheckRun(w http.ResponseWriter, r *http.Request, _ *reqInfo, repo *repository) {
	id, ok := pathInt(r, "id")
	var req checkRunRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if msg := req.validate(); msg != "" {
		writeError(w, http.StatusUnprocessableEntity, msg)
		return
	}
	s.mu.Lock()
	c := s.checkRuns[id]
	if !ok || c == nil || c.repo != repo.fullName {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	wasCompleted := c.Status == "completed"
	if wasCompleted && s.opts.FinalCheckRuns {
		req.Status, req.Conclusion, req.CompletedAt = nil, nil, nil
	}
	s.apply(c, &req)
	ev := s.checkEventsLocked(c, repo, false, wasCompleted)
	s.finishedCheckRunLocked(c)
	out := *c
	s.mu.Unlock()
	s.sendCheckEvents(ev)
	writeJSON(w, http.StatusOK, out)
}
