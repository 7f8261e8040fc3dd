package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

// delivery is one kind of webhook a load sends: its event header and a body template holding
// deliveryMark once (replaced by the delivery id, so every body is new).
type delivery struct {
	event string
	body  []byte
}

// Mixes of deliveries, sent in turn (each sender walks the list from its own offset).
//
// "release-tags" is the original ingest benchmark: release-tag pushes only, all stored.
//
// "organisation" is a busy organisation's traffic for one release, as GitHub sends it to an App
// installed on all repositories with the checks permission (docs/performance.md, "Delivery
// filter", states the assumptions): 10 branch pushes, each with GitHub's check_suite requested to
// the App and running 2 CI workflows (requested, in_progress, completed: 60 workflow_run webhooks;
// each workflow's job a check run of GitHub Actions' App, created and completed, and its suite
// completed: 60 check events); the release itself: 1 tag push (on a commit already pushed: no new
// suite), its dispatched workflow run's 3 webhooks with its job's 3 check events, GitHub's echo of
// the product's own check run (created, completed) and the completion of the product's suite.
// 150 deliveries, of which 2 can matter: the tag push and the dispatched run's completion.
//
// "organisation-without-checks" is the same without the check_suite and GitHub Actions' check
// events (76 deliveries): the mix as it was before 2026-12-07, whose figures docs/performance.md
// keeps.
var mixes = map[string]func() []delivery{
	"release-tags":                func() []delivery { return []delivery{{"push", pushBody()}} },
	"organisation":                func() []delivery { return organisationMix(true) },
	"organisation-without-checks": func() []delivery { return organisationMix(false) },
}

func mixNames() string {
	return "release-tags, organisation, organisation-without-checks"
}

func organisationMix(checks bool) []delivery {
	var out []delivery
	// A workflow run's webhooks, and with checks its job's check run and suite.
	workflow := func(trigger, file string) {
		for _, action := range []string{"requested", "in_progress", "completed"} {
			out = append(out, delivery{"workflow_run", workflowRunOf(action, trigger, file)})
		}
		if checks {
			out = append(out, delivery{"check_run", checkRunOf("created", actionsApp)}, delivery{"check_run", checkRunOf("completed", actionsApp)},
				delivery{"check_suite", checkSuiteOf("completed", actionsApp)})
		}
	}
	for p := 0; p < 10; p++ {
		out = append(out, delivery{"push", pushOf("refs/heads/feature-"+fmt.Sprint(p), false)})
		if checks {
			out = append(out, delivery{"check_suite", checkSuiteOf("requested", productApp)})
		}
		for w := 0; w < 2; w++ {
			workflow("push", fmt.Sprintf("ci-%d.yml", w))
		}
	}
	out = append(out, delivery{"push", pushBody()})
	workflow("workflow_dispatch", "boardreadyops-release.yml")
	// GitHub's echo of the product's own check run, and its suite's completion.
	out = append(out, delivery{"check_run", checkRunOf("created", productApp)}, delivery{"check_run", checkRunOf("completed", productApp)})
	if checks {
		out = append(out, delivery{"check_suite", checkSuiteOf("completed", productApp)})
	}
	return out
}

// The Apps whose check runs and suites the mix has: the product's (App id 1, its check run's
// name) and GitHub Actions' (a workflow job).
var (
	productApp = checkApp{id: 1, slug: "boardreadyops", checkRun: "BoardReadyOps release"}
	actionsApp = checkApp{id: 15368, slug: "github-actions", checkRun: "build"}
)

type checkApp struct {
	id             int64
	slug, checkRun string
}

// loadRepository is the repository every mixed delivery comes from, shaped like GitHub's.
var loadRepository = map[string]any{"id": 1296269, "name": "hello-world", "full_name": "octo-org/hello-world",
	"private": false, "default_branch": "main", "archived": false, "description": strings.Repeat("release tooling ", 40),
	"owner": map[string]any{"login": "octo-org", "id": 6811672, "type": "Organization"}}

var loadSender = map[string]any{"login": "octocat", "id": 583231, "type": "User"}

func pushOf(ref string, created bool) []byte {
	b, _ := json.Marshal(map[string]any{
		"ref": ref, "before": strings.Repeat("1", 40), "after": "6dcb09b5b57875f334f61aebed695e2e4193db5e",
		"created": created, "deleted": false, "forced": false, "base_ref": nil,
		"installation": map[string]any{"id": 55501}, "repository": loadRepository, "sender": loadSender,
		"head_commit": map[string]any{"id": "6dcb09b5b57875f334f61aebed695e2e4193db5e", "message": deliveryMark + " " + strings.Repeat("Change line. ", 60)},
		"commits":     []any{},
	})
	return b
}

func workflowRunOf(action, trigger, file string) []byte {
	status := map[string]string{"requested": "queued", "in_progress": "in_progress", "completed": "completed"}[action]
	run := map[string]any{"id": 30433642, "run_attempt": 1, "status": status, "event": trigger,
		"path": ".github/workflows/" + file, "head_sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e", "head_branch": "main",
		"name": file, "display_title": deliveryMark, "html_url": "https://github.com/octo-org/hello-world/actions/runs/30433642",
		"actor": loadSender, "head_commit": map[string]any{"message": strings.Repeat("Change line. ", 40)}}
	if action == "completed" {
		run["conclusion"] = "success"
	}
	b, _ := json.Marshal(map[string]any{"action": action, "workflow_run": run, "workflow": map[string]any{"id": 161335, "path": run["path"]},
		"installation": map[string]any{"id": 55501}, "repository": loadRepository, "sender": loadSender})
	return b
}

func checkRunOf(action string, app checkApp) []byte {
	run := map[string]any{"id": 4 + app.id, "head_sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e", "external_id": "3f0c5b8e-2a1d-4e6f-9b7a-1c2d3e4f5a6b",
		"name": app.checkRun, "status": "completed", "conclusion": "success", "app": map[string]any{"id": app.id, "slug": app.slug},
		"check_suite": map[string]any{"id": 5 + app.id, "head_sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e", "status": "completed"},
		"output":      map[string]any{"title": "Release success", "summary": deliveryMark}}
	if action == "created" {
		run["status"], run["conclusion"] = "in_progress", nil
	}
	b, _ := json.Marshal(map[string]any{"action": action, "check_run": run,
		"installation": map[string]any{"id": 55501}, "repository": loadRepository, "sender": map[string]any{"login": app.slug + "[bot]", "type": "Bot"}})
	return b
}

func checkSuiteOf(action string, app checkApp) []byte {
	suite := map[string]any{"id": 5 + app.id, "head_sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e", "head_branch": "main",
		"status": "completed", "conclusion": "success", "app": map[string]any{"id": app.id, "slug": app.slug},
		"before": strings.Repeat("1", 40), "after": "6dcb09b5b57875f334f61aebed695e2e4193db5e", "latest_check_runs_count": 1,
		"head_commit": map[string]any{"id": "6dcb09b5b57875f334f61aebed695e2e4193db5e", "message": deliveryMark + " " + strings.Repeat("Change line. ", 20)}}
	if action == "requested" {
		suite["status"], suite["conclusion"], suite["latest_check_runs_count"] = "queued", nil, 0
	}
	b, _ := json.Marshal(map[string]any{"action": action, "check_suite": suite,
		"installation": map[string]any{"id": 55501}, "repository": loadRepository, "sender": loadSender})
	return b
}
