package githubapp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/githubapp"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
)

const (
	appID = 424242
	inst  = 55501
	repo  = "octo-org/hello-world"
	sha   = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
)

type env struct {
	sim    *githubsim.Simulator
	srv    *httptest.Server
	client *githubapp.Client
	key    []byte
}

func setup(t *testing.T, timeout time.Duration) *env {
	t.Helper()
	key, pub, err := githubsim.NewAppKey()
	if err != nil {
		t.Fatal(err)
	}
	sim := githubsim.New(githubsim.Options{AppID: appID, AppPublicKey: pub})
	t.Cleanup(sim.Close)
	sim.AddInstallation(inst, "octo-org")
	sim.AddRepository(inst, 1296269, repo, map[string]githubsim.Workflow{
		"boardreadyops-release.yml": githubsim.ReleaseWorkflow(),
		"ci.yml":                    {Dispatchable: false},
	})
	sim.SetTag(repo, "v1", sha)
	sim.SetTag(repo, "v1.0.0", sha)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	c, err := githubapp.New(githubapp.Config{AppID: appID, PrivateKey: key, BaseURL: srv.URL, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return &env{sim: sim, srv: srv, client: c, key: key}
}

func checkRun(ext string) githubapp.CheckRun {
	return githubapp.CheckRun{InstallationID: inst, Repository: repo, HeadSHA: sha, Name: "BoardReadyOps release", ExternalID: ext,
		Title: "Release v1", Summary: "Release requested"}
}

func TestFindOrCreateCheckRunIsReplaySafe(t *testing.T) {
	t.Parallel()
	e := setup(t, 5*time.Second)
	ctx := context.Background()
	// 150 check runs of the same name on the commit for other release runs: the search pages.
	for i := 0; i < 150; i++ {
		if _, _, err := e.client.FindOrCreateCheckRun(ctx, checkRun(fmt.Sprintf("other-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	id, created, err := e.client.FindOrCreateCheckRun(ctx, checkRun("run-1"))
	if err != nil || !created {
		t.Fatalf("first: %d %v %v", id, created, err)
	}
	e.sim.AddFault(githubsim.Fault{Operation: githubsim.OpListCheckRuns, Latency: 0}) // no-op fault: journal only
	again, created, err := e.client.FindOrCreateCheckRun(ctx, checkRun("run-1"))
	if err != nil || created || again != id {
		t.Fatalf("replay: %d %v %v, want %d reused", again, created, err, id)
	}
	if n := len(e.sim.CheckRuns("run-1")); n != 1 {
		t.Fatalf("%d check runs for run-1", n)
	}
	if err := e.client.CompleteCheckRun(ctx, githubapp.Completion{InstallationID: inst, Repository: repo, CheckRunID: id,
		Name: "BoardReadyOps release", Conclusion: "success", Title: "Released", Summary: "ok"}); err != nil {
		t.Fatal(err)
	}
	if c := e.sim.CheckRuns("run-1")[0]; c.Status != "completed" || *c.Conclusion != "success" {
		t.Fatalf("check run %+v", c)
	}
}

func TestDispatchWorkflow(t *testing.T) {
	t.Parallel()
	e := setup(t, 5*time.Second)
	ctx := context.Background()
	inputs := map[string]string{"release_run_id": "r1", "execution_attempt_id": "a1"}
	id, err := e.client.DispatchWorkflow(ctx, githubapp.Dispatch{InstallationID: inst, Repository: repo,
		WorkflowFile: "boardreadyops-release.yml", Ref: "refs/tags/v1.0.0", Inputs: inputs})
	if err != nil || id <= 0 {
		t.Fatalf("dispatch: %d %v", id, err)
	}
	runs := e.sim.WorkflowRuns()
	if len(runs) != 1 || runs[0].ID != id || runs[0].DisplayTitle != "release r1 attempt a1" || e.sim.Dispatches("a1") != 1 {
		t.Fatalf("runs %+v", runs)
	}
	listed, truncated, err := e.client.ListWorkflowRuns(ctx, inst, repo, "boardreadyops-release.yml", "workflow_dispatch", time.Now().Add(-time.Hour), 10)
	if err != nil || len(listed) != 1 || listed[0].ID != id || truncated {
		t.Fatalf("list: %+v %v (truncated %v)", listed, err, truncated)
	}
	// More runs than the limit: the newest, and truncated says the oldest were not read.
	for i := range 3 {
		e.sim.AddWorkflowRun(repo, "boardreadyops-release.yml", "workflow_dispatch", fmt.Sprintf("release r%d attempt a%d", i+2, i+2), time.Now())
	}
	listed, truncated, err = e.client.ListWorkflowRuns(ctx, inst, repo, "boardreadyops-release.yml", "workflow_dispatch", time.Now().Add(-time.Hour), 2)
	if err != nil || len(listed) != 2 || !truncated {
		t.Fatalf("list of 4 runs, limit 2: %d runs, %v (truncated %v)", len(listed), err, truncated)
	}
}

func TestFailureClasses(t *testing.T) {
	t.Parallel()
	dispatch := func(e *env, file string, inputs map[string]string, inst int64) error {
		_, err := e.client.DispatchWorkflow(context.Background(), githubapp.Dispatch{InstallationID: inst, Repository: repo,
			WorkflowFile: file, Ref: "refs/tags/v1", Inputs: inputs})
		return err
	}
	good := map[string]string{"release_run_id": "r", "execution_attempt_id": "a"}
	tests := []struct {
		name       string
		fault      *githubsim.Fault
		prepare    func(*env)
		file       string
		inputs     map[string]string
		inst       int64
		want       githubapp.Class
		status     int
		dispatched int // dispatches that reached the simulator's state
	}{
		{"workflow missing", nil, nil, "missing.yml", good, inst, githubapp.Rejected, 404, 0},
		{"no workflow_dispatch trigger", nil, nil, "ci.yml", good, inst, githubapp.Rejected, 422, 0},
		{"inputs do not match", nil, nil, "boardreadyops-release.yml", map[string]string{"other": "x"}, inst, githubapp.Rejected, 422, 0},
		{"installation unknown", nil, nil, "boardreadyops-release.yml", good, 999, githubapp.Rejected, 404, 0},
		{"primary rate limit", &githubsim.Fault{Operation: githubsim.OpDispatchWorkflow, PrimaryRateLimit: true, RetryAfter: 30 * time.Second},
			nil, "boardreadyops-release.yml", good, inst, githubapp.RateLimited, 403, 0},
		{"secondary rate limit", &githubsim.Fault{Operation: githubsim.OpDispatchWorkflow, SecondaryRateLimit: true, RetryAfter: 20 * time.Second},
			nil, "boardreadyops-release.yml", good, inst, githubapp.RateLimited, 403, 0},
		{"server error", &githubsim.Fault{Operation: githubsim.OpDispatchWorkflow, ServerErrorRate: 1}, nil,
			"boardreadyops-release.yml", good, inst, githubapp.MaybeDelivered, 502, 0},
		{"connection dropped after processing", &githubsim.Fault{Operation: githubsim.OpDispatchWorkflow, DropAfterProcessing: true}, nil,
			"boardreadyops-release.yml", good, inst, githubapp.MaybeDelivered, 0, 1},
		{"hanging request times out after writing", &githubsim.Fault{Operation: githubsim.OpDispatchWorkflow, Hang: true}, nil,
			"boardreadyops-release.yml", good, inst, githubapp.MaybeDelivered, 0, 0},
		{"token endpoint rate limited", &githubsim.Fault{Operation: githubsim.OpCreateToken, SecondaryRateLimit: true, RetryAfter: 30 * time.Second},
			nil, "boardreadyops-release.yml", good, inst, githubapp.RateLimited, 403, 0},
		{"token endpoint fails transiently", &githubsim.Fault{Operation: githubsim.OpCreateToken, ServerErrorRate: 1}, nil,
			"boardreadyops-release.yml", good, inst, githubapp.NotDelivered, 502, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, time.Second)
			if tt.fault != nil {
				e.sim.AddFault(*tt.fault)
			}
			err := dispatch(e, tt.file, tt.inputs, tt.inst)
			var ge *githubapp.Error
			if !errors.As(err, &ge) || ge.Class != tt.want || ge.Status != tt.status {
				t.Fatalf("error %v, want class %v status %d", err, tt.want, tt.status)
			}
			if tt.want == githubapp.RateLimited && time.Until(ge.Limit.RetryAt) < 10*time.Second {
				t.Fatalf("retry at %v is not the advertised reset", ge.Limit.RetryAt)
			}
			if n := e.sim.DispatchTotal(); n != tt.dispatched {
				t.Fatalf("%d dispatches reached GitHub, want %d", n, tt.dispatched)
			}
		})
	}
}

func TestNotDeliveredWhenGitHubIsUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	key, _, _ := githubsim.NewAppKey()
	c, err := githubapp.New(githubapp.Config{AppID: appID, PrivateKey: key, BaseURL: "http://" + addr, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.DispatchWorkflow(context.Background(), githubapp.Dispatch{InstallationID: inst, Repository: repo, WorkflowFile: "x.yml", Ref: "v1"})
	if githubapp.ClassOf(err) != githubapp.NotDelivered {
		t.Fatalf("error %v, want NotDelivered", err)
	}
}

func TestWrongAppKeyIsRejected(t *testing.T) {
	t.Parallel()
	e := setup(t, 5*time.Second)
	other, _, _ := githubsim.NewAppKey()
	c, err := githubapp.New(githubapp.Config{AppID: appID, PrivateKey: other, BaseURL: e.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.FindOrCreateCheckRun(context.Background(), checkRun("x"))
	var ge *githubapp.Error
	if !errors.As(err, &ge) || ge.Class != githubapp.Rejected || ge.Status != 401 {
		t.Fatalf("error %v, want Rejected 401", err)
	}
}

// The search reuses a check run carrying the release run's identity, else one carrying an earlier
// external_id of the same run (created before migration 00031), and creates only when neither is
// on the commit: a recreated release run adopts the check run of its lost incarnation.
func TestFindOrCreateCheckRunEarlierExternalIDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		existing []string // external_ids of check runs already on the commit, oldest first
		earlier  []string
		want     int // index into existing, -1: created
	}{
		{"identity", []string{"other", "v2:1:key"}, nil, 1},
		{"earlier form", []string{"run-1"}, []string{"run-1"}, 0},
		{"identity preferred over the earlier form", []string{"v2:1:key", "run-1"}, []string{"run-1"}, 0},
		{"identity preferred, listed later", []string{"run-1", "v2:1:key"}, []string{"run-1"}, 1},
		{"neither", []string{"run-2", "other"}, []string{"run-1"}, -1},
		{"nothing", nil, []string{"run-1"}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, 5*time.Second)
			ctx := context.Background()
			var ids []int64
			for _, ext := range tt.existing {
				id, _, err := e.client.FindOrCreateCheckRun(ctx, checkRun(ext))
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			cr := checkRun("v2:1:key")
			cr.EarlierExternalIDs = tt.earlier
			id, created, err := e.client.FindOrCreateCheckRun(ctx, cr)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want < 0 {
				if !created || slices.Contains(ids, id) || len(e.sim.CheckRuns("v2:1:key")) != 1 {
					t.Fatalf("got %d (created %v), want a new check run", id, created)
				}
				return
			}
			if created || id != ids[tt.want] {
				t.Fatalf("got %d (created %v), want %d reused", id, created, ids[tt.want])
			}
			if n := e.sim.CheckRunCount(); n != len(tt.existing) {
				t.Fatalf("%d check runs, want %d", n, len(tt.existing))
			}
		})
	}
	// A check run of another name never matches, whatever its external_id.
	e := setup(t, 5*time.Second)
	other := checkRun("run-1")
	other.Name = "ci"
	if _, _, err := e.client.FindOrCreateCheckRun(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	cr := checkRun("v2:1:key")
	cr.EarlierExternalIDs = []string{"run-1"}
	if _, created, err := e.client.FindOrCreateCheckRun(context.Background(), cr); err != nil || !created {
		t.Fatalf("created %v, %v: another name was reused", created, err)
	}
}

// The attack: a workflow run by the tag push (its token with checks: write) or another App
// creates a check run with our name and our external_id, both derived from public data, before
// the dispatcher's search. The dispatcher must create its own instead of adopting it.
func TestFindOrCreateCheckRunIgnoresOtherAppsCheckRuns(t *testing.T) {
	t.Parallel()
	e := setup(t, 5*time.Second)
	ctx := context.Background()
	const actionsApp = 15368
	foreign := e.sim.AddForeignCheckRun(repo, sha, "BoardReadyOps release", "run-1", actionsApp)
	foreignEarlier := e.sim.AddForeignCheckRun(repo, sha, "BoardReadyOps release", "earlier-1", actionsApp)
	cr := checkRun("run-1")
	cr.EarlierExternalIDs = []string{"earlier-1"}
	id, created, err := e.client.FindOrCreateCheckRun(ctx, cr)
	if err != nil || !created || id == foreign || id == foreignEarlier {
		t.Fatalf("got check run %d (created %v, %v); the other App's are %d and %d", id, created, err, foreign, foreignEarlier)
	}
	again, created, err := e.client.FindOrCreateCheckRun(ctx, cr)
	if err != nil || created || again != id {
		t.Fatalf("replay: %d %v %v, want %d reused", again, created, err, id)
	}
	for _, c := range e.sim.CheckRuns("run-1") {
		if c.ID != id && c.App.ID != actionsApp {
			t.Fatalf("check run %+v", c)
		}
	}
}

// A 403 that is no rate limit ("Resource not accessible by integration") is asked again once
// with a fresh installation token: a token carries the permissions the installation had when it
// was minted, so after the owner approves one the App asked for (Actions write for a dispatch), a
// token cached before still lacks it for up to an hour, and every Retry pressed meanwhile was
// refused again. A refusal that lasts is Rejected after that one retry; nothing was processed.
func TestPermissionRefusalIsRetriedWithAFreshToken(t *testing.T) {
	t.Parallel()
	refused := githubsim.Response{Status: 403, Header: map[string]string{"Content-Type": "application/json"},
		Body: `{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/rest/actions/workflows#create-a-workflow-dispatch-event"}`}
	for _, tt := range []struct {
		name       string
		times      int
		want       githubapp.Class
		dispatched int
	}{
		{"the permission approved since the token was minted", 1, 0, 1},
		{"the permission still missing", 2, githubapp.Rejected, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, 5*time.Second)
			ctx := context.Background()
			// A token cached by an earlier request.
			if _, _, err := e.client.FindOrCreateCheckRun(ctx, checkRun("run-1")); err != nil {
				t.Fatal(err)
			}
			tokens := e.sim.Count(githubsim.OpCreateToken, 201)
			e.sim.AddFault(githubsim.Fault{Operation: githubsim.OpDispatchWorkflow, Times: tt.times, Response: &refused})
			_, err := e.client.DispatchWorkflow(ctx, githubapp.Dispatch{InstallationID: inst, Repository: repo,
				WorkflowFile: "boardreadyops-release.yml", Ref: "refs/tags/v1", Inputs: map[string]string{"release_run_id": "r", "execution_attempt_id": "a"}})
			if tt.want == 0 && err != nil {
				t.Fatalf("dispatch: %v, want it sent with a fresh token", err)
			}
			if tt.want != 0 && githubapp.ClassOf(err) != tt.want {
				t.Fatalf("dispatch: %v, want %v", err, tt.want)
			}
			if n := e.sim.Count(githubsim.OpCreateToken, 201) - tokens; n != 1 {
				t.Fatalf("%d tokens minted for the retry, want 1", n)
			}
			if n := e.sim.DispatchTotal(); n != tt.dispatched {
				t.Fatalf("%d dispatches reached GitHub, want %d", n, tt.dispatched)
			}
		})
	}
}

// GitHub refuses an App JWT for its times when this replica's clock is off from GitHub's (iat in
// GitHub's future: the clock ahead by more than the 30 s ghinstallation backdates; exp in its past:
// behind by more than the JWT's life). That is no wrong key: the effect is retried, not
// dead-lettered with every other one the replica claims, and the error says to look at the clock.
func TestAppJWTRefusedForItsTimesIsRetried(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		offset time.Duration // GitHub's clock from the replica's
	}{
		{"replica's clock ahead", -5 * time.Minute},
		{"replica's clock behind", 15 * time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key, pub, err := githubsim.NewAppKey()
			if err != nil {
				t.Fatal(err)
			}
			sim := githubsim.New(githubsim.Options{AppID: appID, AppPublicKey: pub, ClockOffset: tt.offset})
			t.Cleanup(sim.Close)
			sim.AddInstallation(inst, "octo-org")
			sim.AddRepository(inst, 1296269, repo, nil)
			srv := httptest.NewServer(sim)
			t.Cleanup(srv.Close)
			c, err := githubapp.New(githubapp.Config{AppID: appID, PrivateKey: key, BaseURL: srv.URL, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = c.FindOrCreateCheckRun(context.Background(), checkRun("x"))
			var ge *githubapp.Error
			if !errors.As(err, &ge) || ge.Class != githubapp.NotDelivered || ge.Status != 401 || !strings.Contains(err.Error(), "clock") {
				t.Fatalf("error %v, want NotDelivered 401 naming the clock", err)
			}
		})
	}
}

// GitHub's answer to an App JWT whose exp is more than ten minutes past its clock: ghinstallation's
// JWTs live two minutes, so that is a replica's clock far ahead too, not a wrong key.
func TestAppJWTExpiryTooFarIsRetried(t *testing.T) {
	t.Parallel()
	e := setup(t, 5*time.Second)
	e.sim.AddFault(githubsim.Fault{Operation: githubsim.OpCreateToken, Times: 2, Response: &githubsim.Response{Status: 401,
		Header: map[string]string{"Content-Type": "application/json"},
		Body:   `{"message":"'Expiration time' claim ('exp') is too far in the future","documentation_url":"https://docs.github.com/rest"}`}})
	_, _, err := e.client.FindOrCreateCheckRun(context.Background(), checkRun("x"))
	var ge *githubapp.Error
	if !errors.As(err, &ge) || ge.Class != githubapp.NotDelivered || !strings.Contains(err.Error(), "clock") {
		t.Fatalf("error %v, want NotDelivered naming the clock", err)
	}
}

// A completed check run reset by an update (a Re-run, a Retry) relies on GitHub reopening it.
// Reports differ on whether it does; GitHub answers 200 either way. The update's answer tells:
// where GitHub kept the completed state, OnCheckRunStateIgnored says so; where it took the
// update, nothing is reported.
func TestCheckRunStateIgnoredIsReported(t *testing.T) {
	t.Parallel()
	for _, final := range []bool{false, true} {
		t.Run(fmt.Sprintf("final check runs %v", final), func(t *testing.T) {
			t.Parallel()
			key, pub, err := githubsim.NewAppKey()
			if err != nil {
				t.Fatal(err)
			}
			sim := githubsim.New(githubsim.Options{AppID: appID, AppPublicKey: pub, FinalCheckRuns: final})
			t.Cleanup(sim.Close)
			sim.AddInstallation(inst, "octo-org")
			sim.AddRepository(inst, 1296269, repo, nil)
			srv := httptest.NewServer(sim)
			t.Cleanup(srv.Close)
			var reported []string
			c, err := githubapp.New(githubapp.Config{AppID: appID, PrivateKey: key, BaseURL: srv.URL, Timeout: 5 * time.Second,
				OnCheckRunStateIgnored: func(_, _ int64, sent, got string) { reported = append(reported, sent+" kept "+got) }})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			id, _, err := c.FindOrCreateCheckRun(ctx, checkRun("run-1"))
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range []githubapp.CheckRunUpdate{
				{Status: "completed", Conclusion: "failure"}, // the release failed
				{Status: "in_progress"},                      // Re-run: attempt 2 is starting
				{Status: "completed", Conclusion: "success"}, // attempt 2 succeeded
			} {
				u.InstallationID, u.Repository, u.CheckRunID, u.Title, u.Summary = inst, repo, id, "Release", "s"
				if err := c.UpdateCheckRun(ctx, u); err != nil {
					t.Fatal(err)
				}
			}
			want := []string(nil)
			if final {
				want = []string{"in_progress kept completed/failure", "completed/success kept completed/failure"}
			}
			if !slices.Equal(reported, want) {
				t.Fatalf("reported %q, want %q", reported, want)
			}
		})
	}
}
