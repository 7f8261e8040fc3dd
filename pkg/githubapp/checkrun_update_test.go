package githubapp_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/githubapp"
)

// UpdateCheckRun sets and clears requested actions, and the simulator refuses what GitHub
// refuses: more than three actions, an identifier over 20 characters, a details_url that is not
// a URL, a summary over 65,535 characters.
func TestUpdateCheckRunFollowsGitHubsLimits(t *testing.T) {
	t.Parallel()
	e := setup(t, 5*time.Second)
	ctx := context.Background()
	id, _, err := e.client.FindOrCreateCheckRun(ctx, checkRun("run-actions"))
	if err != nil {
		t.Fatal(err)
	}
	retry := githubapp.CheckRunAction{Label: "Retry", Description: "Start the release workflow again", Identifier: "retry"}
	update := func(f func(*githubapp.CheckRunUpdate)) error {
		u := githubapp.CheckRunUpdate{InstallationID: inst, Repository: repo, CheckRunID: id, Status: "completed",
			Conclusion: "failure", Title: "Release v1: could not start", Summary: "s", Actions: []githubapp.CheckRunAction{retry},
			DetailsURL: "https://github.com/octo-org/hello-world/actions/runs/1"}
		f(&u)
		return e.client.UpdateCheckRun(ctx, u)
	}
	if err := update(func(*githubapp.CheckRunUpdate) {}); err != nil {
		t.Fatal(err)
	}
	c := e.sim.CheckRuns("run-actions")[0]
	if len(c.Actions) != 1 || c.Actions[0].Identifier != "retry" || c.DetailsURL != "https://github.com/octo-org/hello-world/actions/runs/1" {
		t.Fatalf("check run %+v", c)
	}
	if err := update(func(u *githubapp.CheckRunUpdate) { u.Actions, u.Status, u.Conclusion = nil, "in_progress", "" }); err != nil {
		t.Fatal(err)
	}
	if c := e.sim.CheckRuns("run-actions")[0]; len(c.Actions) != 0 || c.Status != "in_progress" || c.Conclusion != nil {
		t.Fatalf("actions not cleared / not reopened: %+v", c)
	}
	refused := map[string]func(*githubapp.CheckRunUpdate){
		"four actions":       func(u *githubapp.CheckRunUpdate) { u.Actions = []githubapp.CheckRunAction{retry, retry, retry, retry} },
		"long identifier":    func(u *githubapp.CheckRunUpdate) { u.Actions[0].Identifier = strings.Repeat("r", 21) },
		"long description":   func(u *githubapp.CheckRunUpdate) { u.Actions[0].Description = strings.Repeat("d", 41) },
		"details not a URL":  func(u *githubapp.CheckRunUpdate) { u.DetailsURL = "not a url" },
		"summary over limit": func(u *githubapp.CheckRunUpdate) { u.Summary = strings.Repeat("x", 65536) },
	}
	for name, f := range refused {
		if err := update(f); githubapp.ClassOf(err) != githubapp.Rejected || !strings.Contains(err.Error(), "422") {
			t.Errorf("%s: %v, want a 422 rejection", name, err)
		}
	}
}
