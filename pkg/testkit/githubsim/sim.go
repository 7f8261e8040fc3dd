// Package githubsim is a GitHub API simulator: a real HTTP server with GitHub's documented request
// and response shapes for what BoardReadyOps calls — installation tokens (App JWT verified against
// the App's public key), check runs, workflow dispatch with run details, workflow runs, and the
// App's webhook deliveries. Tests, the local run and the load tool use it in place of
// api.github.com.
//
// It can also "run" dispatched workflows: after a delay it sends signed workflow_run webhooks
// (requested, in_progress, completed) to a configured URL, so the whole loop runs locally. Faults
// can be injected per operation and installation (latency, 5xx, rate limits, hanging requests,
// connections dropped after the request was processed), and a journal and counters let tests
// assert on what was asked of GitHub.
package githubsim

import (
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Simulator.
type Options struct {
	// AppID and AppPublicKey verify the App JWT on token requests.
	AppID        int64
	AppPublicKey *rsa.PublicKey
	// FinalCheckRuns keeps a completed check run's status and conclusion: an update that would
	// reopen it or change its conclusion is answered 200 and changes only the rest (output,
	// actions, …), as some report GitHub does. Off (the default), an update may reset it, as
	// GitHub's description of "Rerequest a check run" implies.
	FinalCheckRuns bool
	// ClockOffset is how far GitHub's clock is from the host's: an App JWT is checked, and every
	// time the simulator writes is taken, at the host's time plus it (a replica whose clock is off).
	ClockOffset time.Duration
	// TokenTTL is the lifetime of installation tokens (GitHub: 1 hour).
	TokenTTL time.Duration
	// AutoRepositories creates any repository an installation token asks for on first use, with
	// the release workflow (ReleaseWorkflow) dispatchable and the id RepositoryID(full name). Load runs use it; tests add repositories.
	AutoRepositories bool
	// ReleaseWorkflow is the workflow file auto-created repositories have.
	ReleaseWorkflow string
	// WebhookURL, when set, receives the workflow_run webhooks of dispatched runs, signed with
	// WebhookSecret.
	WebhookURL    string
	WebhookSecret []byte
	// RunDelay separates requested, in_progress and completed of a simulated run.
	RunDelay time.Duration
	// Conclusion decides a run's conclusion from its repository, ref and inputs; nil: "success".
	Conclusion func(repo, ref string, inputs map[string]string) string
	// TagCommit is the commit a tag of the repository points at (tags.go): a dispatched run's
	// head_sha, as GitHub sets it from the ref (reconciliation matches on it), and the answer to
	// reading the tag's commit; nil or "": not known this way. SetTag and DeleteTag come first.
	TagCommit func(repo, tag string) string
	// AutoTags: any tag not known otherwise exists, at AutoTagCommit(repository, tag). Load runs
	// use it with AutoRepositories; tests set their tags.
	AutoTags bool
	// CheckEvents: also send what GitHub sends an App with the checks permission about check runs
	// (checkevents.go): check_run created and completed for its own check runs and for each
	// dispatched run's job, and check_suite completed for their suites. Off, only workflow_run
	// webhooks are sent (and the presses tests make).
	CheckEvents bool
	// WebhookSenders is the number of concurrent webhook senders (default 8).
	WebhookSenders int
	// RetainFinished, when positive, keeps at most this many finished check runs and as many
	// finished workflow runs, forgetting the oldest (retain.go); 0 keeps every one, as GitHub.
	// It bounds the webhook delivery log the same way (journalCap otherwise).
	RetainFinished int
	Logger         *slog.Logger
}

// Simulator is the simulated GitHub.
type Simulator struct {
	opts Options
	mux  *http.ServeMux
	now  func() time.Time

	mu            sync.Mutex
	installations map[int64]*installation
	repos         map[string]*repository // by lower-cased full name
	moved         map[string]string      // a transferred or renamed repository's current full name, by its former lower-cased one
	tokens        map[string]token
	checkRuns     map[int64]*CheckRun
	checkRunsAt   map[string][]*CheckRun // by repository full name + "@" + head SHA
	runs          map[int64]*WorkflowRun
	deliveries    []*HookDelivery
	faults        []*Fault
	journal       []Entry
	dispatches    map[string]int               // by execution_attempt_id input
	collaborators map[string]map[string]string // role by lower-cased repository full name, then login
	tags          map[string]string            // commit by tagKey; "" for a deleted tag
	limits        Limits
	budgets       map[int64]*budget
	violations    []Violation
	// Finished check runs and workflow runs in the order they finished (Options.RetainFinished).
	finishedCheckRuns, finishedRuns []finished
	finishSeq                       int64
	nextID                          atomic.Int64

	webhooks *webhookQueue
}

type installation struct {
	id      int64
	account string
}

type repository struct {
	id             int64
	fullName       string
	installationID int64
	workflows      map[string]Workflow
}

// Workflow is a repository's workflow file as far as dispatch is concerned.
type Workflow struct {
	// Dispatchable: the workflow has a workflow_dispatch trigger.
	Dispatchable bool
	// Inputs the workflow_dispatch trigger declares; all are required.
	Inputs []string
}

type token struct {
	installationID int64
	expires        time.Time
}

// New builds a simulator. Call Close to stop its webhook senders.
func New(opts Options) *Simulator {
	if opts.TokenTTL == 0 {
		opts.TokenTTL = time.Hour
	}
	if opts.ReleaseWorkflow == "" {
		opts.ReleaseWorkflow = "boardreadyops-release.yml"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.WebhookSenders == 0 {
		opts.WebhookSenders = 8
	}
	s := &Simulator{
		opts: opts, mux: http.NewServeMux(), now: func() time.Time { return time.Now().Add(opts.ClockOffset) },
		installations: map[int64]*installation{}, repos: map[string]*repository{}, moved: map[string]string{}, tokens: map[string]token{},
		checkRuns: map[int64]*CheckRun{}, checkRunsAt: map[string][]*CheckRun{}, runs: map[int64]*WorkflowRun{}, dispatches: map[string]int{},
		budgets: map[int64]*budget{}, tags: map[string]string{},
	}
	// Ids never repeat across restarts, as GitHub's: a local database outlives the simulator, and
	// a reused workflow run id would (rightly) be refused there. 100,000 ids per second of wall
	// time, far below 2^53 (safe in JSON).
	s.nextID.Store(time.Now().Unix() * 100000)
	s.webhooks = newWebhookQueue(s, opts.WebhookSenders)
	s.routes()
	return s
}

// Close stops the webhook senders; pending webhooks are dropped.
func (s *Simulator) Close() { s.webhooks.close() }

// ServeHTTP serves the simulated API.
func (s *Simulator) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// AddInstallation registers an installation of the App.
func (s *Simulator) AddInstallation(id int64, account string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.installations[id] = &installation{id: id, account: account}
}

// AddRepository registers a repository of an installation with its workflows.
func (s *Simulator) AddRepository(installationID, repoID int64, fullName string, workflows map[string]Workflow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[strings.ToLower(fullName)] = &repository{id: repoID, fullName: fullName, installationID: installationID, workflows: workflows}
}

// RepositoryID is the id an auto-created repository (AutoRepositories) gets: derived from its
// full name, case-insensitively, so that a harness sending webhooks for a repository uses the id
// the simulator's own webhooks (workflow_run) will carry, as GitHub's do. Below 2^40, where the
// simulator's other ids (from 2^47 up) never are.
func RepositoryID(fullName string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(strings.ToLower(fullName)))
	return int64(h.Sum64()%(1<<40)) + 1
}

// ReleaseWorkflow is the workflow a BoardReadyOps release workflow declares: dispatchable with
// the release-run and execution-attempt inputs.
func ReleaseWorkflow() Workflow {
	return Workflow{Dispatchable: true, Inputs: []string{"release_run_id", "execution_attempt_id"}}
}

func (s *Simulator) id() int64 { return s.nextID.Add(1) }

// routes registers GitHub's paths.
func (s *Simulator) routes() {
	s.handle("POST /app/installations/{id}/access_tokens", OpCreateToken, s.createToken)
	s.handle("GET /repos/{owner}/{repo}/commits/{ref}/check-runs", OpListCheckRuns, s.repoAuth(s.listCheckRuns))
	s.handle("GET /repos/{owner}/{repo}/commits/{ref...}", OpGetTagCommit, s.repoAuth(s.getCommit))
	s.handle("POST /repos/{owner}/{repo}/check-runs", OpCreateCheckRun, s.repoAuth(s.createCheckRun))
	s.handle("PATCH /repos/{owner}/{repo}/check-runs/{id}", OpUpdateCheckRun, s.repoAuth(s.updateCheckRun))
	s.handle("POST /repos/{owner}/{repo}/actions/workflows/{file}/dispatches", OpDispatchWorkflow, s.repoAuth(s.dispatchWorkflow))
	s.handle("GET /repos/{owner}/{repo}/actions/runs/{id}", OpGetWorkflowRun, s.repoAuth(s.getWorkflowRun))
	s.handle("GET /repos/{owner}/{repo}/actions/workflows/{file}/runs", OpListWorkflowRuns, s.repoAuth(s.listWorkflowRuns))
	s.handle("GET /repos/{owner}/{repo}/collaborators/{username}/permission", OpGetCollaboratorPermission,
		s.repoAuth(s.getCollaboratorPermission))
	s.handle("GET /app/hook/deliveries", OpListDeliveries, s.appAuth(s.listDeliveries))
	s.handle("POST /app/hook/deliveries/{id}/attempts", OpRedeliver, s.appAuth(s.redeliver))
}

// Operations, as named in faults and the journal.
const (
	OpCreateToken      = "create_token"
	OpListCheckRuns    = "list_check_runs"
	OpCreateCheckRun   = "create_check_run"
	OpUpdateCheckRun   = "update_check_run"
	OpDispatchWorkflow = "dispatch_workflow"
	OpGetWorkflowRun   = "get_workflow_run"
	OpListWorkflowRuns = "list_workflow_runs"
	// OpGetCollaboratorPermission: a user's permission on a repository.
	OpGetCollaboratorPermission = "get_collaborator_permission"
	// OpGetTagCommit: the commit a tag points at (GET …/commits/tags/{tag}, sha media type).
	OpGetTagCommit   = "get_tag_commit"
	OpListDeliveries = "list_deliveries"
	OpRedeliver      = "redeliver"
)

// Entry is one journaled request.
type Entry struct {
	Time           time.Time
	Method, Path   string
	Operation      string
	InstallationID int64
	Status         int
}

const journalCap = 100000

// Journal returns a copy of the journaled requests (the newest journalCap).
func (s *Simulator) Journal() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Entry(nil), s.journal...)
}

// Count returns how many journaled requests of operation got status (0: any).
func (s *Simulator) Count(operation string, status int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.journal {
		if e.Operation == operation && (status == 0 || e.Status == status) {
			n++
		}
	}
	return n
}

type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }

// Unwrap lets http.ResponseController reach the connection (hijacking for dropped connections).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// reqInfo travels with a request through auth and fault handling.
type reqInfo struct {
	op             string
	installationID int64
}

func (s *Simulator) handle(pattern, op string, h func(w http.ResponseWriter, r *http.Request, info *reqInfo)) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		info := &reqInfo{op: op}
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			s.mu.Lock()
			s.journal = append(s.journal, Entry{Time: s.now(), Method: r.Method, Path: r.URL.Path, Operation: op,
				InstallationID: info.installationID, Status: rec.status})
			if len(s.journal) > journalCap {
				s.journal = s.journal[len(s.journal)-journalCap:]
			}
			s.mu.Unlock()
		}()
		h(rec, r, info)
	})
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes GitHub's error shape.
func writeError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]string{"message": message, "documentation_url": "https://docs.github.com/rest"})
}

func pathInt(r *http.Request, name string) (int64, bool) {
	v, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	return v, err == nil && v > 0
}

func (s *Simulator) apiURL(r *http.Request, format string, args ...any) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s", scheme, r.Host) + fmt.Sprintf(format, args...)
}
