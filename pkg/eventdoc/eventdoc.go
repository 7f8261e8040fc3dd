// Package eventdoc defines the normalized event document: the bounded subset of a GitHub webhook
// payload that the control plane needs, which ingest stores in webhook_inbox.payload and lifecycle
// reads back. Raw payloads are never stored.
//
// The document is versioned by its fields, not by a number: fields are only ever added. Strings
// are cut to documented lengths and repository lists to MaxRepositories entries and, together,
// to about 1 MB of names, so a document always fits the inbox's 1 MiB bound whatever GitHub sends. docs/webhooks.md lists every field per event.
package eventdoc

// Events the control plane handles. Any other event is acknowledged and not stored.
const (
	EventInstallation             = "installation"
	EventInstallationRepositories = "installation_repositories"
	EventRepository               = "repository"
	EventPush                     = "push"
	EventCheckRun                 = "check_run"
	EventCheckSuite               = "check_suite"
	EventWorkflowRun              = "workflow_run"
	EventPing                     = "ping"
)

// Handled reports whether event is one the control plane stores.
func Handled(event string) bool {
	switch event {
	case EventInstallation, EventInstallationRepositories, EventRepository, EventPush,
		EventCheckRun, EventCheckSuite, EventWorkflowRun, EventPing:
		return true
	}
	return false
}

// HandledEvents lists the handled events (a closed set, safe as a metric label).
var HandledEvents = []string{
	EventInstallation, EventInstallationRepositories, EventRepository, EventPush,
	EventCheckRun, EventCheckSuite, EventWorkflowRun, EventPing,
}

// MaxRepositories bounds each repository list in a document. Installations with more repositories
// are flagged RepositoriesTruncated.
const MaxRepositories = 10000

// Document is the normalized form of one delivery.
type Document struct {
	Event          string `json:"event"`
	Action         string `json:"action,omitempty"`
	InstallationID int64  `json:"installation_id,omitempty"`

	// Repository is the delivery's repository, when it has one.
	Repository *Repository `json:"repository,omitempty"`
	// Installation details (installation events, and the account on every event that has one).
	Installation *Installation `json:"installation,omitempty"`

	// installation: the repositories the installation can access (created), or had (deleted).
	Repositories []RepositoryRef `json:"repositories,omitempty"`
	// installation_repositories: the change.
	RepositoriesAdded   []RepositoryRef `json:"repositories_added,omitempty"`
	RepositoriesRemoved []RepositoryRef `json:"repositories_removed,omitempty"`
	// RepositorySelection is "all" or "selected".
	RepositorySelection string `json:"repository_selection,omitempty"`
	// RepositoriesTruncated is set when a list was cut: to MaxRepositories entries, or to the
	// document's bound on its lists' names.
	RepositoriesTruncated bool `json:"repositories_truncated,omitempty"`

	// repository renamed / transferred / edited.
	Changes *RepositoryChanges `json:"changes,omitempty"`

	Push        *Push        `json:"push,omitempty"`
	CheckRun    *CheckRun    `json:"check_run,omitempty"`
	CheckSuite  *CheckSuite  `json:"check_suite,omitempty"`
	WorkflowRun *WorkflowRun `json:"workflow_run,omitempty"`
	// Ping: the App id the hook belongs to.
	Ping *Ping `json:"ping,omitempty"`
}

// Repository is a repository as the control plane keeps it.
type Repository struct {
	ID            int64  `json:"id"`
	FullName      string `json:"full_name"`
	Name          string `json:"name,omitempty"`
	DefaultBranch string `json:"default_branch,omitempty"`
	Archived      bool   `json:"archived,omitempty"`
	// OwnerLogin and OwnerType ("User" or "Organization") let lifecycle record an installation it
	// has not seen an installation event for.
	OwnerLogin string `json:"owner_login,omitempty"`
	OwnerType  string `json:"owner_type,omitempty"`
}

// RepositoryRef is an entry of an installation's repository list.
type RepositoryRef struct {
	ID       int64  `json:"id"`
	FullName string `json:"full_name"`
}

// Installation is the installation's account.
type Installation struct {
	ID           int64  `json:"id"`
	AccountLogin string `json:"account_login,omitempty"`
	AccountType  string `json:"account_type,omitempty"`
	AppID        int64  `json:"app_id,omitempty"`
}

// RepositoryChanges are the "changes" of a repository event, where the control plane cares.
type RepositoryChanges struct {
	// renamed: the previous name.
	NameFrom string `json:"name_from,omitempty"`
	// edited: the previous default branch.
	DefaultBranchFrom string `json:"default_branch_from,omitempty"`
	// transferred: the previous owner's login.
	OwnerFrom string `json:"owner_from,omitempty"`
}

// Push is what a push needs for release detection.
type Push struct {
	Ref    string `json:"ref"`
	Before string `json:"before,omitempty"`
	// After is what the ref points to after the push: for an annotated tag, the tag object, not
	// a commit.
	After string `json:"after"`
	// HeadSHA is the commit the push leaves at the ref's head (head_commit.id), which GitHub sends
	// on every tag creation: the tagged commit, also for an annotated tag. Empty when the payload
	// has none (a deletion); a release run's commit is HeadSHA, else After (migration 00075).
	HeadSHA string `json:"head_sha,omitempty"`
	Created bool   `json:"created"`
	Deleted bool   `json:"deleted"`
	Forced  bool   `json:"forced,omitempty"`
}

// CheckRun identifies a check run (rerequested, completed, ...).
type CheckRun struct {
	ID         int64  `json:"id"`
	ExternalID string `json:"external_id,omitempty"`
	AppID      int64  `json:"app_id,omitempty"`
	HeadSHA    string `json:"head_sha,omitempty"`
	Name       string `json:"name,omitempty"`
	Status     string `json:"status,omitempty"`
	Conclusion string `json:"conclusion,omitempty"`
	// RequestedAction is the identifier of the button pressed (requested_action only).
	RequestedAction string `json:"requested_action,omitempty"`
	// Sender is who pressed "Re-run" or a requested action (rerequested, requested_action): the
	// name written into the audit row and onto the check run.
	SenderLogin string `json:"sender_login,omitempty"`
	SenderID    int64  `json:"sender_id,omitempty"`
	SenderType  string `json:"sender_type,omitempty"`
}

// CheckSuite is the check suite of one App on one commit: GitHub's "Re-run all checks" and
// "Re-run failed checks" send it as rerequested to the App that owns the suite.
type CheckSuite struct {
	ID      int64  `json:"id"`
	AppID   int64  `json:"app_id,omitempty"`
	HeadSHA string `json:"head_sha"`
	// Sender is who pressed the button: the name written onto the check runs it answers.
	SenderLogin string `json:"sender_login,omitempty"`
	SenderType  string `json:"sender_type,omitempty"`
}

// WorkflowRun is a workflow run's progress.
type WorkflowRun struct {
	ID           int64  `json:"id"`
	RunAttempt   int    `json:"run_attempt,omitempty"`
	Status       string `json:"status,omitempty"`
	Conclusion   string `json:"conclusion,omitempty"`
	Path         string `json:"path,omitempty"`
	HeadSHA      string `json:"head_sha,omitempty"`
	HeadBranch   string `json:"head_branch,omitempty"`
	Event        string `json:"event,omitempty"`
	Name         string `json:"name,omitempty"`
	DisplayTitle string `json:"display_title,omitempty"`
	HTMLURL      string `json:"html_url,omitempty"`
}

// Ping is the hook's identity on a ping.
type Ping struct {
	HookID int64 `json:"hook_id,omitempty"`
	AppID  int64 `json:"app_id,omitempty"`
}
