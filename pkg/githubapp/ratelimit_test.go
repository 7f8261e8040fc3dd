package githubapp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/githubapp"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
)

// Rate-limit answers as GitHub documents them ("Rate limits for the REST API", "Best practices
// for using the REST API") and as it sends them, each through the real client. `before` is what
// the classification did before issue 21: five of these were dead-lettered, and a secondary limit
// without Retry-After blocked the installation until the primary reset, up to an hour.
func TestRateLimitShapes(t *testing.T) {
	t.Parallel()
	const (
		secondaryMsg = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. " +
			"If you reach out to GitHub Support for help, please include the request ID C0DE:1234:5678:9ABC:DEF01234."
		contentMsg = "You have exceeded a secondary rate limit and have been temporarily blocked from content creation. " +
			"Please retry your request again later."
		abuseMsg     = "You have triggered an abuse detection mechanism. Please wait a few minutes before you try again."
		primaryMsg   = "API rate limit exceeded for installation ID 55501."
		docSecondary = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
		docExceeding = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit"
		docOld       = "https://docs.github.com/rest/overview/resources-in-the-rest-api#secondary-rate-limits"
		docAbuse     = "https://docs.github.com/rest/overview/resources-in-the-rest-api#abuse-rate-limits"
		docPrimary   = "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"
	)
	reset := time.Now().Add(54 * time.Minute).Truncate(time.Second)
	budget := func(remaining int) map[string]string {
		return map[string]string{"Content-Type": "application/json; charset=utf-8", "x-ratelimit-limit": "5000",
			"x-ratelimit-remaining": strconv.Itoa(remaining), "x-ratelimit-used": strconv.Itoa(5000 - remaining),
			"x-ratelimit-reset": strconv.FormatInt(reset.Unix(), 10), "x-ratelimit-resource": "core"}
	}
	with := func(h map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for hk, hv := range h {
			out[hk] = hv
		}
		return out
	}
	body := func(message, doc string) string {
		if doc == "" {
			return fmt.Sprintf(`{"message":%q}`, message)
		}
		return fmt.Sprintf(`{"message":%q,"documentation_url":%q}`, message, doc)
	}
	// wait: "retry-after" (60 s from the request), "reset" (x-ratelimit-reset), "backoff" (no time
	// named: the caller backs off from a minute).
	tests := []struct {
		name      string
		op        string
		status    int
		header    map[string]string
		body      string
		before    string
		want      githubapp.Class
		wait      string
		secondary bool
	}{
		{"secondary 403, budget left, no Retry-After, current docs anchor", githubsim.OpCreateCheckRun, 403, budget(4990),
			body(secondaryMsg, docExceeding), "dead letter", githubapp.RateLimited, "backoff", true},
		{"secondary 403, no documentation_url", githubsim.OpCreateCheckRun, 403, budget(4990),
			body(secondaryMsg, ""), "dead letter", githubapp.RateLimited, "backoff", true},
		{"secondary 403, content creation", githubsim.OpDispatchWorkflow, 403, budget(4990),
			body(contentMsg, ""), "dead letter", githubapp.RateLimited, "backoff", true},
		{"secondary 403 on the token request", githubsim.OpCreateToken, 403, budget(4990),
			body(secondaryMsg, docExceeding), "dead letter", githubapp.RateLimited, "backoff", true},
		{"secondary 403 without headers", githubsim.OpUpdateCheckRun, 403, map[string]string{"Content-Type": "application/json"},
			body(secondaryMsg, docExceeding), "dead letter", githubapp.RateLimited, "backoff", true},
		{"secondary 403, budget left, documented anchor", githubsim.OpCreateCheckRun, 403, budget(4990),
			body(secondaryMsg, docSecondary), "blocked 54 min (the primary reset)", githubapp.RateLimited, "backoff", true},
		{"secondary 403, older docs anchor", githubsim.OpDispatchWorkflow, 403, budget(4990),
			body(secondaryMsg, docOld), "blocked 54 min (the primary reset)", githubapp.RateLimited, "backoff", true},
		{"abuse detection 403 (pre-2022 wording)", githubsim.OpCreateCheckRun, 403, budget(4990),
			body(abuseMsg, docAbuse), "blocked 54 min (the primary reset)", githubapp.RateLimited, "backoff", true},
		{"secondary 429 without Retry-After", githubsim.OpCreateCheckRun, 429, budget(4990),
			body(secondaryMsg, docSecondary), "fixed 1 min", githubapp.RateLimited, "backoff", true},
		{"secondary 403 with Retry-After", githubsim.OpCreateCheckRun, 403, with(budget(4990), "Retry-After", "60"),
			body(secondaryMsg, docSecondary), "retry-after", githubapp.RateLimited, "retry-after", true},
		{"secondary 429 with Retry-After", githubsim.OpDispatchWorkflow, 429, with(budget(4990), "Retry-After", "60"),
			body(secondaryMsg, docSecondary), "retry-after", githubapp.RateLimited, "retry-after", true},
		{"secondary 403 with Retry-After and no budget left", githubsim.OpCreateCheckRun, 403, with(budget(0), "Retry-After", "60"),
			body(secondaryMsg, docSecondary), "retry-after", githubapp.RateLimited, "retry-after", true},
		{"primary 403, remaining 0", githubsim.OpCreateCheckRun, 403, budget(0),
			body(primaryMsg, docPrimary), "reset", githubapp.RateLimited, "reset", false},
		{"primary 429, remaining 0", githubsim.OpDispatchWorkflow, 429, budget(0),
			body(primaryMsg, docPrimary), "reset", githubapp.RateLimited, "reset", false},
		{"primary 403 on the token request", githubsim.OpCreateToken, 403, budget(0),
			body(primaryMsg, docPrimary), "reset", githubapp.RateLimited, "reset", false},
		// Our clock ahead of GitHub's: a second's wait would be refused every second for as long as
		// the skew lasts.
		{"primary 403, remaining 0, reset already past by our clock", githubsim.OpCreateCheckRun, 403,
			func() map[string]string {
				h := budget(0)
				h["x-ratelimit-reset"] = strconv.FormatInt(time.Now().Add(-30*time.Second).Unix(), 10)
				return h
			}(),
			body(primaryMsg, docPrimary), "blocked 1 s, again every second", githubapp.RateLimited, "backoff", false},
		{"secondary 429, Retry-After a date already past", githubsim.OpDispatchWorkflow, 429,
			with(budget(4990), "Retry-After", time.Now().Add(-time.Minute).UTC().Format(http.TimeFormat)),
			body(secondaryMsg, docSecondary), "blocked 1 s, again every second", githubapp.RateLimited, "backoff", true},
		{"403 that is no rate limit", githubsim.OpCreateCheckRun, 403, budget(4990),
			body("Resource not accessible by integration", "https://docs.github.com/rest/checks/runs#create-a-check-run"),
			"dead letter", githubapp.Rejected, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, 5*time.Second)
			times := 1
			if tt.want == githubapp.Rejected {
				times = 2 // a 403 that is no rate limit is asked again once with a fresh token
			}
			e.sim.AddFault(githubsim.Fault{Operation: tt.op, Times: times, Response: &githubsim.Response{Status: tt.status, Header: tt.header, Body: tt.body}})
			ctx := context.Background()
			start := time.Now()
			var err error
			switch tt.op {
			case githubsim.OpCreateCheckRun, githubsim.OpCreateToken:
				c := checkRun("run-1")
				_, _, err = e.client.FindOrCreateCheckRun(ctx, c)
			case githubsim.OpDispatchWorkflow:
				_, err = e.client.DispatchWorkflow(ctx, githubapp.Dispatch{InstallationID: inst, Repository: repo,
					WorkflowFile: "boardreadyops-release.yml", Ref: "refs/tags/v1", Inputs: map[string]string{"release_run_id": "r", "execution_attempt_id": "a"}})
			case githubsim.OpUpdateCheckRun:
				id, _, cerr := e.client.FindOrCreateCheckRun(ctx, checkRun("run-1"))
				if cerr != nil {
					t.Fatal(cerr)
				}
				start = time.Now()
				err = e.client.CompleteCheckRun(ctx, githubapp.Completion{InstallationID: inst, Repository: repo, CheckRunID: id,
					Name: "BoardReadyOps release", Conclusion: "success", Title: "Released", Summary: "ok"})
			}
			end := time.Now()
			var ge *githubapp.Error
			if !errors.As(err, &ge) || ge.Class != tt.want || ge.Status != tt.status {
				t.Fatalf("error %v, want %v with status %d (before issue 21: %s)", err, tt.want, tt.status, tt.before)
			}
			if tt.want != githubapp.RateLimited {
				return
			}
			at := ge.Limit.RetryAt
			switch tt.wait {
			case "backoff":
				if !at.IsZero() {
					t.Fatalf("retry at %v; GitHub named no time, want a backoff", at)
				}
			case "retry-after":
				if at.Before(start.Add(59*time.Second)) || at.After(end.Add(61*time.Second)) {
					t.Fatalf("retry at %v, want 60 s after the request", at)
				}
			case "reset":
				if !at.Equal(reset) {
					t.Fatalf("retry at %v, want the reset %v", at, reset)
				}
			}
			if ge.Limit.Secondary != tt.secondary {
				t.Fatalf("secondary %v, want %v", ge.Limit.Secondary, tt.secondary)
			}
		})
	}
}

// After a secondary limit without Retry-After, the client sends the next request (the caller's
// backoff decides when), instead of refusing locally until the primary reset as go-github would.
func TestSecondaryLimitIsNotRememberedUntilTheReset(t *testing.T) {
	t.Parallel()
	e := setup(t, 5*time.Second)
	var seen []githubapp.Rate
	c, err := githubapp.New(githubapp.Config{AppID: appID, PrivateKey: e.key, BaseURL: e.srv.URL, Timeout: 5 * time.Second,
		ObserveRate: func(id int64, r githubapp.Rate) {
			if id == inst {
				seen = append(seen, r)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	e.sim.SetLimits(githubsim.Limits{Budget: 5000})
	e.sim.AddFault(githubsim.Fault{Operation: githubsim.OpCreateCheckRun, Times: 1, SecondaryRateLimit: true})
	cr := checkRun("run-1")
	ctx := context.Background()
	if _, _, err := c.FindOrCreateCheckRun(ctx, cr); githubapp.ClassOf(err) != githubapp.RateLimited {
		t.Fatalf("first: %v, want rate limited", err)
	}
	if _, _, err := c.FindOrCreateCheckRun(ctx, cr); err != nil {
		t.Fatalf("second request refused: %v", err)
	}
	if n := e.sim.Count(githubsim.OpCreateCheckRun, 0); n != 2 {
		t.Fatalf("%d check-run requests reached GitHub, want 2", n)
	}
	// Each creation lists the commit's check runs first (on every attempt), so four requests.
	if len(seen) != 4 || seen[3].Limit != 5000 || seen[3].Remaining >= 5000 || seen[3].Reset.IsZero() {
		t.Fatalf("budgets observed %+v", seen)
	}
}
