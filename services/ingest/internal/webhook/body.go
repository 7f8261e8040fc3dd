package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"
)

// Reading request bodies. Content-Length is the client's claim, not a fact: the buffer starts small
// and grows only as bytes arrive, and its capacity is taken from the body budget before it is
// allocated, so the budget bounds the memory bodies really use, whatever clients announce.
//
// The minimum rate is measured per window, not as an average since the start: after the first
// window (the grace), every rateWindow must bring minRate×rateWindow bytes, or the body is cut
// off at the window's end. A fast start buys no credit, so a client that sends most of a large
// body quickly and then trickles loses its buffer within two windows instead of holding it for
// the whole read timeout.
const (
	// firstChunk is the first allocation for a body (less when Content-Length is smaller).
	firstChunk = 16 << 10
	// stallTimeout is the longest a body may send nothing.
	stallTimeout = 2 * time.Second
	// rateWindow is the window the minimum rate is measured over; the first is the grace.
	rateWindow = 2 * time.Second
)

var (
	// errTooSlow means the client sent its body slower than the minimum rate, or stalled.
	errTooSlow = errors.New("request body sent too slowly")
	// errNoBudget means the body budget stayed exhausted for budgetWait.
	errNoBudget = errors.New("body budget exhausted")
	// errTooLarge means the body is larger than MaxBody.
	errTooLarge = errors.New("body larger than MaxBody")
)

// bodyBudget is the memory budget of request bodies: the capacity of every body buffer is taken
// from it before the buffer is allocated. A slice of it is reserved for first chunks, so that
// large bodies queued for memory never keep a small delivery (a push is a few KiB) waiting: the
// semaphore serves waiters in order.
type bodyBudget struct {
	firsts *semaphore.Weighted // nil when the budget leaves no room for a reserve
	growth *semaphore.Weighted
}

func newBodyBudget(total int64) *bodyBudget {
	reserve := min(total/8, total-MaxBody)
	if reserve < firstChunk {
		return &bodyBudget{growth: semaphore.NewWeighted(total)}
	}
	return &bodyBudget{firsts: semaphore.NewWeighted(reserve), growth: semaphore.NewWeighted(total - reserve)}
}

// bodyReader reads one request body under the handler's budget and rate rules.
type bodyReader struct {
	budget   *bodyBudget
	minRate  int64     // bytes per second, in every rateWindow after the first
	deadline time.Time // the request's own deadline (the server's read timeout)
	// Budget held for the current buffer: its first chunk from the reserve, the rest from growth.
	heldFirst, heldGrowth int64
}

// release gives the buffer's budget back (the caller, once it no longer needs the body).
func (br *bodyReader) release() {
	if br.heldFirst > 0 {
		br.budget.firsts.Release(br.heldFirst)
	}
	if br.heldGrowth > 0 {
		br.budget.growth.Release(br.heldGrowth)
	}
	br.heldFirst, br.heldGrowth = 0, 0
}

// read returns the body. The caller calls release when it is done with it.
// On failure the rest of the body is not read: the connection is closed after the answer (the
// server would otherwise drain up to 256 KiB of it, at the client's pace, before answering).
func (br *bodyReader) read(ctx context.Context, w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rc := http.NewResponseController(w)
	body, err := br.readAll(ctx, rc, r)
	if err != nil {
		_ = rc.SetReadDeadline(time.Now())
		_ = r.Body.Close()
		w.Header().Set("Connection", "close")
		return nil, err
	}
	// The connection's read deadline was ours while the body was read; the server's background
	// read (which notices a client going away) must not inherit it.
	_ = rc.SetReadDeadline(time.Time{})
	return body, nil
}

func (br *bodyReader) readAll(ctx context.Context, rc *http.ResponseController, r *http.Request) ([]byte, error) {
	if r.ContentLength > MaxBody {
		return nil, errTooLarge
	}
	limit := r.ContentLength
	if limit < 0 {
		limit = MaxBody // unknown length: one byte past it is read without a buffer
	}
	if limit == 0 {
		return nil, nil
	}
	buf, err := br.grow(ctx, nil, min(limit, firstChunk))
	if err != nil {
		return nil, err
	}
	need := br.minRate * int64(rateWindow) / int64(time.Second) // bytes each window after the grace
	last := time.Now()                                          // when bytes last arrived (or the start)
	windowEnd, grace := last.Add(rateWindow), true
	var got, pending int64 // bytes in the current window; bytes of the last read, not yet counted
	var probe [1]byte      // where a chunked body's byte past MaxBody is read, into no buffer
	for {
		dst, probing := buf[len(buf):cap(buf)], false
		if len(buf) == cap(buf) {
			if int64(len(buf)) >= limit {
				if r.ContentLength >= 0 {
					return buf, nil
				}
				dst, probing = probe[:], true // chunked, at MaxBody: only its end may follow
			} else {
				began := time.Now()
				if buf, err = br.grow(ctx, buf, min(2*int64(cap(buf)), limit)); err != nil {
					return nil, err
				}
				dst = buf[len(buf):cap(buf)]
				// The wait for memory (at most budgetWait) and the copy are not the client's time.
				paused := time.Since(began)
				last, windowEnd = last.Add(paused), windowEnd.Add(paused)
			}
		}
		// Close the windows that have ended. Bytes read just after a window ended still count
		// toward it if it needs them.
		for now := time.Now(); !now.Before(windowEnd); {
			if !grace && got < need {
				got, pending = got+pending, 0
				if got < need {
					return nil, errTooSlow
				}
			}
			grace, got, windowEnd = false, 0, windowEnd.Add(rateWindow)
		}
		got, pending = got+pending, 0
		// Read until the client stalls, or until the window ends while it still owes bytes.
		d := last.Add(stallTimeout)
		if !grace && got < need {
			d = earliest(d, windowEnd)
		}
		if !br.deadline.IsZero() {
			d = earliest(d, br.deadline)
		}
		_ = rc.SetReadDeadline(d)
		n, err := r.Body.Read(dst)
		if n > 0 {
			if probing {
				return nil, errTooLarge
			}
			buf = buf[:len(buf)+n]
			last, pending = time.Now(), int64(n)
		}
		switch {
		case errors.Is(err, io.EOF):
			return buf, nil
		case isTimeout(err):
			return nil, errTooSlow
		case err != nil:
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				return nil, errTooLarge
			}
			return nil, fmt.Errorf("read body: %w", err)
		}
	}
}

// grow moves buf into a new allocation of size bytes, taking the added capacity from the budget
// first. (During the copy the old buffer also exists; with doubling that is at most half the new
// size, and it is garbage right after.)
func (br *bodyReader) grow(ctx context.Context, buf []byte, size int64) ([]byte, error) {
	add := size - int64(cap(buf))
	if buf == nil && br.budget.firsts != nil && br.budget.firsts.TryAcquire(add) {
		br.heldFirst = add
	} else {
		wctx, cancel := context.WithTimeout(ctx, budgetWait)
		err := br.budget.growth.Acquire(wctx, add)
		cancel()
		if err != nil {
			return nil, errNoBudget
		}
		br.heldGrowth += add
	}
	next := make([]byte, len(buf), size)
	copy(next, buf)
	return next, nil
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
