package githubapp

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v62/github"
)

// Class is what a failed request means for the effect that made it.
type Class int

const (
	// NotDelivered: the request provably never reached GitHub (dial or DNS error, failure before
	// the request was written, token could not be minted for a transient reason). Safe to retry,
	// even for a workflow dispatch.
	NotDelivered Class = iota + 1
	// RateLimited: GitHub refused to process it for now; retry at RetryAt without spending an attempt.
	RateLimited
	// Rejected: GitHub definitely refused it (404, 422, credentials refused after a refresh).
	// Retrying cannot help: dead-letter.
	Rejected
	// MaybeDelivered: the request was written and its outcome is unknown (timeout or connection
	// lost after writing, 5xx). A workflow dispatch then needs reconciliation; replay-safe effects
	// retry.
	MaybeDelivered
)

func (c Class) String() string {
	switch c {
	case NotDelivered:
		return "not_delivered"
	case RateLimited:
		return "rate_limited"
	case Rejected:
		return "rejected"
	case MaybeDelivered:
		return "maybe_delivered"
	}
	return "unknown"
}

// Error is a classified failure of one GitHub operation.
type Error struct {
	Op      string
	Class   Class
	Status  int       // HTTP status, 0 when there was no response
	RetryAt time.Time // for RateLimited
	Err     error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("github %s: %s", e.Op, e.Class)
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Class == RateLimited {
		s += " until " + e.RetryAt.UTC().Format(time.RFC3339)
	}
	return s + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// ClassOf returns the class of err (0 when err is not a classified GitHub error).
func ClassOf(err error) Class {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return 0
}

// ErrNoRunDetails: GitHub accepted a workflow dispatch (204) without returning the run it
// created, so the run id is unknown (GitHub Enterprise Server without return_run_details).
var ErrNoRunDetails = errors.New("dispatch accepted without run details: the workflow run id is unknown")

// defaultRetry is used when a rate limit response carries no reset time.
const defaultRetry = time.Minute

// classify turns the outcome of one request into an *Error (nil for success). wrote reports
// whether the request was completely written to GitHub.
func classify(op string, resp *http.Response, err error, wrote bool, now time.Time) *Error {
	if err == nil {
		return nil
	}
	e := &Error{Op: op, Err: err}
	if resp != nil {
		e.Status = resp.StatusCode
	}
	var tokenErr *ghinstallation.HTTPError
	var rateErr *github.RateLimitError
	var abuseErr *github.AbuseRateLimitError
	switch {
	case errors.As(err, &tokenErr):
		// The installation token could not be minted; the request itself was never sent.
		e.Class = NotDelivered
		if tokenErr.Response != nil {
			e.Status = tokenErr.Response.StatusCode
			if class, at := classifyStatus(tokenErr.Response, now); class == RateLimited {
				e.Class, e.RetryAt = RateLimited, at
			} else if e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden || e.Status == http.StatusNotFound {
				e.Class = Rejected // App credentials refused, or the installation is gone
			}
		}
	case errors.As(err, &rateErr):
		e.Class, e.RetryAt = RateLimited, rateErr.Rate.Reset.Time
	case errors.As(err, &abuseErr):
		e.Class, e.RetryAt = RateLimited, now.Add(defaultRetry)
		if abuseErr.RetryAfter != nil {
			e.RetryAt = now.Add(*abuseErr.RetryAfter)
		}
	case resp != nil:
		e.Class, e.RetryAt = classifyStatus(resp, now)
	case !wrote:
		e.Class = NotDelivered
	default:
		e.Class = MaybeDelivered
	}
	if e.Class == RateLimited && !e.RetryAt.After(now) {
		e.RetryAt = now.Add(time.Second)
	}
	return e
}

func classifyStatus(resp *http.Response, now time.Time) (Class, time.Time) {
	h := resp.Header
	retryAfter := func() (time.Time, bool) {
		if v, err := strconv.Atoi(h.Get("Retry-After")); err == nil && v >= 0 {
			return now.Add(time.Duration(v) * time.Second), true
		}
		if h.Get("X-Ratelimit-Remaining") == "0" {
			if v, err := strconv.ParseInt(h.Get("X-Ratelimit-Reset"), 10, 64); err == nil {
				return time.Unix(v, 0), true
			}
		}
		return time.Time{}, false
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		if at, ok := retryAfter(); ok {
			return RateLimited, at
		}
		return RateLimited, now.Add(defaultRetry)
	case resp.StatusCode == http.StatusForbidden:
		if at, ok := retryAfter(); ok {
			return RateLimited, at
		}
		return Rejected, time.Time{}
	case resp.StatusCode >= 500:
		return MaybeDelivered, time.Time{}
	case resp.StatusCode >= 400:
		return Rejected, time.Time{}
	}
	return MaybeDelivered, time.Time{} // an unexpected non-error status with an error
}

// StatusClass is the closed-set metric label for a request's outcome.
func StatusClass(status int, err error) string {
	switch {
	case ClassOf(err) == RateLimited:
		return "rate_limited"
	case status >= 200 && status < 600:
		return strconv.Itoa(status/100) + "xx"
	case err != nil:
		return "error"
	}
	return "2xx"
}
