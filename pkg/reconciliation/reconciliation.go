// Package reconciliation holds the one decision about a workflow dispatch whose outcome is
// unknown (reconciliation_required): which of the workflow's runs on GitHub it created. brops
// reconcile inspect shows it, brops reconcile auto acts on it, and the chaos suite's invariant
// checker calls reconcile auto instead of deciding for itself.
//
// An exact match is a run whose name carries both the release-run and the execution-attempt id
// (release workflows set run-name from those inputs), whose head SHA is the release's commit and
// whose head branch is the release's tag. Only a record with exactly one exact match is resolved
// without a person.
package reconciliation

import (
	"fmt"
	"strings"

	"github.com/boardreadyops/cloud/pkg/githubapp"
)

// Match classes of a candidate run, from the strongest.
const (
	// MatchExact: name, head SHA and head branch are the dispatch's.
	MatchExact = "exact"
	// MatchNameOnly: the name carries both ids but the commit or the branch is another (a decoy:
	// a run of the same name on another branch or SHA). Never resolved automatically.
	MatchNameOnly = "name_only"
	// MatchReleaseRun: the name carries the release-run id only (another attempt of the run).
	MatchReleaseRun = "release_run"
	// MatchTag: a run of the workflow for the same tag and commit, named for none of this
	// attempt's ids (after a restore: the lost incarnation of this release).
	MatchTag = "tag"
	// MatchNone: a dispatch in the window, related by nothing but time.
	MatchNone = "none"
)

// Dispatch is what the decision reads of a workflow dispatch's payload.
type Dispatch struct {
	ReleaseRunID       string `json:"release_run_id"`
	ExecutionAttemptID string `json:"execution_attempt_id"`
	Ref                string `json:"ref"`
	HeadSHA            string `json:"head_sha"`
}

// Tag is the dispatch's tag name (its ref without refs/tags/).
func (d Dispatch) Tag() string { return strings.TrimPrefix(d.Ref, "refs/tags/") }

// Classify returns the match class of run r for dispatch d.
func Classify(d Dispatch, r githubapp.WorkflowRun) string {
	title := r.DisplayTitle + " " + r.Name
	named := d.ReleaseRunID != "" && strings.Contains(title, d.ReleaseRunID)
	sameCommit := d.HeadSHA != "" && strings.EqualFold(r.HeadSHA, d.HeadSHA) && r.HeadBranch != "" && r.HeadBranch == d.Tag()
	switch {
	case named && d.ExecutionAttemptID != "" && strings.Contains(title, d.ExecutionAttemptID) && sameCommit:
		return MatchExact
	case named && d.ExecutionAttemptID != "" && strings.Contains(title, d.ExecutionAttemptID):
		return MatchNameOnly
	case named:
		return MatchReleaseRun
	case sameCommit:
		return MatchTag
	}
	return MatchNone
}

// Candidate is a run with its match class.
type Candidate struct {
	githubapp.WorkflowRun
	Match string `json:"match"`
}

// Candidates classifies every run.
func Candidates(d Dispatch, runs []githubapp.WorkflowRun) []Candidate {
	out := make([]Candidate, 0, len(runs))
	for _, r := range runs {
		out = append(out, Candidate{WorkflowRun: r, Match: Classify(d, r)})
	}
	return out
}

// Decision is what may be done without a person.
type Decision struct {
	// Resolve is true only with exactly one exact match: WorkflowRunID is the run GitHub
	// created for the dispatch.
	Resolve       bool  `json:"resolve"`
	WorkflowRunID int64 `json:"workflow_run_id,omitempty"`
	// Reason says why, in words for the audit trail and the operator.
	Reason string `json:"reason"`
	// Exact, NameOnly and Tag are the ids of the runs of each class.
	Exact    []int64 `json:"exact,omitempty"`
	NameOnly []int64 `json:"name_only,omitempty"`
	Tag      []int64 `json:"tag,omitempty"`
}

// Decide decides for candidates of one dispatch.
func Decide(cands []Candidate) Decision {
	var d Decision
	for _, c := range cands {
		switch c.Match {
		case MatchExact:
			d.Exact = append(d.Exact, c.ID)
		case MatchNameOnly:
			d.NameOnly = append(d.NameOnly, c.ID)
		case MatchTag:
			d.Tag = append(d.Tag, c.ID)
		}
	}
	switch {
	case len(d.Exact) == 1:
		d.Resolve, d.WorkflowRunID = true, d.Exact[0]
		d.Reason = fmt.Sprintf("run %d is the only exact match (run name, head SHA, tag as head branch)", d.Exact[0])
	case len(d.Exact) > 1:
		d.Reason = fmt.Sprintf("%d runs match exactly: the dispatch may have run twice; a person must look", len(d.Exact))
	case len(d.NameOnly) > 0:
		d.Reason = fmt.Sprintf("run(s) %v carry this attempt's ids on another branch or commit: left for a person", d.NameOnly)
	case len(d.Tag) > 0:
		d.Reason = fmt.Sprintf("no run is named for this attempt; %d run(s) of the same tag and commit: left for a person (adopt after a restore)", len(d.Tag))
	case len(cands) == 0:
		d.Reason = "no workflow_dispatch run since the delivery started: left for a person (--not-dispatched once enough time has passed)"
	default:
		d.Reason = "no run is named for this attempt: left for a person"
	}
	return d
}
