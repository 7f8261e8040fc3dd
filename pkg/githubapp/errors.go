package githubapp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
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
	// RateLimited: GitHub refused to process it for now (a primary or secondary rate limit); retry
	// at Limit.RetryAt, or after a backoff when it is zero, without spending an attempt.
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
	Op     string
	Class  Class
	Status int   // HTTP status, 0 when there was no response
	Limit  Limit // for RateLimited
	Err    error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("github %s: %s", e.Op, e.Class)
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	switch {
	case e.Class == RateLimited && e.Limit.RetryAt.IsZero() && e.Limit.Secondary:
		s += " (secondary, no retry time: backing off)"
	case e.Class == RateLimited && e.Limit.RetryAt.IsZero():
		s += " (no retry time, or one already past by this replica's clock: backing off)"
	case e.Class == RateLimited:
		s += " until " + e.Limit.RetryAt.UTC().Format(time.RFC3339)
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
	var respErr *github.ErrorResponse
	switch {
	case errors.As(err, &tokenErr):
		// The installation token could not be minted; the request itself was never sent.
		e.Class = NotDelivered
		if r := tokenErr.Response; r != nil {
			e.Status = r.StatusCode
			message, docURL := errorBody(r)
			if l, ok := rateLimit(r.StatusCode, r.Header, message, docURL, now); ok {
				e.Class, e.Limit = RateLimited, l
			} else if e.Status == http.StatusUnauthorized && jwtTimeRefused(message) {
				// The App JWT's times refused: this replica's clock is off from GitHub's (its iat
				// ahead of GitHub's clock, or its exp behind). Not the App's key: every effect it
				// claimed was dead-lettered; retried instead, and the error says why.
				e.Err = fmt.Errorf("%w (GitHub refused the App JWT's times: this replica's clock is probably off; check its time synchronisation)", err)
			} else if e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden || e.Status == http.StatusNotFound {
				e.Class = Rejected // App credentials refused, or the installation is gone
			}
		}
	case errors.As(err, &rateErr) && (rateErr.Response == nil || len(rateErr.Response.Header) == 0):
		// go-github's own refusal to send: a response it saw earlier left no budget until the reset.
		e.Class, e.Limit = RateLimited, Limit{RetryAt: rateErr.Rate.Reset.Time}
	case errors.As(err, &rateErr):
		e.Class = RateLimited
		e.Limit, _ = rateLimit(rateErr.Response.StatusCode, rateErr.Response.Header, rateErr.Message, "", now)
	case errors.As(err, &abuseErr):
		// go-github reads x-ratelimit-reset as the wait of a secondary limit, even with budget
		// left (an hour where GitHub asks for a minute): the headers are read here instead.
		e.Class = RateLimited
		e.Limit, _ = rateLimit(abuseErr.Response.StatusCode, abuseErr.Response.Header, abuseErr.Message, "", now)
		e.Limit.Secondary = e.Limit.Secondary || e.Limit.RetryAt.IsZero()
	case errors.As(err, &respErr) && respErr.Response != nil:
		if l, ok := rateLimit(respErr.Response.StatusCode, respErr.Response.Header, respErr.Message, respErr.DocumentationURL, now); ok {
			e.Class, e.Limit = RateLimited, l
		} else {
			e.Class = classifyStatus(respErr.Response.StatusCode)
		}
	case resp != nil:
		message, docURL := errorBody(resp)
		if l, ok := rateLimit(resp.StatusCode, resp.Header, message, docURL, now); ok {
			e.Class, e.Limit = RateLimited, l
		} else {
			e.Class = classifyStatus(resp.StatusCode)
		}
	case !wrote:
		e.Class = NotDelivered
	default:
		e.Class = MaybeDelivered
	}
	if e.Class == RateLimited && !e.Limit.RetryAt.IsZero() && e.Limit.RetryAt.Before(now) {
		// A time already past by our clock: the replica's clock is ahead of GitHub's, or the
		// header is stale. Waiting a second would be refused again every second for as long as the
		// skew lasts, and GitHub warns that requests sent while limited can get an integration
		// banned: no time named, so the backoff (at least a minute, growing while it repeats).
		e.Limit.RetryAt = time.Time{}
	} else if e.Class == RateLimited && e.Limit.RetryAt.Equal(now) {
		e.Limit.RetryAt = now.Add(time.Second) // Retry-After: 0
	}
	return e
}

// jwtTimeRefused reports whether GitHub's message refuses an App JWT for its iat or exp claim.
// ghinstallation's JWTs live two minutes, so an exp "too far in the future" (more than ten
// minutes past GitHub's clock) is a clock ahead too.
func jwtTimeRefused(message string) bool {
	return strings.Contains(message, "('iat')") || strings.Contains(message, "('exp')")
}

func classifyStatus(status int) Class {
	switch {
	case status >= 500:
		return MaybeDelivered
	case status >= 400:
		return Rejected
	}
	return MaybeDelivered // an unexpected non-error status with an error
}

// Limit is what a rate-limited response asks of the client.
type Limit struct {
	// RetryAt is when GitHub allows the next request: now + retry-after, or x-ratelimit-reset
	// when x-ratelimit-remaining is 0. Zero when the response names no time, or one already past
	// by the replica's clock: GitHub then asks for
	// at least a minute, growing exponentially while the limit repeats (the caller keeps that
	// count per installation).
	RetryAt time.Time
	// Secondary: a secondary rate limit (concurrency, mutations too close, points per minute),
	// not the primary hourly budget.
	Secondary bool
}

// Markers of GitHub's rate-limit error bodies ("Rate limits for the REST API"). GitHub's wording
// of a secondary limit has been "You have exceeded a secondary rate limit …" (and, for content
// creation, "… and have been temporarily blocked from content creation"); before 2022 it was
// "You have triggered an abuse detection mechanism …". A primary limit says "API rate limit
// exceeded for installation ID …".
var (
	secondaryMessages = []string{"secondary rate limit", "abuse detection"}
	secondaryDocs     = []string{"secondary-rate-limits", "#abuse-rate-limits"}
	primaryMessages   = []string{"api rate limit exceeded", "api rate limit of"}
)

// rateLimit recognises every documented rate-limit shape of a 403 or 429 and when it allows the
// next request, in GitHub's order: retry-after when present; else x-ratelimit-reset when
// x-ratelimit-remaining is 0; else no time (the caller backs off exponentially from a minute).
// The reset of a secondary limit with budget left is the primary window's, up to an hour away,
// and is not a wait GitHub asks for.
func rateLimit(status int, h http.Header, message, docURL string, now time.Time) (Limit, bool) {
	if status != http.StatusForbidden && status != http.StatusTooManyRequests {
		return Limit{}, false
	}
	msg, doc := strings.ToLower(message), strings.ToLower(docURL)
	secondary := containsAny(msg, secondaryMessages) || containsAny(doc, secondaryDocs)
	primary := containsAny(msg, primaryMessages)
	rate, hasRate := ParseRate(h)
	exhausted := hasRate && rate.Remaining == 0
	after, hasAfter := retryAfter(h, now)
	if !hasAfter && !exhausted && !secondary && !primary && status == http.StatusForbidden {
		return Limit{}, false // a 403 that is no rate limit: permissions, a blocked repository, …
	}
	switch {
	case hasAfter:
		return Limit{RetryAt: after, Secondary: !exhausted || secondary}, true
	case exhausted && !rate.Reset.IsZero():
		return Limit{RetryAt: rate.Reset, Secondary: secondary}, true
	}
	return Limit{Secondary: !primary || secondary}, true
}

// retryAfter reads Retry-After: delay-seconds, or an HTTP date (RFC 9110).
func retryAfter(h http.Header, now time.Time) (time.Time, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return time.Time{}, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return now.Add(time.Duration(min(n, 86400)) * time.Second), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// Rate is the primary budget a response reports (x-ratelimit-limit, -remaining, -reset).
type Rate struct {
	Limit     int
	Remaining int
	Reset     time.Time
}

// ParseRate reads the x-ratelimit headers; false when they are missing or malformed.
func ParseRate(h http.Header) (Rate, bool) {
	limit, err1 := strconv.Atoi(h.Get("X-Ratelimit-Limit"))
	remaining, err2 := strconv.Atoi(h.Get("X-Ratelimit-Remaining"))
	reset, err3 := strconv.ParseInt(h.Get("X-Ratelimit-Reset"), 10, 64)
	if err1 != nil || err2 != nil || limit < 0 || remaining < 0 {
		return Rate{}, false
	}
	r := Rate{Limit: limit, Remaining: remaining}
	if err3 == nil && reset > 0 {
		r.Reset = time.Unix(reset, 0)
	}
	return r, true
}

// errorBody reads GitHub's error body ({"message", "documentation_url"}) of a response whose
// body is still readable (bounded); empty strings otherwise.
func errorBody(resp *http.Response) (message, docURL string) {
	if resp == nil || resp.Body == nil {
		return "", ""
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if err != nil {
		return "", ""
	}
	var body struct {
		Message          string `json:"message"`
		DocumentationURL string `json:"documentation_url"`
	}
	if json.Unmarshal(b, &body) != nil {
		return "", ""
	}
	return body.Message, body.DocumentationURL
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// StatusClasses is the closed set StatusClass returns from.
var StatusClasses = []string{"2xx", "3xx", "4xx", "5xx", "rate_limited", "error"}

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
