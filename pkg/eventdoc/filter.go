package eventdoc

import "strings"

// Reasons a delivery is filtered (metric label values, a closed set). Each names a rule of
// lifecycle's that ignores the delivery whatever the database holds, so storing it could never
// change anything: docs/webhooks.md ("Filtered deliveries") lists them with the rule they mirror.
const (
	// FilterBranchPush: a push of anything but a tag (refs/heads/*, refs/notes/*, …). Lifecycle
	// starts release runs from created tags only.
	FilterBranchPush = "branch_push"
	// FilterTagNotCreated: a push that deletes or moves an existing tag. Only a created tag starts
	// a release run.
	FilterTagNotCreated = "tag_not_created"
	// FilterNotDispatched: a workflow_run whose triggering event is not workflow_dispatch — CI the
	// product did not start. Lifecycle matches only runs it dispatched.
	FilterNotDispatched = "not_dispatched"
	// FilterActionUnused: an action lifecycle never acts on — workflow_run requested and
	// in_progress of a first run attempt (only completed finishes an attempt; a later run
	// attempt's are a re-run from the Actions UI and kept), check_run other than rerequested and
	// requested_action (created, completed: GitHub's echo of the product's own writes),
	// check_suite other than rerequested (requested on every push, completed: GitHub's own).
	FilterActionUnused = "action_unused"
	// FilterBotSender: a check_run rerequested or requested_action, or a check_suite
	// rerequested, sent by a bot — another App calling the Rerequest endpoints. A release is re-run
	// or retried by people only.
	FilterBotSender = "bot_sender"
)

// FilterRule is one (event, reason) pair the filter can report, for initialising metric series.
type FilterRule struct{ Event, Reason string }

// FilterRules lists every pair Filter can return.
var FilterRules = []FilterRule{
	{EventPush, FilterBranchPush},
	{EventPush, FilterTagNotCreated},
	{EventWorkflowRun, FilterNotDispatched},
	{EventWorkflowRun, FilterActionUnused},
	{EventCheckRun, FilterActionUnused},
	{EventCheckRun, FilterBotSender},
	{EventCheckSuite, FilterActionUnused},
	{EventCheckSuite, FilterBotSender},
}

// Filter reports whether a normalized delivery can never matter to the control plane, and why.
// It reads the document only (no database, no configuration), so it is cheap enough to run
// before anything is written. It errs towards keeping: an event, action or field it does not
// know is kept. Installation, repository and ping deliveries are always kept.
func Filter(doc *Document) (reason string, filtered bool) {
	switch doc.Event {
	case EventPush:
		if doc.Push == nil {
			return "", false
		}
		tag, isTag := strings.CutPrefix(doc.Push.Ref, "refs/tags/")
		if !isTag || tag == "" {
			return FilterBranchPush, true
		}
		if !doc.Push.Created || doc.Push.Deleted {
			return FilterTagNotCreated, true
		}
	case EventWorkflowRun:
		if doc.WorkflowRun == nil {
			return "", false
		}
		// The action first: requested and in_progress of a first run attempt are unused whoever
		// triggered the run (the attempt is running since its dispatch). Those of a later run
		// attempt are a re-run from the Actions UI, which lifecycle follows (docs/lifecycle.md).
		if (doc.Action == "requested" || doc.Action == "in_progress") && doc.WorkflowRun.RunAttempt <= 1 {
			return FilterActionUnused, true
		}
		if doc.WorkflowRun.Event != "workflow_dispatch" {
			return FilterNotDispatched, true
		}
	case EventCheckRun:
		switch doc.Action {
		case "created", "completed":
			return FilterActionUnused, true
		}
		if doc.CheckRun != nil && doc.CheckRun.SenderType == "Bot" {
			return FilterBotSender, true
		}
	case EventCheckSuite:
		// requested comes with every push to every repository the App can see, completed when a
		// suite's check runs are done: only "Re-run all checks" (rerequested) asks for anything.
		switch doc.Action {
		case "requested", "completed":
			return FilterActionUnused, true
		}
		if doc.CheckSuite != nil && doc.CheckSuite.SenderType == "Bot" {
			return FilterBotSender, true
		}
	}
	return "", false
}
