package githubsim

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// A poster sends one webhook request and returns the HTTP status (0: no answer).
type poster interface {
	post(ctx context.Context, url string, header *hookHeader, payload []byte) int
}

// hookHeader is what a webhook request carries besides its body.
type hookHeader struct {
	event, guid, signature string
}

// clientPoster sends through an http.Client (the presses tests make, and any URL but plain
// http).
type clientPoster struct{ client *http.Client }

func (p clientPoster) post(ctx context.Context, target string, h *hookHeader, payload []byte) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(payload))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", hookUserAgent)
	req.Header.Set("X-GitHub-Event", h.event)
	req.Header.Set("X-GitHub-Delivery", h.guid)
	req.Header.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
	req.Header.Set("X-Hub-Signature-256", h.signature)
	resp, err := p.client.Do(req)
	if err != nil {
		return 0
	}
	// Read to the end (bounded) so the connection goes back to the pool: a body closed unread
	// makes the transport drop it.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return resp.StatusCode
}

const hookUserAgent = "GitHub-Hookshot/sim"

// connPoster is one webhook sender's own kept-alive HTTP/1.1 connection to a plain http URL: it
// writes the request and reads the answer on the sender's goroutine. net/http's Transport hands
// every request to two goroutines of its own (a connection's reader and writer) and back; at ten
// webhooks per release run that hand-off was a measurable part of the simulator's CPU on the
// cores it shares with the product. A connection the server closed is dialled again.
type connPoster struct {
	timeout time.Duration
	target  string
	url     *url.URL // target, parsed
	conn    net.Conn
	br      *bufio.Reader
	bw      *bufio.Writer
	used    bool // a request went over conn already
}

func newConnPoster(timeout time.Duration) *connPoster { return &connPoster{timeout: timeout} }

func (p *connPoster) post(ctx context.Context, target string, h *hookHeader, payload []byte) int {
	if target != p.target {
		u, err := url.Parse(target)
		if err != nil || u.Scheme != "http" || u.Host == "" {
			return 0
		}
		p.close()
		p.target, p.url = target, u
	}
	u := p.url
	// One retry, on a kept-alive connection that failed before the server can have answered: the
	// request was not written whole, or the connection was closed (while idle, from the server's
	// side) before any byte of an answer came — the two cases in which net/http's Transport resends
	// a POST on a reused connection. A webhook carries its delivery id, so a resend the server did
	// get after all is a duplicate there. A
	// timeout or a partial answer is not retried: the server may have processed it, and the
	// caller decides (deliver sends it again, recorded).
	for attempt := 0; attempt < 2; attempt++ {
		reused := p.conn != nil && p.used
		code, retryable, err := p.roundTrip(ctx, u, h, payload)
		if err == nil {
			return code
		}
		p.close()
		if !reused || !retryable || ctx.Err() != nil {
			return 0
		}
	}
	return 0
}

// roundTrip sends one request and reads its answer; retryable reports, with an error, that the
// server cannot have answered it (see post).
func (p *connPoster) roundTrip(ctx context.Context, u *url.URL, h *hookHeader, payload []byte) (code int, retryable bool, err error) {
	if p.conn == nil {
		d := net.Dialer{Timeout: p.timeout}
		c, err := d.DialContext(ctx, "tcp", hostPort(u))
		if err != nil {
			return 0, false, err
		}
		p.conn, p.br, p.bw, p.used = c, bufio.NewReaderSize(c, 4096), bufio.NewWriterSize(c, 8192), false
	}
	p.used = true
	if err := p.conn.SetDeadline(time.Now().Add(p.timeout)); err != nil {
		return 0, false, err
	}
	conn := p.conn
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	head := make([]byte, 0, 512)
	head = append(head, "POST "...)
	head = append(head, u.RequestURI()...)
	head = append(head, " HTTP/1.1\r\nHost: "...)
	head = append(head, u.Host...)
	head = append(head, "\r\nUser-Agent: "+hookUserAgent+"\r\nContent-Type: application/json\r\nContent-Length: "...)
	head = strconv.AppendInt(head, int64(len(payload)), 10)
	head = append(head, "\r\nX-GitHub-Event: "...)
	head = append(head, h.event...)
	head = append(head, "\r\nX-GitHub-Delivery: "...)
	head = append(head, h.guid...)
	head = append(head, "\r\nX-GitHub-Hook-Installation-Target-Type: integration\r\nX-Hub-Signature-256: "...)
	head = append(head, h.signature...)
	head = append(head, "\r\n\r\n"...)
	// A request not written whole cannot have been processed: a complete one needs all of its
	// Content-Length.
	w := p.bw
	if _, err := w.Write(head); err != nil {
		return 0, true, err
	}
	if _, err := w.Write(payload); err != nil {
		return 0, true, err
	}
	if err := w.Flush(); err != nil {
		return 0, true, err
	}
	// The first byte of the answer alone first: a connection closed before it (EOF, a reset, not
	// a timeout) can be retried; http.ReadResponse reports that as a broken answer.
	if _, err := p.br.Peek(1); err != nil {
		var ne net.Error
		timeout := errors.As(err, &ne) && ne.Timeout()
		closed := errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
		return 0, closed && !timeout, err
	}
	for {
		resp, err := http.ReadResponse(p.br, nil)
		if err != nil {
			return 0, false, err
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			resp.Body.Close()
			continue // an interim answer (100, 103): the final one follows
		}
		// Read to the end (bounded): the next answer follows it on the connection. A longer one
		// closes the connection first, so that closing the body does not read the rest.
		n, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		if err != nil || n == 1<<16 || resp.Close {
			p.close() // not reusable; the answer stands
		}
		resp.Body.Close()
		return resp.StatusCode, false, nil
	}
}

func (p *connPoster) close() {
	if p.conn != nil {
		_ = p.conn.Close()
	}
	p.conn, p.br, p.bw = nil, nil, nil
}

func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}
