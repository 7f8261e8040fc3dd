package eventdoc_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
)

// Every fixture (one per handled event and action) is filtered or kept as docs/webhooks.md says.
// A new fixture must be added here, so no event is kept or dropped by accident.
func TestFilterFixtures(t *testing.T) {
	t.Parallel()
	want := map[string]string{ // fixture → reason ("" = kept)
		"check_run.completed":                   eventdoc.FilterActionUnused,
		"check_run.created":                     eventdoc.FilterActionUnused,
		"check_run.rerequested":                 "",
		"check_run.requested_action":            "",
		"check_suite.completed":                 eventdoc.FilterActionUnused,
		"check_suite.requested":                 eventdoc.FilterActionUnused,
		"check_suite.rerequested":               "",
		"installation.created":                  "",
		"installation.deleted":                  "",
		"installation.new_permissions_accepted": "",
		"installation.suspend":                  "",
		"installation.unsuspend":                "",
		"installation_repositories.added":       "",
		"installation_repositories.removed":     "",
		"ping":                                  "",
		"push.branch":                           eventdoc.FilterBranchPush,
		"push.tag_created":                      "",
		"push.tag_created_annotated":            "",
		"push.tag_deleted":                      eventdoc.FilterTagNotCreated,
		"repository.archived":                   "",
		"repository.deleted":                    "",
		"repository.edited":                     "",
		"repository.renamed":                    "",
		"repository.transferred":                "",
		"repository.unarchived":                 "",
		"workflow_run.completed":                "",
		"workflow_run.in_progress":              eventdoc.FilterActionUnused,
		"workflow_run.requested":                eventdoc.FilterActionUnused,
	}
	files, err := filepath.Glob("testdata/payloads/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			reason, listed := want[name]
			if !listed {
				t.Fatalf("fixture %s is not in this table: decide whether it is filtered", name)
			}
			event, _, _ := strings.Cut(name, ".")
			payload, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := eventdoc.Normalize(event, payload)
			if err != nil {
				t.Fatal(err)
			}
			got, filtered := eventdoc.Filter(&doc)
			if got != reason || filtered != (reason != "") {
				t.Fatalf("Filter = %q, %v; want %q", got, filtered, reason)
			}
		})
	}
}

// The rules one field at a time, including what must be kept: the actions lifecycle acts on
// (or will: check_run requested_action), and any action or event it does not know yet.
func TestFilterRules(t *testing.T) {
	t.Parallel()
	push := func(ref string, created, deleted bool) eventdoc.Document {
		return eventdoc.Document{Event: eventdoc.EventPush, Push: &eventdoc.Push{Ref: ref, Created: created, Deleted: deleted}}
	}
	run := func(action, trigger string) eventdoc.Document {
		return eventdoc.Document{Event: eventdoc.EventWorkflowRun, Action: action, WorkflowRun: &eventdoc.WorkflowRun{ID: 1, Event: trigger}}
	}
	rerun := func(action, trigger string, attempt int) eventdoc.Document {
		d := run(action, trigger)
		d.WorkflowRun.RunAttempt = attempt
		return d
	}
	check := func(action string) eventdoc.Document {
		return eventdoc.Document{Event: eventdoc.EventCheckRun, Action: action, CheckRun: &eventdoc.CheckRun{ID: 1, SenderType: "User"}}
	}
	byBot := func(d eventdoc.Document) eventdoc.Document {
		if d.CheckRun != nil {
			d.CheckRun.SenderType = "Bot"
		}
		if d.CheckSuite != nil {
			d.CheckSuite.SenderType = "Bot"
		}
		return d
	}
	suite := func(action string) eventdoc.Document {
		return eventdoc.Document{Event: eventdoc.EventCheckSuite, Action: action, CheckSuite: &eventdoc.CheckSuite{ID: 1, SenderType: "User"}}
	}
	tests := []struct {
		name string
		doc  eventdoc.Document
		want string
	}{
		{"tag created", push("refs/tags/v1.2.3", true, false), ""},
		{"tag created, nested name", push("refs/tags/release/v1", true, false), ""},
		{"branch created", push("refs/heads/main", true, false), eventdoc.FilterBranchPush},
		{"branch updated", push("refs/heads/feature/x", false, false), eventdoc.FilterBranchPush},
		{"branch deleted", push("refs/heads/old", false, true), eventdoc.FilterBranchPush},
		{"notes ref", push("refs/notes/commits", false, false), eventdoc.FilterBranchPush},
		{"empty tag name", push("refs/tags/", true, false), eventdoc.FilterBranchPush},
		{"tag prefix only in the middle", push("refs/heads/refs/tags/v1", true, false), eventdoc.FilterBranchPush},
		{"tag moved", push("refs/tags/v1", false, false), eventdoc.FilterTagNotCreated},
		{"tag deleted", push("refs/tags/v1", false, true), eventdoc.FilterTagNotCreated},
		{"push without push section", eventdoc.Document{Event: eventdoc.EventPush}, ""},

		{"dispatched run completed", run("completed", "workflow_dispatch"), ""},
		{"dispatched run requested", run("requested", "workflow_dispatch"), eventdoc.FilterActionUnused},
		{"dispatched run in progress", run("in_progress", "workflow_dispatch"), eventdoc.FilterActionUnused},
		{"CI run completed", run("completed", "push"), eventdoc.FilterNotDispatched},
		{"pull request run completed", run("completed", "pull_request"), eventdoc.FilterNotDispatched},
		{"scheduled run completed", run("completed", "schedule"), eventdoc.FilterNotDispatched},
		{"run without trigger", run("completed", ""), eventdoc.FilterNotDispatched},
		{"CI run requested", run("requested", "push"), eventdoc.FilterActionUnused},
		{"dispatched run, run attempt 1, in progress", rerun("in_progress", "workflow_dispatch", 1), eventdoc.FilterActionUnused},
		{"Actions-UI re-run requested (run attempt 2)", rerun("requested", "workflow_dispatch", 2), ""},
		{"Actions-UI re-run in progress (run attempt 3)", rerun("in_progress", "workflow_dispatch", 3), ""},
		{"CI re-run in progress (run attempt 2)", rerun("in_progress", "push", 2), eventdoc.FilterNotDispatched},
		{"unknown action of a dispatched run", run("waiting", "workflow_dispatch"), ""},
		{"workflow_run without section", eventdoc.Document{Event: eventdoc.EventWorkflowRun, Action: "completed"}, ""},

		{"check run rerequested", check("rerequested"), ""},
		{"check run requested action (Retry)", check("requested_action"), ""},
		{"check run created", check("created"), eventdoc.FilterActionUnused},
		{"check run completed", check("completed"), eventdoc.FilterActionUnused},
		{"unknown check run action", check("something_new"), ""},
		{"check run rerequested by a bot", byBot(check("rerequested")), eventdoc.FilterBotSender},
		{"check run requested action by a bot", byBot(check("requested_action")), eventdoc.FilterBotSender},
		{"check run completed, a bot's", byBot(check("completed")), eventdoc.FilterActionUnused},
		{"check run rerequested, no sender", eventdoc.Document{Event: eventdoc.EventCheckRun, Action: "rerequested", CheckRun: &eventdoc.CheckRun{ID: 1}}, ""},

		{"check suite rerequested", suite("rerequested"), ""},
		{"check suite requested", suite("requested"), eventdoc.FilterActionUnused},
		{"check suite completed", suite("completed"), eventdoc.FilterActionUnused},
		{"check suite rerequested by a bot", byBot(suite("rerequested")), eventdoc.FilterBotSender},
		{"unknown check suite action", suite("something_new"), ""},

		{"installation", eventdoc.Document{Event: eventdoc.EventInstallation, Action: "created"}, ""},
		{"installation_repositories", eventdoc.Document{Event: eventdoc.EventInstallationRepositories, Action: "added"}, ""},
		{"repository", eventdoc.Document{Event: eventdoc.EventRepository, Action: "renamed"}, ""},
		{"ping", eventdoc.Document{Event: eventdoc.EventPing}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, filtered := eventdoc.Filter(&tt.doc)
			if got != tt.want || filtered != (tt.want != "") {
				t.Fatalf("Filter = %q, %v; want %q", got, filtered, tt.want)
			}
			if filtered && !listedRule(tt.doc.Event, got) {
				t.Fatalf("(%s, %s) is not in FilterRules", tt.doc.Event, got)
			}
		})
	}
}

func listedRule(event, reason string) bool {
	for _, r := range eventdoc.FilterRules {
		if r.Event == event && r.Reason == reason {
			return true
		}
	}
	return false
}
