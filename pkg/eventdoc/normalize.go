package eventdoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// ErrMalformed means the payload is not a well-formed delivery of its event: not a JSON object,
// or lacking a field the control plane needs.
var ErrMalformed = errors.New("malformed payload")

// The raw shapes, with only the fields read. encoding/json ignores everything else.
type (
	rawAccount struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	}
	rawInstallation struct {
		ID                  int64       `json:"id"`
		Account             *rawAccount `json:"account"`
		AppID               int64       `json:"app_id"`
		RepositorySelection string      `json:"repository_selection"`
	}
	rawRepository struct {
		ID            int64      `json:"id"`
		Name          string     `json:"name"`
		FullName      string     `json:"full_name"`
		DefaultBranch string     `json:"default_branch"`
		Archived      bool       `json:"archived"`
		Owner         rawAccount `json:"owner"`
	}
	rawRepositoryRef struct {
		ID       int64  `json:"id"`
		FullName string `json:"full_name"`
	}
	rawFrom struct {
		From string `json:"from"`
	}
	rawChanges struct {
		Repository *struct {
			Name *rawFrom `json:"name"`
		} `json:"repository"`
		DefaultBranch *rawFrom `json:"default_branch"`
		Owner         *struct {
			From struct {
				User         *rawAccount `json:"user"`
				Organization *rawAccount `json:"organization"`
			} `json:"from"`
		} `json:"owner"`
	}
	rawCheckRun struct {
		ID         int64  `json:"id"`
		ExternalID string `json:"external_id"`
		HeadSHA    string `json:"head_sha"`
		Name       string `json:"name"`
		Status     string `json:"status"`
		Conclusion string `json:"conclusion"`
		App        struct {
			ID int64 `json:"id"`
		} `json:"app"`
	}
	rawCheckSuite struct {
		ID      int64  `json:"id"`
		HeadSHA string `json:"head_sha"`
		App     struct {
			ID int64 `json:"id"`
		} `json:"app"`
	}
	rawWorkflowRun struct {
		ID           int64  `json:"id"`
		RunAttempt   int    `json:"run_attempt"`
		Status       string `json:"status"`
		Conclusion   string `json:"conclusion"`
		Path         string `json:"path"`
		HeadSHA      string `json:"head_sha"`
		HeadBranch   string `json:"head_branch"`
		Event        string `json:"event"`
		Name         string `json:"name"`
		DisplayTitle string `json:"display_title"`
		HTMLURL      string `json:"html_url"`
	}
	rawPayload struct {
		Action              *string             `json:"action"`
		Installation        *rawInstallation    `json:"installation"`
		Repository          *rawRepository      `json:"repository"`
		Repositories        []rawRepositoryRef  `json:"repositories"`
		RepositoriesAdded   *[]rawRepositoryRef `json:"repositories_added"`
		RepositoriesRemoved *[]rawRepositoryRef `json:"repositories_removed"`
		RepositorySelection string              `json:"repository_selection"`
		Changes             *rawChanges         `json:"changes"`
		// push
		Ref    string  `json:"ref"`
		Before *string `json:"before"`
		After  string  `json:"after"`
		// The commit at the ref's head: for an annotated tag, the tagged commit where after is
		// the tag object.
		HeadCommit *struct {
			ID string `json:"id"`
		} `json:"head_commit"`
		Created bool `json:"created"`
		Deleted bool `json:"deleted"`
		Forced  bool `json:"forced"`

		CheckRun        *rawCheckRun   `json:"check_run"`
		CheckSuite      *rawCheckSuite `json:"check_suite"`
		RequestedAction *struct {
			Identifier string `json:"identifier"`
		} `json:"requested_action"`
		Sender *struct {
			Login string `json:"login"`
			ID    int64  `json:"id"`
			Type  string `json:"type"`
		} `json:"sender"`
		WorkflowRun *rawWorkflowRun `json:"workflow_run"`
		// ping
		Zen    *string `json:"zen"`
		HookID int64   `json:"hook_id"`
		Hook   *struct {
			AppID int64 `json:"app_id"`
		} `json:"hook"`
	}
)

var (
	shaPattern    = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)
	actionPattern = regexp.MustCompile(`^[a-z_]{1,64}$`)
	// fullNamePattern is GitHub's owner/name character set: an owner login of letters, digits,
	// hyphens (and the underscore of Enterprise Managed Users), at most 39 characters, not starting
	// with a hyphen; a repository name of letters, digits, '.', '-' and '_', at most 100. Nothing
	// else reaches a URL path (/repos/{owner}/{repo}/...): no '/', '%', '?', '#', '..' or space.
	fullNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,38}/[A-Za-z0-9._-]{1,100}$`)
)

// ValidFullName reports whether s is a repository full name in GitHub's owner/name character set
// (and not "." or ".." as the name).
func ValidFullName(s string) bool {
	if !fullNamePattern.MatchString(s) {
		return false
	}
	_, name, _ := strings.Cut(s, "/")
	return name != "." && name != ".."
}

// Field length bounds (bytes).
const (
	maxName   = 255
	maxRef    = 512
	maxURL    = 1024
	maxTitle  = 512
	maxStatus = 64
)

// Normalize parses a handled event's JSON payload into its document. The event must be one of
// HandledEvents.
func Normalize(event string, payload []byte) (Document, error) {
	if !Handled(event) {
		return Document{}, fmt.Errorf("%w: event %q is not handled", ErrMalformed, event)
	}
	trimmed := bytes.TrimLeft(payload, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return Document{}, fmt.Errorf("%w: payload is not a JSON object", ErrMalformed)
	}
	var raw rawPayload
	if err := json.Unmarshal(payload, &raw); err != nil {
		return Document{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	action := ""
	if raw.Action != nil {
		action = *raw.Action
		if !actionPattern.MatchString(action) {
			return Document{}, fmt.Errorf("%w: action %q", ErrMalformed, cut(action, 64))
		}
	}
	if err := requireShape(event, &raw); err != nil {
		return Document{}, err
	}
	doc := Document{Event: event, Action: action}
	if raw.Installation != nil {
		doc.InstallationID = raw.Installation.ID
	}
	if event != EventPing && doc.InstallationID <= 0 {
		return Document{}, fmt.Errorf("%w: %s delivery without installation id (not sent to a GitHub App?)", ErrMalformed, event)
	}
	if raw.Repository != nil {
		if !ValidFullName(raw.Repository.FullName) {
			return Document{}, fmt.Errorf("%w: repository.full_name %q is not a GitHub owner/name", ErrMalformed, cut(raw.Repository.FullName, 64))
		}
		doc.Repository = &Repository{
			ID: raw.Repository.ID, FullName: raw.Repository.FullName, Name: cut(raw.Repository.Name, maxName),
			DefaultBranch: cut(raw.Repository.DefaultBranch, maxName), Archived: raw.Repository.Archived,
			OwnerLogin: cut(raw.Repository.Owner.Login, maxName), OwnerType: cut(raw.Repository.Owner.Type, maxStatus),
		}
	}
	var err error
	switch event {
	case EventInstallation:
		err = normalizeInstallation(&doc, &raw)
	case EventInstallationRepositories:
		err = normalizeInstallationRepositories(&doc, &raw)
	case EventRepository:
		err = normalizeRepository(&doc, &raw)
	case EventPush:
		err = normalizePush(&doc, &raw)
	case EventCheckRun:
		err = normalizeCheckRun(&doc, &raw)
	case EventCheckSuite:
		err = normalizeCheckSuite(&doc, &raw)
	case EventWorkflowRun:
		err = normalizeWorkflowRun(&doc, &raw)
	case EventPing:
		doc.Ping = &Ping{HookID: raw.HookID}
		if raw.Hook != nil {
			doc.Ping.AppID = raw.Hook.AppID
		}
	}
	if err != nil {
		return Document{}, err
	}
	return doc, nil
}

func installationOf(raw *rawPayload) *Installation {
	in := raw.Installation
	return &Installation{ID: in.ID, AccountLogin: cut(in.Account.Login, maxName), AccountType: cut(in.Account.Type, maxStatus), AppID: in.AppID}
}

func normalizeInstallation(doc *Document, raw *rawPayload) error {
	doc.Installation = installationOf(raw)
	doc.RepositorySelection = cut(raw.Installation.RepositorySelection, maxStatus)
	var truncated bool
	var err error
	budget := repositoryListBytes
	if doc.Repositories, truncated, err = refs(raw.Repositories, &budget); err != nil {
		return err
	}
	doc.RepositoriesTruncated = truncated
	return nil
}

func normalizeInstallationRepositories(doc *Document, raw *rawPayload) error {
	doc.Installation = installationOf(raw)
	doc.RepositorySelection = cut(raw.RepositorySelection, maxStatus)
	var t1, t2 bool
	var err error
	budget := repositoryListBytes
	if doc.RepositoriesAdded, t1, err = refs(*raw.RepositoriesAdded, &budget); err != nil {
		return err
	}
	if doc.RepositoriesRemoved, t2, err = refs(*raw.RepositoriesRemoved, &budget); err != nil {
		return err
	}
	doc.RepositoriesTruncated = t1 || t2
	return nil
}

func normalizeRepository(doc *Document, raw *rawPayload) error {
	if err := requireRepository(doc); err != nil {
		return err
	}
	if c := raw.Changes; c != nil {
		ch := &RepositoryChanges{}
		if c.Repository != nil && c.Repository.Name != nil {
			ch.NameFrom = cut(c.Repository.Name.From, maxName)
		}
		if c.DefaultBranch != nil {
			ch.DefaultBranchFrom = cut(c.DefaultBranch.From, maxName)
		}
		if c.Owner != nil {
			if u := c.Owner.From.User; u != nil {
				ch.OwnerFrom = cut(u.Login, maxName)
			} else if o := c.Owner.From.Organization; o != nil {
				ch.OwnerFrom = cut(o.Login, maxName)
			}
		}
		if *ch != (RepositoryChanges{}) {
			doc.Changes = ch
		}
	}
	return nil
}

func normalizePush(doc *Document, raw *rawPayload) error {
	if err := requireRepository(doc); err != nil {
		return err
	}
	ref := raw.Ref
	if len(ref) > maxRef && !strings.HasPrefix(ref, "refs/tags/") {
		// A branch (or notes, …) ref longer than the bound: git sets none, and refusing it with 400
		// only had GitHub's redelivery ask again. Cut, it stays a branch push, which the filter
		// drops and lifecycle ignores; a tag that long is refused (a cut tag would name another).
		ref = cut(ref, maxRef)
	}
	if ref == "" || len(ref) > maxRef {
		return fmt.Errorf("%w: push without a valid ref (a tag ref is at most %d bytes)", ErrMalformed, maxRef)
	}
	if !shaPattern.MatchString(raw.After) {
		return fmt.Errorf("%w: push with invalid after SHA", ErrMalformed)
	}
	doc.Push = &Push{Ref: ref, Before: cut(*raw.Before, 64), After: raw.After, Created: raw.Created, Deleted: raw.Deleted, Forced: raw.Forced}
	if raw.HeadCommit != nil && raw.HeadCommit.ID != "" {
		if !shaPattern.MatchString(raw.HeadCommit.ID) {
			return fmt.Errorf("%w: push with invalid head_commit id", ErrMalformed)
		}
		doc.Push.HeadSHA = raw.HeadCommit.ID
	}
	return nil
}

func normalizeCheckRun(doc *Document, raw *rawPayload) error {
	if err := requireRepository(doc); err != nil {
		return err
	}
	cr := raw.CheckRun
	if cr == nil || cr.ID <= 0 {
		return fmt.Errorf("%w: check_run without id", ErrMalformed)
	}
	doc.CheckRun = &CheckRun{
		ID: cr.ID, ExternalID: cut(cr.ExternalID, maxName), AppID: cr.App.ID, HeadSHA: cut(cr.HeadSHA, 64),
		Name: cut(cr.Name, maxName), Status: cut(cr.Status, maxStatus), Conclusion: cut(cr.Conclusion, maxStatus),
	}
	if raw.RequestedAction != nil {
		doc.CheckRun.RequestedAction = cut(raw.RequestedAction.Identifier, maxStatus)
	}
	if raw.Sender != nil {
		doc.CheckRun.SenderLogin = cut(raw.Sender.Login, maxStatus)
		doc.CheckRun.SenderID = raw.Sender.ID
		doc.CheckRun.SenderType = cut(raw.Sender.Type, maxStatus)
	}
	return nil
}

func normalizeCheckSuite(doc *Document, raw *rawPayload) error {
	if err := requireRepository(doc); err != nil {
		return err
	}
	cs := raw.CheckSuite
	if cs == nil || cs.ID <= 0 {
		return fmt.Errorf("%w: check_suite without id", ErrMalformed)
	}
	if !shaPattern.MatchString(cs.HeadSHA) {
		return fmt.Errorf("%w: check_suite with invalid head_sha", ErrMalformed)
	}
	doc.CheckSuite = &CheckSuite{ID: cs.ID, AppID: cs.App.ID, HeadSHA: cs.HeadSHA}
	if raw.Sender != nil {
		doc.CheckSuite.SenderLogin = cut(raw.Sender.Login, maxStatus)
		doc.CheckSuite.SenderType = cut(raw.Sender.Type, maxStatus)
	}
	return nil
}

func normalizeWorkflowRun(doc *Document, raw *rawPayload) error {
	if err := requireRepository(doc); err != nil {
		return err
	}
	wr := raw.WorkflowRun
	if wr == nil || wr.ID <= 0 {
		return fmt.Errorf("%w: workflow_run without id", ErrMalformed)
	}
	doc.WorkflowRun = &WorkflowRun{
		ID: wr.ID, RunAttempt: wr.RunAttempt, Status: cut(wr.Status, maxStatus), Conclusion: cut(wr.Conclusion, maxStatus),
		Path: cut(wr.Path, maxRef), HeadSHA: cut(wr.HeadSHA, 64), HeadBranch: cut(wr.HeadBranch, maxRef),
		Event: cut(wr.Event, maxStatus), Name: cut(wr.Name, maxTitle), DisplayTitle: cut(wr.DisplayTitle, maxTitle),
		HTMLURL: cut(wr.HTMLURL, maxURL),
	}
	return nil
}

func requireRepository(doc *Document) error {
	if doc.Repository == nil || doc.Repository.ID <= 0 || doc.Repository.FullName == "" {
		return fmt.Errorf("%w: %s delivery without repository id and full name", ErrMalformed, doc.Event)
	}
	return nil
}

// repositoryListBytes bounds the repository lists of one document together, counted as
// repositoryRefBytes plus the full name per entry: an entry takes 49 bytes and its name in jsonb
// (pg_column_size), fewer as JSON text, and the rest of an installation document is a few KiB,
// so a document stays within the inbox's 1 MiB whatever its names' lengths (10,000 names of 140
// bytes would be 1.9 MB). TestLargestDocumentsAreStored (services/ingest) stores the worst case.
const (
	repositoryListBytes = 1_000_000
	repositoryRefBytes  = 52
)

// refs bounds a repository list, to MaxRepositories entries and to what is left of the document's
// budget (*budget, in repositoryListBytes' measure, shared by its lists); an entry whose full name
// is not a GitHub owner/name refuses the whole delivery (the names become URL paths). It reports
// whether the list was cut.
func refs(in []rawRepositoryRef, budget *int) ([]RepositoryRef, bool, error) {
	truncated := len(in) > MaxRepositories
	if truncated {
		in = in[:MaxRepositories]
	}
	if len(in) == 0 {
		return nil, truncated, nil
	}
	out := make([]RepositoryRef, 0, len(in))
	for _, r := range in {
		if r.ID <= 0 {
			continue
		}
		if !ValidFullName(r.FullName) {
			return nil, false, fmt.Errorf("%w: repository full_name %q is not a GitHub owner/name", ErrMalformed, cut(r.FullName, 64))
		}
		cost := repositoryRefBytes + len(r.FullName)
		if cost > *budget {
			// The rest is left out, unchecked: it is not stored.
			return out, true, nil
		}
		*budget -= cost
		out = append(out, RepositoryRef(r))
	}
	return out, truncated, nil
}

// cut bounds s to at most n bytes without splitting a UTF-8 sequence, replaces invalid UTF-8 and
// drops NUL characters, which PostgreSQL's jsonb refuses.
func cut(s string, n int) string {
	if !utf8.ValidString(s) {
		s = string([]rune(s)) // replaces invalid bytes with U+FFFD
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
