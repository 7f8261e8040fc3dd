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
const (
	// firstChunk is the first allocation for a body (less when Content-Length is smaller).
	firstChunk = 16 << 10
	// stallTimeout is the longest a body may send nothing, and the grace before the minimum rate
	// applies.
	stallTimeout = 2 * time.Second
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
	minRate  int64     // bytes per second, after stallTimeout
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
	limit := int64(MaxBody) + 1 // unknown length: read one byte past the cap to detect it
	if r.ContentLength > MaxBody {
		return nil, errTooLarge
	}
	if r.ContentLength >= 0 {
		limit = r.ContentLength
	}
	if limit == 0 {
		return nil, nil
	}
	buf, err := br.grow(ctx, nil, min(limit, firstChunk))
	if err != nil {
		return nil, err
	}
	start := time.Now()
	last := start
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) >= limit {
				if r.ContentLength < 0 {
					return nil, errTooLarge
				}
				return buf, nil
			}
			if buf, err = br.grow(ctx, buf, min(2*int64(cap(buf)), limit)); err != nil {
				return nil, err
			}
		}
		// By now the client must have sent minRate bytes for every second past the grace, and
		// something within the last stallTimeout.
		d := earliest(start.Add(stallTimeout+time.Duration(int64(len(buf))*int64(time.Second)/br.minRate)), last.Add(stallTimeout))
		if !br.deadline.IsZero() {
			d = earliest(d, br.deadline)
		}
		_ = rc.SetReadDeadline(d)
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if n > 0 {
			last = time.Now()
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
