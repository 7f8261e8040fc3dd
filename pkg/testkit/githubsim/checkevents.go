package githubsim

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Check events (Options.CheckEvents). An App with the checks permission is subscribed to check_run
// and check_suite whether it wants them or not, and GitHub sends it, for the repositories it is
// installed on:
//   - check_run created and completed for every check run, its own and other Apps' — GitHub
//     Actions creates one per job of a workflow run;
//   - check_suite completed when every check run of an App's suite for a commit is completed (a
//     new check run in the suite starts it again).
//
// (check_suite requested comes with a push: the sender of the push sends it, not the simulator.)
// These are GitHub's echoes of writes already made. An App acts on none of them, but it receives,
// verifies and answers each one, so a load run without them leaves that cost out.

// GitHub Actions' App, as check runs and suites of workflow jobs name it.
const (
	actionsAppID   = 15368
	actionsAppSlug = "github-actions"
)

// checkSuiteRef is a check run's check_suite in a check_run payload, and the check_suite of a
// check_suite payload.
type checkSuiteRef struct {
	ID         int64   `json:"id"`
	HeadBranch *string `json:"head_branch"`
	HeadSHA    string  `json:"head_sha"`
	Status     string  `json:"status"`
	Conclusion *string `json:"conclusion"`
	App        appRef  `json:"app"`
}

type appRef struct {
	ID   int64  `json:"id"`
	Slug string `json:"slug"`
}

// checkRunPayload is a check run as a check_run webhook carries it: with its suite.
type checkRunPayload struct {
	CheckRun
	CheckSuite checkSuiteRef `json:"check_suite"`
}

// repoRef is what a webhook about a repository says of it.
type repoRef struct {
	id             int64
	fullName       string
	installationID int64
}

// checkEvents is what one change of a check run makes GitHub send.
type checkEvents struct {
	run            CheckRun // as it is after the change
	repo           repoRef
	created        bool           // check_run created
	completed      bool           // check_run completed: the run's status became completed
	suiteCompleted *checkSuiteRef // check_suite completed: that made the suite's runs all completed
}

// suiteID is the id of an App's check suite for a commit of a repository.
func suiteID(repo, sha string) int64 { return RepositoryID(repo + "@" + sha) }

// conclusionRank orders conclusions as GitHub sums up a suite: the highest ranked of its check
// runs' conclusions is the suite's.
var conclusionRank = map[string]int{"action_required": 8, "cancelled": 7, "timed_out": 6, "failure": 5,
	"stale": 4, "neutral": 3, "success": 2, "skipped": 1}

// checkEventsLocked works out the events of a change of c (s.mu held): created, and whether it
// completed it (wasCompleted: its status before the change).
func (s *Simulator) checkEventsLocked(c *CheckRun, repo *repository, created, wasCompleted bool) *checkEvents {
	if !s.opts.CheckEvents || s.opts.WebhookURL == "" {
		return nil
	}
	ev := &checkEvents{run: *c, repo: repoRef{repo.id, repo.fullName, repo.installationID}, created: created,
		completed: c.Status == "completed" && !wasCompleted}
	if !ev.completed {
		return ev
	}
	var conclusion string
	for _, other := range s.checkRunsAt[c.repo+"@"+c.HeadSHA] {
		if other.App.ID != c.App.ID {
			continue
		}
		if other.Status != "completed" {
			return ev
		}
		if other.Conclusion != nil && conclusionRank[*other.Conclusion] > conclusionRank[conclusion] {
			conclusion = *other.Conclusion
		}
	}
	ev.suiteCompleted = &checkSuiteRef{ID: suiteID(c.repo, c.HeadSHA), HeadSHA: c.HeadSHA, Status: "completed",
		Conclusion: &conclusion, App: appRef{c.App.ID, c.App.Slug}}
	return ev
}

// sendCheckEvents schedules the webhooks of ev (nil: none) to be sent now.
func (s *Simulator) sendCheckEvents(ev *checkEvents) {
	if ev == nil {
		return
	}
	suite := checkSuiteRef{ID: suiteID(ev.run.repo, ev.run.HeadSHA), HeadSHA: ev.run.HeadSHA, Status: ev.run.Status,
		Conclusion: ev.run.Conclusion, App: appRef{ev.run.App.ID, ev.run.App.Slug}}
	if ev.suiteCompleted != nil {
		suite = *ev.suiteCompleted
	} else if ev.run.Status == "completed" {
		suite.Status, suite.Conclusion = "in_progress", nil // others of the suite still run
	}
	sender := ev.run.App.Slug + "[bot]"
	if ev.created {
		s.scheduleCheckEvent(ev.repo, "check_run", "created", sender, checkRunEvent(ev.run, suite))
	}
	if ev.completed {
		s.scheduleCheckEvent(ev.repo, "check_run", "completed", sender, checkRunEvent(ev.run, suite))
	}
	if ev.suiteCompleted != nil {
		s.scheduleCheckEvent(ev.repo, "check_suite", "completed", sender, checkSuiteEvent(*ev.suiteCompleted))
	}
}

// scheduleCheckEvent sends a check_run or check_suite webhook about repo now; fill sets its
// check_run or check_suite.
func (s *Simulator) scheduleCheckEvent(repo repoRef, event, action, sender string, fill func(*hookPayload)) {
	s.webhooks.schedule(s.now(), func(ctx context.Context, p poster) {
		body := newHookPayload(action, repo, sender)
		fill(&body)
		payload, err := json.Marshal(&body)
		if err != nil {
			s.opts.Logger.Error("encoding a check event", "event", event, "error", err)
			return
		}
		if !s.deliver(ctx, p, event, action, payload) {
			s.opts.Logger.Warn(event+" webhook not accepted after 5 attempts", "repository", repo.fullName, "action", action)
		}
	})
}

// checkRunEvent and checkSuiteEvent fill a payload's check_run or check_suite.
func checkRunEvent(run CheckRun, suite checkSuiteRef) func(*hookPayload) {
	return func(p *hookPayload) { p.CheckRun = &checkRunPayload{run, suite} }
}

func checkSuiteEvent(suite checkSuiteRef) func(*hookPayload) {
	return func(p *hookPayload) { p.CheckSuite = &suite }
}

// jobCheckEventsLocked works out the check run events of a workflow run's job for the run's
// change to action (s.mu held, the run already changed), as GitHub Actions' App makes them:
// created queued when the run attempt is requested (GitHub queues a run's jobs with it; check_run
// has no action for a job that starts), completed with the run, and the run attempt's suite
// completed with it. It returns what sends them (nil: none), to be called once the
// workflow_run webhook is sent: worked out now, a re-run started meanwhile cannot change them.
func (s *Simulator) jobCheckEventsLocked(run *WorkflowRun, action string) func() {
	if !s.opts.CheckEvents || (action != "requested" && action != "completed") {
		return nil
	}
	now := s.now().UTC().Truncate(time.Second)
	if run.jobCheckRun == 0 || run.jobAttempt != run.RunAttempt {
		run.jobCheckRun, run.jobAttempt, run.jobStarted = s.id(), run.RunAttempt, now
	}
	// Copies: the run changes after the lock is let go.
	started, branch := run.jobStarted, run.HeadBranch
	job := CheckRun{ID: run.jobCheckRun, NodeID: fmt.Sprintf("CR_sim%d", run.jobCheckRun), HeadSHA: run.HeadSHA,
		ExternalID: fmt.Sprintf("job-%d-%d", run.ID, run.RunAttempt), Name: "release", Status: "queued",
		StartedAt: &started, repo: run.repo.fullName,
		HTMLURL: fmt.Sprintf("https://github.com/%s/actions/runs/%d/job/%d", run.repo.fullName, run.ID, run.jobCheckRun)}
	job.App.ID, job.App.Slug = actionsAppID, actionsAppSlug
	if action == "completed" && run.Conclusion != nil {
		conclusion := *run.Conclusion
		job.Status, job.Conclusion, job.CompletedAt = "completed", &conclusion, &now
	}
	repo := repoRef{run.repo.id, run.repo.fullName, run.repo.installationID}
	suite := checkSuiteRef{ID: run.CheckSuiteID, HeadBranch: &branch, HeadSHA: run.HeadSHA, Status: job.Status,
		Conclusion: job.Conclusion, App: appRef{actionsAppID, actionsAppSlug}}
	sender := actionsAppSlug + "[bot]"
	return func() {
		if action == "requested" {
			s.scheduleCheckEvent(repo, "check_run", "created", sender, checkRunEvent(job, suite))
			return
		}
		s.scheduleCheckEvent(repo, "check_run", "completed", sender, checkRunEvent(job, suite))
		s.scheduleCheckEvent(repo, "check_suite", "completed", sender, checkSuiteEvent(suite))
	}
}
