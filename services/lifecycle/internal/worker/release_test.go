package worker_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
	"github.com/boardreadyops/cloud/pkg/outbox"
)

func TestPushRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prepare func(b *bundle)
		doc     eventdoc.Document
		wantRun bool
	}{
		{"release tag", nil, pushTag("v1.2.3", sha), true},
		// git tag -a: after is the tag object, head_commit.id the commit the run releases (00075).
		{"annotated release tag", nil, annotatedTag("v1.2.3", strings.Repeat("c", 40), sha), true},
		{"branch push", nil, eventdoc.Document{Event: "push", InstallationID: installationID, Repository: repository(),
			Push: &eventdoc.Push{Ref: "refs/heads/main", After: sha}}, false},
		{"tag deleted", nil, eventdoc.Document{Event: "push", InstallationID: installationID, Repository: repository(),
			Push: &eventdoc.Push{Ref: "refs/tags/v1.2.3", After: strings.Repeat("0", 40), Deleted: true}}, false},
		{"tag not matching the default pattern", nil, pushTag("release-1.2.3", sha), false},
		{"tag matching a repository's own pattern", func(b *bundle) {
			b.deliver(installationEvent("created", eventdoc.RepositoryRef{ID: repoID, FullName: "octo-org/hello-world"}))
			b.drain()
			b.exec(`INSERT INTO repository_release_settings (repository_id, tag_pattern) VALUES ($1, 'release-*')`, repoID)
		}, pushTag("release-1.2.3", sha), true},
		{"repository disabled", func(b *bundle) {
			b.deliver(installationEvent("created", eventdoc.RepositoryRef{ID: repoID, FullName: "octo-org/hello-world"}))
			b.drain()
			b.exec(`INSERT INTO repository_release_settings (repository_id, enabled) VALUES ($1, false)`, repoID)
		}, pushTag("v1.2.3", sha), false},
		// A push received after the archive proves an unarchive between them (GitHub refuses a
		// push to an archived repository): TestArchivedAppliesInReceivedOrder.
		{"repository archived before the push", func(b *bundle) {
			b.deliver(eventdoc.Document{Event: "repository", Action: "archived", InstallationID: installationID, Repository: repository()})
			b.drain()
		}, pushTag("v1.2.3", sha), true},
		{"installation suspended", func(b *bundle) {
			b.deliver(installationEvent("created"))
			b.deliver(installationEvent("suspend"))
			b.drain()
		}, pushTag("v1.2.3", sha), false},
		{"installation deleted", func(b *bundle) {
			b.deliver(installationEvent("created"))
			b.deliver(installationEvent("deleted"))
			b.drain()
		}, pushTag("v1.2.3", sha), false},
		{"unknown installation is recorded from the repository owner", nil, pushTag("v2.0.0", sha), true},
		{"tag matching the installation's default pattern", func(b *bundle) {
			b.recordRepository()
			b.exec(`INSERT INTO installation_release_settings (installation_id, tag_pattern) VALUES ($1, 'release-*')`, installationID)
		}, pushTag("release-1.2.3", sha), true},
		{"the repository's pattern wins over the installation's", func(b *bundle) {
			b.recordRepository()
			b.exec(`INSERT INTO installation_release_settings (installation_id, tag_pattern) VALUES ($1, 'release-*')`, installationID)
			b.exec(`INSERT INTO repository_release_settings (repository_id, tag_pattern) VALUES ($1, 'v*')`, repoID)
		}, pushTag("release-1.2.3", sha), false},
		{"tag excluded by the installation", func(b *bundle) {
			b.recordRepository()
			b.exec(`INSERT INTO installation_release_settings (installation_id, excluded_tag_patterns) VALUES ($1, '{*-rc*}')`, installationID)
		}, pushTag("v1.2.3-rc1", sha), false},
		{"the repository's exclusions replace the installation's", func(b *bundle) {
			b.recordRepository()
			b.exec(`INSERT INTO installation_release_settings (installation_id, excluded_tag_patterns) VALUES ($1, '{*-rc*}')`, installationID)
			b.exec(`INSERT INTO repository_release_settings (repository_id, excluded_tag_patterns) VALUES ($1, '{*-beta*}')`, repoID)
		}, pushTag("v1.2.3-rc1", sha), true},
		{"installation disabled, repository inherits", func(b *bundle) {
			b.recordRepository()
			b.exec(`INSERT INTO installation_release_settings (installation_id, enabled) VALUES ($1, false)`, installationID)
			b.exec(`INSERT INTO repository_release_settings (repository_id, workflow_file) VALUES ($1, 'other.yml')`, repoID)
		}, pushTag("v1.2.3", sha), false},
		{"installation disabled, repository enabled", func(b *bundle) {
			b.recordRepository()
			b.exec(`INSERT INTO installation_release_settings (installation_id, enabled) VALUES ($1, false)`, installationID)
			b.exec(`INSERT INTO repository_release_settings (repository_id, enabled) VALUES ($1, true)`, repoID)
		}, pushTag("v1.2.3", sha), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			if tt.prepare != nil {
				tt.prepare(b)
			}
			job := b.deliver(tt.doc)
			b.drain()
			if s := b.jobStatus(job); s != "completed" {
				t.Fatalf("job %s", s)
			}
			runs := b.count(`SELECT count(*) FROM release_runs`)
			effects := b.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.check_run.create'`)
			if tt.wantRun != (runs == 1) || runs != effects {
				t.Fatalf("%d runs and %d check-run effects, want run: %v", runs, effects, tt.wantRun)
			}
			if !tt.wantRun {
				return
			}
			var status string
			var attempts int
			var payload json.RawMessage
			var traceparent string
			if err := b.pool.QueryRow(b.ctx, `SELECT r.status, (SELECT count(*) FROM execution_attempts WHERE release_run_id = r.id),
				o.payload, o.traceparent FROM release_runs r JOIN control_plane_outbox o ON o.release_run_id = r.id`).
				Scan(&status, &attempts, &payload, &traceparent); err != nil {
				t.Fatal(err)
			}
			if status != "check_pending" || attempts != 1 {
				t.Fatalf("run %s with %d attempts", status, attempts)
			}
			var p map[string]any
			_ = json.Unmarshal(payload, &p)
			if p["head_sha"] != sha || p["name"] != "BoardReadyOps release" || p["external_id"] != p["release_run_id"] ||
				p["repository_full_name"] != "octo-org/hello-world" {
				t.Fatalf("check run payload %s", payload)
			}
			// The effect continues the delivery's trace.
			if !strings.HasPrefix(traceparent, "00-4bf92f3577b34da6a3ce929d0e0e4736-") {
				t.Fatalf("effect traceparent %q is not in the delivery's trace", traceparent)
			}
		})
	}
}

// recordRepository records the installation and the test repository.
func (b *bundle) recordRepository() {
	b.t.Helper()
	b.deliver(installationEvent("created", eventdoc.RepositoryRef{ID: repoID, FullName: "octo-org/hello-world"}))
	b.drain()
}

func (b *bundle) exec(sql string, args ...any) {
	b.t.Helper()
	if _, err := b.pool.Exec(b.ctx, sql, args...); err != nil {
		b.t.Fatalf("%s: %v", sql, err)
	}
}

// TestRunSettingsAndPause: the workflow file comes from the installation's default when the
// repository sets none, and a run created while dispatches are paused carries the pause's
// reason to its check run.
func TestRunSettingsAndPause(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.recordRepository()
	b.exec(`INSERT INTO installation_release_settings (installation_id, workflow_file) VALUES ($1, 'org-release.yml')`, installationID)
	b.exec(`SELECT boardreadyops_outbox_pause_dispatches(NULL, 'alice', 'GitHub incident 42')`)
	b.deliver(pushTag("v1.0.0", sha))
	b.drain()
	var workflow, paused string
	if err := b.pool.QueryRow(b.ctx, `SELECT r.workflow_file, o.payload ->> 'dispatch_paused' FROM release_runs r
		JOIN control_plane_outbox o ON o.release_run_id = r.id`).Scan(&workflow, &paused); err != nil {
		t.Fatal(err)
	}
	if workflow != "org-release.yml" || paused != "GitHub incident 42" {
		t.Fatalf("workflow %q, dispatch_paused %q", workflow, paused)
	}
}

func TestSameTagAndCommitCreatesNothingNew(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deliver(pushTag("v1.0.0", sha))
	b.deliver(pushTag("v1.0.0", sha)) // a second delivery of the same push (new delivery id)
	b.drain()
	b.deliver(pushTag("v1.0.0", sha)) // and once more after the first was applied
	b.drain()
	if runs, effects := b.count(`SELECT count(*) FROM release_runs`), b.count(`SELECT count(*) FROM control_plane_outbox`); runs != 1 || effects != 1 {
		t.Fatalf("%d runs, %d effects", runs, effects)
	}
	// The tag moved to another commit: that is a new release run.
	b.deliver(pushTag("v1.0.0", strings.Repeat("b", 40)))
	b.drain()
	if runs := b.count(`SELECT count(*) FROM release_runs`); runs != 2 {
		t.Fatalf("%d runs after the tag moved", runs)
	}
}

func TestReleaseLifecycleAndRerun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deliver(pushTag("v1.0.0", sha))
	b.drain()
	run := b.onlyRun()
	b.completeEffects(4001, 9001) // check run 4001 created, workflow run 9001 dispatched
	if r, a, n := b.runStatus(run); r != "running" || a != "running" || n != 1 {
		t.Fatalf("after dispatch: run %s attempt %s #%d", r, a, n)
	}

	// A rerequest while the run is still running starts nothing and is answered on the check run.
	job := b.deliver(rerequest(run, 4001))
	b.drain()
	if b.jobStatus(job) != "completed" || b.count(`SELECT count(*) FROM execution_attempts`) != 1 {
		t.Fatal("rerequest of a running run started an attempt")
	}
	var notice string
	if err := b.pool.QueryRow(b.ctx, `SELECT payload->>'notice' FROM control_plane_outbox
		WHERE effect_type = 'github.check_run.complete' ORDER BY id DESC LIMIT 1`).Scan(&notice); err != nil ||
		!strings.Contains(notice, "Re-run requested by @octocat while the release is still running") {
		t.Fatalf("rerequest answer %q (%v)", notice, err)
	}
	b.completeEffects(0, 0)

	b.deliver(workflowRun("in_progress", 9001, ""))
	b.deliver(workflowRun("completed", 9001, "failure"))
	b.drain()
	if r, a, _ := b.runStatus(run); r != "failed" || a != "failed" {
		t.Fatalf("after failure: run %s attempt %s", r, a)
	}
	var payload json.RawMessage
	if err := b.pool.QueryRow(b.ctx, `SELECT payload FROM control_plane_outbox WHERE effect_type = 'github.check_run.complete' ORDER BY id DESC LIMIT 1`).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	_ = json.Unmarshal(payload, &p)
	if p["conclusion"] != "failure" || p["state"] != "failed" || p["check_run_id"] != float64(4001) || p["tag"] != "v1.0.0" {
		t.Fatalf("check run completion payload %s", payload)
	}
	b.completeEffects(0, 0)

	// Re-run: attempt 2 with its own dispatch key.
	b.deliver(rerequest(run, 4001))
	b.drain()
	if r, a, n := b.runStatus(run); r != "dispatching" || a != "dispatching" || n != 2 {
		t.Fatalf("after re-run: run %s attempt %s #%d", r, a, n)
	}
	if state, notice, _ := b.latestCheckRunUpdate(); state != "dispatching" || notice != "Re-run: attempt 2 is starting." {
		t.Fatalf("check run after the re-run: %s %q", state, notice)
	}
	var keys []string
	rows, _ := b.pool.Query(b.ctx, `SELECT idempotency_key FROM control_plane_outbox WHERE effect_type = 'github.workflow.dispatch' ORDER BY id`)
	for rows.Next() {
		var k string
		_ = rows.Scan(&k)
		keys = append(keys, k)
	}
	if len(keys) != 2 || keys[0] == keys[1] {
		t.Fatalf("dispatch keys %v, want two distinct", keys)
	}
	b.completeEffects(0, 9002)
	b.deliver(workflowRun("completed", 9002, "success"))
	b.drain()
	if r, a, n := b.runStatus(run); r != "succeeded" || a != "succeeded" || n != 2 {
		t.Fatalf("after attempt 2: run %s attempt %s #%d", r, a, n)
	}
	// A redelivered completion changes nothing and enqueues nothing.
	before := b.count(`SELECT count(*) FROM control_plane_outbox`)
	b.deliver(workflowRun("completed", 9002, "success"))
	b.drain()
	if after := b.count(`SELECT count(*) FROM control_plane_outbox`); after != before {
		t.Fatalf("redelivered completion enqueued %d effects", after-before)
	}
}

func TestRerequestRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		doc  func(run string) eventdoc.Document
	}{
		{"unknown release run", func(string) eventdoc.Document { return rerequest("7b0c5b8e-2a1d-4e6f-9b7a-1c2d3e4f5a6b", 4001) }},
		{"not a uuid", func(string) eventdoc.Document { return rerequest("not-ours", 4001) }},
		{"another app's check run", func(run string) eventdoc.Document {
			d := rerequest(run, 4001)
			d.CheckRun.AppID = 1
			return d
		}},
		{"another check run name", func(run string) eventdoc.Document {
			d := rerequest(run, 4001)
			d.CheckRun.Name = "CI"
			return d
		}},
		{"a check run id that is not the run's", func(run string) eventdoc.Document { return rerequest(run, 999) }},
		{"another App calling the API (a Bot sender)", func(run string) eventdoc.Document {
			d := rerequest(run, 4001)
			d.CheckRun.SenderLogin, d.CheckRun.SenderType = "other-app[bot]", "Bot"
			return d
		}},
		{"created, not rerequested", func(run string) eventdoc.Document {
			d := rerequest(run, 4001)
			d.Action = "created"
			return d
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			run := b.succeededRun()
			job := b.deliver(tt.doc(run))
			b.drain()
			if b.jobStatus(job) != "completed" {
				t.Fatal("job not completed")
			}
			if n := b.count(`SELECT count(*) FROM execution_attempts`); n != 1 {
				t.Fatalf("%d attempts, want 1 (no re-run)", n)
			}
		})
	}
}

func TestConclusionMapping(t *testing.T) {
	t.Parallel()
	tests := []struct{ conclusion, run, check string }{
		{"success", "succeeded", "success"},
		{"failure", "failed", "failure"},
		{"timed_out", "failed", "failure"},
		{"startup_failure", "failed", "failure"},
		{"cancelled", "cancelled", "cancelled"},
	}
	for _, tt := range tests {
		t.Run(tt.conclusion, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.deliver(pushTag("v1.0.0", sha))
			b.drain()
			run := b.onlyRun()
			b.completeEffects(4001, 9001)
			b.deliver(workflowRun("completed", 9001, tt.conclusion))
			b.drain()
			if r, _, _ := b.runStatus(run); r != tt.run {
				t.Fatalf("run %s, want %s", r, tt.run)
			}
			var check string
			if err := b.pool.QueryRow(b.ctx, `SELECT payload->>'conclusion' FROM control_plane_outbox WHERE effect_type = 'github.check_run.complete' ORDER BY id DESC LIMIT 1`).Scan(&check); err != nil || check != tt.check {
				t.Fatalf("check conclusion %q (%v), want %s", check, err, tt.check)
			}
		})
	}
}

// A workflow_run that arrives before the dispatch completion committed its run id waits
// (deferred, not failed), and is applied once the dispatch is recorded.
func TestOutOfOrderWorkflowRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deliver(pushTag("v1.0.0", sha))
	b.drain()
	run := b.onlyRun()
	early := b.deliver(workflowRun("completed", 9001, "success"))
	b.drain()
	var status string
	var attempts int
	if err := b.pool.QueryRow(b.ctx, `SELECT status, attempts FROM control_plane_jobs WHERE id = $1`, early).Scan(&status, &attempts); err != nil {
		t.Fatal(err)
	}
	if status != "available" || attempts != 0 {
		t.Fatalf("early workflow_run job %s with %d attempts, want deferred without spending attempts", status, attempts)
	}
	b.completeEffects(4001, 9001)
	b.exec(`UPDATE control_plane_jobs SET available_at = now() WHERE id = $1`, early) // its backoff elapsed
	b.drain()
	if r, _, _ := b.runStatus(run); r != "succeeded" || b.jobStatus(early) != "completed" {
		t.Fatalf("run %s, job %s", r, b.jobStatus(early))
	}
}

func TestUnmatchedWorkflowRunIsRecordedAfterTheWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := prometheus.NewRegistry()
	b.metricsRegistry(reg)
	job := b.deliver(workflowRun("completed", 777, "success"))
	b.drain()
	if b.jobStatus(job) != "available" {
		t.Fatal("unmatched workflow run not deferred")
	}
	later := time.Now().Add(16 * time.Minute)
	b.now.Store(&later)
	b.exec(`UPDATE control_plane_jobs SET available_at = now() WHERE id = $1`, job)
	b.drain()
	if b.jobStatus(job) != "completed" {
		t.Fatal("unmatched workflow run not recorded after the window")
	}

	// Other workflows of the repository, and runs not started by a dispatch, are not waited for.
	other := workflowRun("completed", 778, "success")
	other.WorkflowRun.Path = ".github/workflows/ci.yml"
	push := workflowRun("completed", 779, "success")
	push.WorkflowRun.Event = "push"
	j1, j2 := b.deliver(other), b.deliver(push)
	b.drain()
	if b.jobStatus(j1) != "completed" || b.jobStatus(j2) != "completed" {
		t.Fatal("foreign workflow runs were not completed at once")
	}
	if n := gaugeValues(t, reg, "boardreadyops_workflow_completions_unmatched_total")[""]; n != 1 {
		t.Fatalf("boardreadyops_workflow_completions_unmatched_total %v, want 1 (foreign runs are not unmatched completions)", n)
	}
}

// annotatedTag is the push of an annotated tag: after is the tag object, head_sha the tagged commit.
func annotatedTag(tag, object, commit string) eventdoc.Document {
	d := pushTag(tag, object)
	d.Push.HeadSHA = commit
	return d
}

// An annotated tag releases the commit it points to, not its tag object (migration 00075): the
// run's commit and its check run's head_sha are head_commit.id, through the batch of several
// pushes as alone. Re-creating the tag (git tag -a -f: a new tag object on the same commit) starts
// nothing new.
func TestAnnotatedTagReleasesItsCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	commit2 := strings.Repeat("d", 40)
	b.deliver(annotatedTag("v1.0.0", strings.Repeat("a", 40), sha))
	b.deliver(annotatedTag("v2.0.0", strings.Repeat("b", 40), commit2))
	b.drain()
	b.deliver(annotatedTag("v1.0.0", strings.Repeat("e", 40), sha)) // re-created on the same commit
	b.drain()
	rows, err := b.pool.Query(b.ctx, `SELECT r.ref, r.head_sha, o.payload ->> 'head_sha' FROM release_runs r
		JOIN control_plane_outbox o ON o.release_run_id = r.id AND o.effect_type = 'github.check_run.create' ORDER BY r.ref`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var ref, runSHA, checkSHA string
		if err := rows.Scan(&ref, &runSHA, &checkSHA); err != nil {
			t.Fatal(err)
		}
		got = append(got, ref+" "+runSHA+" "+checkSHA)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"refs/tags/v1.0.0 " + sha + " " + sha, "refs/tags/v2.0.0 " + commit2 + " " + commit2}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("runs (ref, commit, check run's head_sha):\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The dispatcher reads the tag before each dispatch, but a tag moved between that read and the
// dispatch is dispatched, and GitHub runs the workflow at the new commit: its completion names
// that commit. The run is failed whatever the workflow concluded, and the check run says why
// (migration 00079); a workflow run of the run's own commit finishes as before.
func TestWorkflowRunOfAnotherCommitFailsTheRun(t *testing.T) {
	t.Parallel()
	const other = "0123456789abcdef0123456789abcdef01234567"
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "alone", true: "in a batch"}[batch], func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			reg := prometheus.NewRegistry()
			b.metricsRegistry(reg)
			b.deliver(pushTag("v1.0.0", sha))
			b.drain()
			run := b.onlyRun()
			b.completeEffects(4001, 9001)
			done := workflowRun("completed", 9001, "success")
			done.WorkflowRun.HeadSHA = other
			if batch {
				// Another run's completion in the same batch, so the batch form is used.
				b.deliver(pushTag("v1.0.1", sha))
				b.drain()
				b.completeEffects(4002, 9002)
				b.deliver(workflowRun("completed", 9002, "success"))
			}
			b.deliver(done)
			b.drain()
			if r, a, _ := b.runStatus(run); r != "failed" || a != "failed" {
				t.Fatalf("run %s attempt %s, want failed: the workflow ran another commit", r, a)
			}
			state, notice, _ := b.latestCheckRunUpdateOf(run)
			if state != "failed" || !strings.Contains(notice, "The workflow ran commit "+other+", not "+sha) {
				t.Fatalf("check run update %s %q", state, notice)
			}
			// Counted once for its alert; the other run's completion is not.
			if n := gaugeValues(t, reg, outbox.OtherCommitMetric)[""]; n != 1 {
				t.Fatalf("%s %v, want 1", outbox.OtherCommitMetric, n)
			}
			if batch {
				var status string
				if err := b.pool.QueryRow(b.ctx, `SELECT status FROM release_runs WHERE ref = 'refs/tags/v1.0.1'`).Scan(&status); err != nil || status != "succeeded" {
					t.Fatalf("the other run %s (%v), want succeeded", status, err)
				}
			}
		})
	}
}
