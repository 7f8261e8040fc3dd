package githubsim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// Fault is an injected misbehaviour. It applies to requests of Operation ("" for any) for
// InstallationID (0 for any), at most Times times (0: until cleared).
type Fault struct {
	Operation      string
	InstallationID int64
	Times          int

	// Latency delays the response.
	Latency time.Duration
	// Committed makes the request after Latency even when the client gave up meanwhile, as
	// GitHub may make a request it has received whole: the client sees a timeout, GitHub did
	// the work. Without it, a client giving up during Latency ends the request unmade.
	Committed bool
	// ServerErrorRate is the probability (0..1) of answering 502 without processing.
	ServerErrorRate float64
	// PrimaryRateLimit answers 403 with x-ratelimit-remaining: 0 and x-ratelimit-reset RetryAfter
	// from now.
	PrimaryRateLimit bool
	// SecondaryRateLimit answers as GitHub does: 403 (Status, when set: 429) with its secondary
	// rate limit message, the installation's x-ratelimit headers (budget left), and Retry-After
	// only when RetryAfter is set (GitHub often sends none).
	SecondaryRateLimit bool
	RetryAfter         time.Duration
	Status             int
	// Probability applies the fault to this share of the matching requests (0: to all).
	Probability float64
	// Response, when set, is answered verbatim (status, headers, body).
	Response *Response
	// Hang holds the request until the client gives up.
	Hang bool
	// DropAfterProcessing processes the request, then closes the connection without a response:
	// GitHub did the work, the client cannot know ("maybe delivered").
	DropAfterProcessing bool

	applied int
}

// Response is a canned answer.
type Response struct {
	Status int
	Header map[string]string
	Body   string
}

// AddFault injects f until it has applied Times times or ClearFaults is called.
func (s *Simulator) AddFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults removes every injected fault.
func (s *Simulator) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// applyFault applies the first matching fault. It reports whether the response was already
// written, and returns the writer the handler must use (one that drops the connection when the
// fault says so).
func (s *Simulator) applyFault(w http.ResponseWriter, r *http.Request, info *reqInfo) (bool, http.ResponseWriter) {
	s.mu.Lock()
	var f *Fault
	for _, c := range s.faults {
		if (c.Operation == "" || c.Operation == info.op) && (c.InstallationID == 0 || c.InstallationID == info.installationID) &&
			(c.Times == 0 || c.applied < c.Times) && (c.Probability == 0 || rand.Float64() < c.Probability) {
			f = c
			c.applied++
			break
		}
	}
	var snapshot Fault
	if f != nil {
		snapshot = *f
	}
	s.mu.Unlock()
	if f == nil {
		return false, w
	}
	f = &snapshot
	if f.Latency > 0 && f.Committed {
		time.Sleep(f.Latency)
	} else if f.Latency > 0 {
		select {
		case <-time.After(f.Latency):
		case <-r.Context().Done():
			return true, w
		}
	}
	switch {
	case f.Hang:
		// Read the body first: only then does the server watch the connection and cancel the
		// request context when the client gives up. Bounded, so a test cannot hang forever.
		_, _ = io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, 1<<20))
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Minute):
		}
		return true, w
	case f.PrimaryRateLimit:
		reset := s.now().Add(f.RetryAfter)
		w.Header().Set("x-ratelimit-limit", "5000")
		w.Header().Set("x-ratelimit-remaining", "0")
		w.Header().Set("x-ratelimit-used", "5000")
		w.Header().Set("x-ratelimit-reset", strconv.FormatInt(reset.Unix(), 10))
		w.Header().Set("x-ratelimit-resource", "core")
		writeError(w, http.StatusForbidden, fmt.Sprintf("API rate limit exceeded for installation ID %d.", info.installationID))
		return true, w
	case f.Response != nil:
		for k, v := range f.Response.Header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(f.Response.Status)
		_, _ = io.WriteString(w, f.Response.Body)
		return true, w
	case f.SecondaryRateLimit:
		if info.installationID != 0 {
			s.budgetHeaders(w, info.installationID, false)
		}
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(f.RetryAfter.Seconds())))
		}
		writeSecondaryLimit(w, cmpOr(f.Status, http.StatusForbidden))
		return true, w
	case f.ServerErrorRate > 0 && rand.Float64() < f.ServerErrorRate:
		writeError(w, http.StatusBadGateway, "Server Error")
		return true, w
	case f.DropAfterProcessing:
		return false, &dropWriter{orig: w}
	}
	return false, w
}

// dropWriter closes the client's connection instead of answering.
type dropWriter struct {
	orig   http.ResponseWriter
	header http.Header
	done   bool
}

func (d *dropWriter) Header() http.Header {
	if d.header == nil {
		d.header = http.Header{}
	}
	return d.header
}

func (d *dropWriter) WriteHeader(int) { d.drop() }

func (d *dropWriter) Write(b []byte) (int, error) { d.drop(); return len(b), nil }

func (d *dropWriter) drop() {
	if d.done {
		return
	}
	d.done = true
	if conn, _, err := http.NewResponseController(d.orig).Hijack(); err == nil {
		_ = conn.Close()
	}
}
