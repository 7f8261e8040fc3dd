// Package githubapp is BoardReadyOps' GitHub App client, on go-github v62 and ghinstallation:
// the App JWT from the private key file, one cached installation transport (and token) per
// installation, the base URL from configuration (api.github.com, GitHub Enterprise Server, or the
// simulator). Every failure comes back as an *Error classified for the outbox (NotDelivered,
// RateLimited, Rejected, MaybeDelivered). Tokens and keys are never logged or returned.
package githubapp

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v62/github"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config configures a Client.
type Config struct {
	AppID int64
	// PrivateKey is the App's PEM private key (read it with ReadPrivateKey).
	PrivateKey []byte
	// BaseURL of the REST API, e.g. https://api.github.com/ or https://ghe.example.com/api/v3/.
	BaseURL string
	// Timeout bounds each request; keep it shorter than the outbox lease.
	Timeout time.Duration
	// Transport is the base transport (nil: a pooled default).
	Transport http.RoundTripper
	// Observe, when set, is called after each request with the operation, the status class
	// (StatusClass) and the duration.
	Observe func(operation, statusClass string, seconds float64)
	// Tracer spans each request (nil: no spans).
	Tracer trace.Tracer
	// ObserveRate, when set, is called after each installation request whose response carried
	// the x-ratelimit headers, with the installation's primary budget as GitHub reported it.
	ObserveRate func(installationID int64, rate Rate)
	// OnCheckRunStateIgnored, when set, is called when GitHub answers a check-run update with
	// another state than the update set: a completed check run it did not reopen, or whose
	// conclusion it kept. sent and got are a status, or completed/conclusion.
	OnCheckRunStateIgnored func(installationID, checkRunID int64, sent, got string)
}

// Client calls GitHub as the App and its installations.
type Client struct {
	cfg  Config
	base *url.URL
	key  *rsa.PrivateKey
	tr   http.RoundTripper
	app  *github.Client

	mu            sync.Mutex
	installations map[int64]*installationClient
}

// installationClient is one installation's token transport and the go-github client on it.
type installationClient struct {
	tr *ghinstallation.Transport
	gh *github.Client
}

// ReadPrivateKey reads a PEM private key file, failing clearly (never echoing its content).
func ReadPrivateKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read GitHub App private key: %w", err)
	}
	if _, err := parseKey(b); err != nil {
		return nil, err
	}
	return b, nil
}

// New builds a client.
func New(cfg Config) (*Client, error) {
	if cfg.AppID <= 0 {
		return nil, errors.New("GitHub App id must be positive")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 20 * time.Second
	}
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider().Tracer("")
	}
	raw := cfg.BaseURL
	if raw == "" {
		raw = "https://api.github.com/"
	}
	if !strings.HasSuffix(raw, "/") {
		raw += "/"
	}
	base, err := url.Parse(raw)
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" {
		return nil, fmt.Errorf("GitHub API URL %q is not an http(s) URL", cfg.BaseURL)
	}
	tr := cfg.Transport
	if tr == nil {
		tr = &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 128,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 5 * time.Second,
			ForceAttemptHTTP2:   true,
		}
	}
	key, err := parseKey(cfg.PrivateKey)
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, base: base, key: key, tr: writeTracker{next: tr}, installations: map[int64]*installationClient{}}
	c.app = c.newGitHub(c.appsTransport())
	return c, nil
}

// appsTransport signs App JWTs. Each installation gets its own: ghinstallation's installation
// transport writes to its apps transport when it refreshes a token, so sharing one would race.
func (c *Client) appsTransport() *ghinstallation.AppsTransport {
	apps := ghinstallation.NewAppsTransportFromPrivateKey(c.tr, c.cfg.AppID, c.key)
	apps.BaseURL = strings.TrimSuffix(c.base.String(), "/")
	return apps
}

func parseKey(b []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("GitHub App private key holds no PEM block")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if rk, ok := k.(*rsa.PrivateKey); ok {
			return rk, nil
		}
	}
	return nil, errors.New("GitHub App private key is not an RSA private key (PKCS#1 or PKCS#8)")
}

func (c *Client) newGitHub(rt http.RoundTripper) *github.Client {
	gh := github.NewClient(&http.Client{Transport: rt})
	gh.BaseURL = c.base
	gh.UserAgent = "boardreadyops"
	return gh
}

// installation returns the cached client of an installation (its transport mints and refreshes
// the installation token as needed).
func (c *Client) installation(id int64) *github.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	ic, ok := c.installations[id]
	if !ok {
		apps := c.appsTransport()
		itr := ghinstallation.NewFromAppsTransport(apps, id)
		itr.BaseURL = apps.BaseURL
		ic = &installationClient{tr: itr, gh: c.newGitHub(itr)}
		c.installations[id] = ic
	}
	return ic.gh
}

// forgetLimits replaces an installation's go-github client (keeping its token) after a rate
// limit. go-github remembers limits per client and then refuses to send until a time it chose
// — for a secondary limit without Retry-After, the primary window's reset, up to an hour where
// GitHub asks for a minute. The shared block in PostgreSQL decides instead (docs/dispatcher.md).
func (c *Client) forgetLimits(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ic, ok := c.installations[id]; ok {
		c.installations[id] = &installationClient{tr: ic.tr, gh: c.newGitHub(ic.tr)}
	}
}

// forget drops an installation's cached token, so the next request mints a new one.
func (c *Client) forget(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.installations, id)
}

// call runs one GitHub operation with the timeout, a span, write tracking and classification. A
// 401 (token refused) or a 403 that is no rate limit (an installation token carries the
// permissions the installation had when it was minted: after the owner approves a permission the
// App asked for, such as Actions write, a token cached before still lacks it for up to an hour)
// is retried once with a fresh token — it was not processed — and only a second refusal is
// Rejected.
func (c *Client) call(ctx context.Context, op string, installationID int64, f func(ctx context.Context, gh *github.Client) (*github.Response, error)) error {
	for try := 0; ; try++ {
		err := c.callOnce(ctx, op, installationID, f)
		var e *Error
		if try == 0 && installationID != 0 && errors.As(err, &e) && e.Class == Rejected &&
			(e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden) {
			c.forget(installationID)
			continue
		}
		return err
	}
}

func (c *Client) callOnce(ctx context.Context, op string, installationID int64, f func(ctx context.Context, gh *github.Client) (*github.Response, error)) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	ctx, span := c.cfg.Tracer.Start(ctx, "github."+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.Int64("github.installation_id", installationID)))
	defer span.End()
	flag := &wroteFlag{}
	ctx = context.WithValue(ctx, wroteKey{}, flag)
	gh := c.app
	if installationID != 0 {
		gh = c.installation(installationID)
	}
	start := time.Now()
	resp, err := f(ctx, gh)
	var httpResp *http.Response
	if resp != nil {
		httpResp = resp.Response
	}
	cerr := classify(op, httpResp, err, flag.wrote.Load(), time.Now())
	status := 0
	if httpResp != nil {
		status = httpResp.StatusCode
	}
	if httpResp != nil && installationID != 0 && c.cfg.ObserveRate != nil {
		if rate, ok := ParseRate(httpResp.Header); ok {
			c.cfg.ObserveRate(installationID, rate)
		}
	}
	if cerr != nil && cerr.Class == RateLimited && installationID != 0 {
		c.forgetLimits(installationID)
	}
	if cerr != nil {
		status = cerr.Status
		span.SetStatus(codes.Error, cerr.Class.String())
		span.SetAttributes(attribute.String("boardreadyops.failure_class", cerr.Class.String()))
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if c.cfg.Observe != nil {
		var asErr error
		if cerr != nil {
			asErr = cerr
		}
		c.cfg.Observe(op, StatusClass(status, asErr), time.Since(start).Seconds())
	}
	if cerr != nil {
		return cerr
	}
	return nil
}

// wroteKey carries a *wroteFlag through a request's context; writeTracker sets it once the
// request (not the token request that may precede it) was completely written.
type wroteKey struct{}

type wroteFlag struct{ wrote atomic.Bool }

type writeTracker struct{ next http.RoundTripper }

func (t writeTracker) RoundTrip(req *http.Request) (*http.Response, error) {
	if f, ok := req.Context().Value(wroteKey{}).(*wroteFlag); ok && !strings.HasSuffix(req.URL.Path, "/access_tokens") {
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			WroteRequest: func(info httptrace.WroteRequestInfo) {
				if info.Err == nil {
					f.wrote.Store(true)
				}
			},
		}))
	}
	return t.next.RoundTrip(req)
}

func splitRepo(fullName string) (string, string, error) {
	owner, repo, ok := strings.Cut(fullName, "/")
	if !ok || owner == "" || repo == "" || strings.Contains(repo, "/") {
		return "", "", &Error{Op: "parse", Class: Rejected, Err: fmt.Errorf("repository %q is not owner/name", fullName)}
	}
	return owner, repo, nil
}
