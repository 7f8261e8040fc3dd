package worker_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
	"github.com/boardreadyops/cloud/services/lifecycle/internal/handler"
	"github.com/boardreadyops/cloud/services/lifecycle/internal/worker"
)

// suiteRerequest is GitHub's check_suite rerequested for the App's suite on commit headSHA: what
// "Re-run all checks" and "Re-run failed checks" send.
func suiteRerequest(headSHA string) eventdoc.Document {
	return eventdoc.Document{Event: "check_suite", Action: "rerequested", InstallationID: installationID, Repository: repository(),
		CheckSuite: &eventdoc.CheckSuite{ID: 5, AppID: appID, HeadSHA: headSHA, SenderLogin: "octocat", SenderType: "User"}}
}

// finishedRun releases tag at commit: its check run checkRunID is created, its workflow run
// workflowRunID dispatched and finished with conclusion ("" leaves it running); it returns the
// run's id.
func (b *bundle) finishedRun(tag, commit string, checkRunID, workflowRunID int64, conclusion string) string {
	b.t.Helper()
	b.deliver(pushTag(tag, commit))
	b.drain()
	b.completeEffects(checkRunID, workflowRunID)
	if conclusion != "" {
		b.deliver(workflowRun("completed", workflowRunID, conclusion))
		b.drain()
		b.completeEffects(0, 0)
	}
	var id string
	if err := b.pool.QueryRow(b.ctx, `SELECT id::text FROM release_runs WHERE ref = $1`, "refs/tags/"+tag).Scan(&id); err != nil {
		b.t.Fatal(err)
	}
	return id
}

// "Re-run all checks" on a commit re-runs the failed and cancelled releases of that commit, and
// answers every other one on its check run, so that GitHub's suite, reset to queued, completes
// again. A succeeded release is not released again by the suite-wide button.
func TestCheckSuiteRerequested(t *testing.T) {
	t.Parallel()
	const other = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name string
		// conclusion of the run of v1.0.0 at sha ("" leaves it running).
		conclusion string
		doc        eventdoc.Document
		// attempts the run has afterwards; notice is in its latest check-run update ("" for none new).
		attempts int
		notice   string
		// noAppID runs lifecycle without BOARDREADYOPS_GITHUB_APP_ID.
		noAppID bool
	}{
		{"a failed release is re-run", "failure", suiteRerequest(sha), 2, "Re-run: attempt 2 is starting.", false},
		{"a succeeded release is answered, not released again", "success", suiteRerequest(sha), 1,
			"Re-run of the commit's checks requested by @octocat: this release succeeded, so it is not released again.", false},
		{"a running release is answered", "", suiteRerequest(sha), 1,
			"Re-run of the commit's checks requested by @octocat while the release is still running: nothing new was started.", false},
		{"another commit's suite changes nothing", "failure", suiteRerequest(other), 1, "", false},
		{"another App's suite changes nothing", "failure", func() eventdoc.Document {
			d := suiteRerequest(sha)
			d.CheckSuite.AppID = 1
			return d
		}(), 1, "", false},
		{"another App calling the API (a Bot sender) changes nothing", "failure", func() eventdoc.Document {
			d := suiteRerequest(sha)
			d.CheckSuite.SenderLogin, d.CheckSuite.SenderType = "other-app[bot]", "Bot"
			return d
		}(), 1, "", false},
		{"without the App's id configured, no suite is known as ours", "failure", suiteRerequest(sha), 1, "", true},
		{"requested (every push) changes nothing", "failure", func() eventdoc.Document {
			d := suiteRerequest(sha)
			d.Action = "requested"
			return d
		}(), 1, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var opts []func(*worker.Config)
			if tt.noAppID {
				cfg := handlerConfig
				cfg.AppID = 0
				opts = append(opts, func(c *worker.Config) { c.Handler = handler.New(cfg, slog.New(slog.DiscardHandler), nil) })
			}
			b := setup(t, opts...)
			run := b.finishedRun("v1.0.0", sha, 4001, 9001, tt.conclusion)
			updates := b.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.check_run.complete'`)
			job := b.deliver(tt.doc)
			b.drain()
			if b.jobStatus(job) != "completed" {
				t.Fatalf("job %s", b.jobStatus(job))
			}
			if _, _, n := b.runStatus(run); n != tt.attempts {
				t.Fatalf("%d attempts, want %d", n, tt.attempts)
			}
			after := b.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.check_run.complete'`)
			if tt.notice == "" {
				if after != updates {
					t.Fatalf("%d check-run updates enqueued, want none", after-updates)
				}
				return
			}
			if _, notice, _ := b.latestCheckRunUpdate(); !strings.HasPrefix(notice, tt.notice) {
				t.Fatalf("check-run notice %q, want %q", notice, tt.notice)
			}
		})
	}
}

// Two tags on one commit: the failed one is re-run with its own dispatch, the succeeded one only
// answered; a run of another commit is left alone.
func TestCheckSuiteRerequestedDecidesEachRunOfTheCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	failed := b.finishedRun("v1.0.0", sha, 4001, 9001, "failure")
	succeeded := b.finishedRun("v1.0.1", sha, 4002, 9002, "success")
	elsewhere := b.finishedRun("v0.9.0", "0123456789abcdef0123456789abcdef01234567", 4003, 9003, "failure")
	dispatches := b.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.workflow.dispatch'`)
	b.deliver(suiteRerequest(sha))
	b.drain()
	for run, want := range map[string]int{failed: 2, succeeded: 1, elsewhere: 1} {
		if _, _, n := b.runStatus(run); n != want {
			t.Errorf("run %s: %d attempts, want %d", run, n, want)
		}
	}
	if n := b.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.workflow.dispatch'`) - dispatches; n != 1 {
		t.Fatalf("%d new dispatches, want 1", n)
	}
	if n := b.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.check_run.complete' AND status = 'available'
		AND release_run_id = $1 AND payload->>'notice' LIKE '%not released again%'`, succeeded); n != 1 {
		t.Fatalf("%d answers on the succeeded run's check run, want 1", n)
	}
}
