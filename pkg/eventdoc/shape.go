package eventdoc

import "fmt"

// Shapes: the fields each handled event's payload must carry. The signature covers the body but
// not the X-GitHub-Event header, so a signed body of one event can be resent under another event's
// name; requiring each event's own fields refuses such a body before it is stored (a
// repository.deleted body has no installation.account, so it cannot pass as installation.deleted).
// docs/webhooks.md lists the same sets.
var shapes = map[string][]shapeRule{
	EventInstallation: {
		hasAction, {"installation.account.login", func(r *rawPayload) bool {
			return r.Installation != nil && r.Installation.Account != nil && r.Installation.Account.Login != ""
		}},
	},
	EventInstallationRepositories: {
		hasAction, {"installation.account.login", func(r *rawPayload) bool {
			return r.Installation != nil && r.Installation.Account != nil && r.Installation.Account.Login != ""
		}},
		{"repository_selection", func(r *rawPayload) bool { return r.RepositorySelection != "" }},
		{"repositories_added", func(r *rawPayload) bool { return r.RepositoriesAdded != nil }},
		{"repositories_removed", func(r *rawPayload) bool { return r.RepositoriesRemoved != nil }},
	},
	EventRepository: {hasAction, hasRepository},
	EventPush: {
		{"ref", func(r *rawPayload) bool { return r.Ref != "" }},
		{"before", func(r *rawPayload) bool { return r.Before != nil }},
		{"after", func(r *rawPayload) bool { return r.After != "" }},
		hasRepository,
		// GitHub's push payload has no action; every other repository-level event has one.
		{"no action", func(r *rawPayload) bool { return r.Action == nil }},
	},
	EventCheckRun: {
		hasAction, hasRepository,
		{"check_run.id", func(r *rawPayload) bool { return r.CheckRun != nil && r.CheckRun.ID > 0 }},
		{"check_run.head_sha", func(r *rawPayload) bool { return r.CheckRun != nil && r.CheckRun.HeadSHA != "" }},
	},
	EventCheckSuite: {
		hasAction, hasRepository,
		{"check_suite.id", func(r *rawPayload) bool { return r.CheckSuite != nil && r.CheckSuite.ID > 0 }},
		{"check_suite.head_sha", func(r *rawPayload) bool { return r.CheckSuite != nil && r.CheckSuite.HeadSHA != "" }},
	},
	EventWorkflowRun: {
		hasAction, hasRepository,
		{"workflow_run.id", func(r *rawPayload) bool { return r.WorkflowRun != nil && r.WorkflowRun.ID > 0 }},
		{"workflow_run.status", func(r *rawPayload) bool { return r.WorkflowRun != nil && r.WorkflowRun.Status != "" }},
	},
	EventPing: {
		{"zen", func(r *rawPayload) bool { return r.Zen != nil }},
		{"hook_id", func(r *rawPayload) bool { return r.HookID > 0 }},
	},
}

type shapeRule struct {
	field   string
	present func(*rawPayload) bool
}

var (
	hasAction     = shapeRule{"action", func(r *rawPayload) bool { return r.Action != nil && *r.Action != "" }}
	hasRepository = shapeRule{"repository.id and repository.full_name", func(r *rawPayload) bool {
		return r.Repository != nil && r.Repository.ID > 0 && r.Repository.FullName != ""
	}}
)

// distinctive are the top-level fields that mark one event's payload; a payload of any other
// event must not carry them, so no handled event's body passes as another's.
var distinctive = []struct {
	event, field string
	present      func(*rawPayload) bool
}{
	{EventInstallationRepositories, "repositories_added", func(r *rawPayload) bool { return r.RepositoriesAdded != nil }},
	{EventPush, "ref", func(r *rawPayload) bool { return r.Ref != "" }},
	{EventCheckRun, "check_run", func(r *rawPayload) bool { return r.CheckRun != nil }},
	{EventCheckSuite, "check_suite", func(r *rawPayload) bool { return r.CheckSuite != nil }},
	{EventWorkflowRun, "workflow_run", func(r *rawPayload) bool { return r.WorkflowRun != nil }},
	{EventPing, "hook_id", func(r *rawPayload) bool { return r.HookID != 0 }},
}

// RequiredFields lists, for docs and tests, the fields event's payload must carry.
func RequiredFields(event string) []string {
	var out []string
	for _, r := range shapes[event] {
		out = append(out, r.field)
	}
	return out
}

// requireShape refuses a payload that lacks a field its event always carries.
func requireShape(event string, raw *rawPayload) error {
	for _, r := range shapes[event] {
		if !r.present(raw) {
			return fmt.Errorf("%w: not a %s payload (needs %s)", ErrMalformed, event, r.field)
		}
	}
	for _, d := range distinctive {
		if d.event != event && d.present(raw) {
			return fmt.Errorf("%w: not a %s payload (%s belongs to %s)", ErrMalformed, event, d.field, d.event)
		}
	}
	return nil
}
