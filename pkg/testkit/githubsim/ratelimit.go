package githubsim

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Limits model GitHub's rate limits per installation ("Rate limits for the REST API"): a primary
// budget of requests per window, reported on every installation response in the x-ratelimit
// headers, and secondary limits on concurrent requests and on mutating requests (POST, PATCH,
// PUT, DELETE) closer together than GitHub's "at least one second".
type Limits struct {
	// Budget is the primary budget of one installation per Window (GitHub's minimum for an
	// installation is 5,000 per hour; 0: unlimited, and no x-ratelimit headers are sent). An
	// exhausted budget answers 403 with x-ratelimit-remaining 0 until the window resets.
	Budget int
	Window time.Duration
	// MaxConcurrent > 0: a request while that many of the installation's are in flight is answered
	// with a secondary limit.
	MaxConcurrent int
	// MutationInterval > 0: a mutating request sooner than this after the installation's previous
	// one is answered with a secondary limit.
	MutationInterval time.Duration
	// RetryAfter is sent with secondary limits when set; GitHub often sends none.
	RetryAfter time.Duration
	// Strict records every request that broke the pacing rules (MaxConcurrent, MutationInterval)
	// as a Violation, for tests to assert there were none.
	Strict bool
}

// Violation is a request that broke the pacing rules.
type Violation struct {
	Time           time.Time
	InstallationID int64
	Method, Path   string
	// Kind is "concurrent" (InFlight requests were already in flight) or "mutation_interval"
	// (Since the installation's previous mutation).
	Kind     string
	InFlight int
	Since    time.Duration
}

type budget struct {
	used        int
	reset       time.Time
	inFlight    int
	lastMutated time.Time
}

// SetLimits replaces the rate-limit model (budgets already used are kept).
func (s *Simulator) SetLimits(l Limits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits = l
}

// Violations returns the pacing violations recorded in strict mode.
func (s *Simulator) Violations() []Violation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Violation(nil), s.violations...)
}

func (s *Simulator) budgetOf(id int64, now time.Time) *budget {
	b := s.budgets[id]
	if b == nil {
		b = &budget{}
		s.budgets[id] = b
	}
	if !now.Before(b.reset) {
		b.used, b.reset = 0, now.Add(cmpOr(s.limits.Window, time.Hour)).Truncate(time.Second)
	}
	return b
}

// budgetHeaders writes the installation's x-ratelimit headers; spend counts this request.
func (s *Simulator) budgetHeaders(w http.ResponseWriter, id int64, spend bool) (exhausted bool) {
	s.mu.Lock()
	limit := s.limits.Budget
	if limit <= 0 {
		s.mu.Unlock()
		return false
	}
	b := s.budgetOf(id, s.now())
	if spend && b.used < limit {
		b.used++
	} else if spend {
		exhausted = true
	}
	used, reset := b.used, b.reset
	s.mu.Unlock()
	h := w.Header()
	h.Set("x-ratelimit-limit", strconv.Itoa(limit))
	h.Set("x-ratelimit-remaining", strconv.Itoa(limit-used))
	h.Set("x-ratelimit-used", strconv.Itoa(used))
	h.Set("x-ratelimit-reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("x-ratelimit-resource", "core")
	return exhausted
}

// refund gives back the budget the request being answered spent (a 304 to a conditional
// request, which GitHub does not count) and rewrites its x-ratelimit headers.
func (s *Simulator) refund(w http.ResponseWriter, id int64) {
	s.mu.Lock()
	if b := s.budgets[id]; b != nil && b.used > 0 && s.limits.Budget > 0 {
		b.used--
	}
	s.mu.Unlock()
	s.budgetHeaders(w, id, false)
}

// limit applies the rate-limit model to one installation request. It reports whether the
// response was written; done must be called when the request ends.
func (s *Simulator) limit(w http.ResponseWriter, r *http.Request, id int64) (handled bool, done func()) {
	now := s.now()
	mutating := r.Method != http.MethodGet && r.Method != http.MethodHead
	s.mu.Lock()
	l := s.limits
	b := s.budgetOf(id, now)
	b.inFlight++
	var v *Violation
	switch {
	case l.MaxConcurrent > 0 && b.inFlight > l.MaxConcurrent:
		v = &Violation{Kind: "concurrent", InFlight: b.inFlight - 1}
	case mutating && l.MutationInterval > 0 && !b.lastMutated.IsZero() && now.Sub(b.lastMutated) < l.MutationInterval:
		v = &Violation{Kind: "mutation_interval", Since: now.Sub(b.lastMutated)}
	}
	if mutating {
		b.lastMutated = now
	}
	if v != nil && l.Strict {
		v.Time, v.InstallationID, v.Method, v.Path = now, id, r.Method, r.URL.Path
		s.violations = append(s.violations, *v)
	}
	s.mu.Unlock()
	done = func() {
		s.mu.Lock()
		s.budgets[id].inFlight--
		s.mu.Unlock()
	}
	if s.budgetHeaders(w, id, true) {
		w.Header().Set("x-ratelimit-remaining", "0")
		writeError(w, http.StatusForbidden, fmt.Sprintf("API rate limit exceeded for installation ID %d.", id))
		return true, done
	}
	if v != nil {
		if l.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(l.RetryAfter.Seconds())))
		}
		writeSecondaryLimit(w, http.StatusForbidden)
		return true, done
	}
	return false, done
}

// writeSecondaryLimit writes GitHub's secondary rate limit answer.
func writeSecondaryLimit(w http.ResponseWriter, status int) {
	writeJSON(w, status, map[string]string{
		"message":           "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID 0000:0000:0000000:0000000:00000000.",
		"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
	})
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
