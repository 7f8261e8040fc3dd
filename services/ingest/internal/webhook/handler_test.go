package webhook_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/boardreadyops/cloud/pkg/hubsig"
	"github.com/boardreadyops/cloud/pkg/telemetry"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
	"github.com/boardreadyops/cloud/services/ingest/internal/store"
	"github.com/boardreadyops/cloud/services/ingest/internal/webhook"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const fixtures = "../../../../pkg/eventdoc/testdata"

var testSecret = []byte("test-secret-generated-for-this-test")

type env struct {
	pool    *pgxpool.Pool
	srv     *httptest.Server
	reg     *prometheus.Registry
	secrets atomic.Pointer[[][]byte]
	seq     atomic.Int64
	logs    *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func setup(t *testing.T) *env { return setupWith(t, nil) }

// setupWith serves a handler whose options configure may change.
func setupWith(t *testing.T, configure func(*env, *webhook.Options)) *env {
	t.Helper()
	e := &env{pool: pgtest.NewPool(t), reg: prometheus.NewRegistry(), logs: &lockedBuffer{}}
	e.setSecrets(testSecret)
	tp := telemetry.NewTracerProvider()
	opts := webhook.Options{
		Secrets:      func() [][]byte { return *e.secrets.Load() },
		Store:        &store.Store{DB: e.pool},
		Metrics:      webhook.NewMetrics(e.reg),
		Tracer:       tp.Tracer("test"),
		Logger:       slog.New(slog.NewTextHandler(e.logs, nil)),
		StoreTimeout: 5e9,
	}
	if configure != nil {
		configure(e, &opts)
	}
	e.srv = httptest.NewServer(webhook.NewHandler(opts))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *env) setSecrets(s ...[]byte) { e.secrets.Store(&s) }

type req struct {
	method, event, delivery, contentType, signature string
	body                                            []byte
	unsigned                                        bool
}

func (e *env) send(t *testing.T, r req) (int, http.Header, map[string]any) {
	t.Helper()
	if r.method == "" {
		r.method = http.MethodPost
	}
	if r.contentType == "" {
		r.contentType = "application/json"
	}
	if r.delivery == "" {
		r.delivery = fmt.Sprintf("72d3162e-cc78-11e3-81ab-%012d", e.seq.Add(1))
	}
	hr, err := http.NewRequest(r.method, e.srv.URL, bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Content-Type", r.contentType)
	if r.event != "" {
		hr.Header.Set("X-GitHub-Event", r.event)
	}
	if r.delivery != "-" {
		hr.Header.Set("X-GitHub-Delivery", r.delivery)
	}
	switch {
	case r.signature != "":
		hr.Header.Set("X-Hub-Signature-256", r.signature)
	case !r.unsigned:
		hr.Header.Set("X-Hub-Signature-256", hubsig.Sign(testSecret, r.body))
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, resp.Header, body
}

func (e *env) rows(t *testing.T) (inbox, jobs int) {
	t.Helper()
	ctx := context.Background()
	if err := e.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_inbox), (SELECT count(*) FROM control_plane_jobs)`).Scan(&inbox, &jobs); err != nil {
		t.Fatal(err)
	}
	return inbox, jobs
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, "payloads", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBadInputsWriteNothing(t *testing.T) {
	t.Parallel()
	push := fixture(t, "push.tag_created")
	form := []byte(url.Values{"payload": {string(push)}}.Encode())
	tests := []struct {
		name   string
		r      req
		status int
		result string
	}{
		{"GET", req{method: http.MethodGet, event: "push", body: push}, 405, webhook.ResultRejectedMethod},
		{"no signature", req{event: "push", body: push, unsigned: true}, 401, webhook.ResultRejectedSignature},
		{"sha1 signature only", req{event: "push", body: push, signature: "sha1=0123456789abcdef0123456789abcdef01234567"}, 401, webhook.ResultRejectedSignature},
		{"wrong secret", req{event: "push", body: push, signature: hubsig.Sign([]byte("other"), push)}, 401, webhook.ResultRejectedSignature},
		{"no event header", req{body: push}, 400, webhook.ResultRejectedHeaders},
		{"no delivery header", req{event: "push", delivery: "-", body: push}, 400, webhook.ResultRejectedHeaders},
		{"bad delivery header", req{event: "push", delivery: "../etc/passwd", body: push}, 400, webhook.ResultRejectedHeaders},
		{"malformed json", req{event: "push", body: []byte(`{"ref":`)}, 400, webhook.ResultRejectedPayload},
		{"json array", req{event: "push", body: []byte(`[]`)}, 400, webhook.ResultRejectedPayload},
		{"push without repository", req{event: "push", body: []byte(`{"installation":{"id":1},"ref":"refs/tags/v1"}`)}, 400, webhook.ResultRejectedPayload},
		{"text/plain", req{event: "push", body: push, contentType: "text/plain"}, 415, webhook.ResultRejectedContentType},
		{"form while json is configured", req{event: "push", body: form, contentType: "application/x-www-form-urlencoded"}, 415, webhook.ResultRejectedContentType},
		{"form with signature over decoded payload", req{event: "push", body: form, contentType: "application/x-www-form-urlencoded",
			signature: hubsig.Sign(testSecret, push)}, 401, webhook.ResultRejectedSignature},
		{"oversize", req{event: "push", body: bytes.Repeat([]byte("x"), webhook.MaxBody+1)}, 413, webhook.ResultRejectedTooLarge},
	}
	e := setup(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, _ := e.send(t, tt.r)
			if status != tt.status {
				t.Fatalf("status %d, want %d", status, tt.status)
			}
			if inbox, jobs := e.rows(t); inbox != 0 || jobs != 0 {
				t.Fatalf("%d inbox rows and %d jobs written", inbox, jobs)
			}
			if n := testutil.ToFloat64(counter(t, e.reg, tt.result)); n < 1 {
				t.Fatalf("result %s not counted", tt.result)
			}
		})
	}
}

// counter sums boardreadyops_ingest_deliveries_total over events for one result.
func counter(t *testing.T, reg *prometheus.Registry, result string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "boardreadyops_ingest_deliveries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "sum", Help: "sum"})
	c.Add(sum)
	return c
}

// With the filter off (KeepUnused), every fixture is stored as its normalized document.
func TestEveryFixtureIsStoredNormalized(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join(fixtures, "payloads", "*.json"))
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	e := setupWith(t, func(_ *env, o *webhook.Options) { o.KeepUnused = true })
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		event, _, _ := strings.Cut(name, ".")
		t.Run(name, func(t *testing.T) {
			body := fixture(t, name)
			delivery := "fixture-" + strings.NewReplacer(".", "-", "_", "-").Replace(name)
			status, _, resp := e.send(t, req{event: event, delivery: delivery, body: body})
			if status != http.StatusAccepted || resp["status"] != "accepted" {
				t.Fatalf("status %d %v", status, resp)
			}
			var payload []byte
			var digest []byte
			var kind, jobStatus, traceparent string
			err := e.pool.QueryRow(context.Background(), `SELECT i.payload, i.payload_sha256, j.kind, j.status, j.traceparent
				FROM webhook_inbox i JOIN control_plane_jobs j ON j.inbox_id = i.id WHERE i.delivery_id = $1`, delivery).
				Scan(&payload, &digest, &kind, &jobStatus, &traceparent)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := os.ReadFile(filepath.Join(fixtures, "normalized", name+".json"))
			if !jsonEqual(t, payload, want) {
				t.Fatalf("stored document\n%s\nwant\n%s", payload, want)
			}
			if sum := sha256.Sum256(body); !bytes.Equal(digest, sum[:]) {
				t.Fatal("stored digest is not the SHA-256 of the raw body")
			}
			if kind != event || jobStatus != "available" || traceparent == "" {
				t.Fatalf("job kind %s status %s traceparent %q", kind, jobStatus, traceparent)
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func TestFormEncodedAndIgnoredEvents(t *testing.T) {
	t.Parallel()
	e := setupWith(t, func(e *env, o *webhook.Options) { o.ContentType = webhook.ContentTypeForm })
	push := fixture(t, "push.tag_created")
	form := []byte(url.Values{"payload": {string(push)}}.Encode())
	if status, _, _ := e.send(t, req{event: "push", body: form, contentType: "application/x-www-form-urlencoded"}); status != 202 {
		t.Fatalf("form-encoded: %d", status)
	}
	issues := []byte(url.Values{"payload": {`{"action":"opened"}`}}.Encode())
	if status, _, resp := e.send(t, req{event: "issues", body: issues, contentType: "application/x-www-form-urlencoded"}); status != 202 || resp["status"] != "ignored" {
		t.Fatalf("unhandled event: %d %v", status, resp)
	}
	// An unhandled event is still verified first.
	if status, _, _ := e.send(t, req{event: "issues", body: issues, contentType: "application/x-www-form-urlencoded", unsigned: true}); status != 401 {
		t.Fatalf("unsigned unhandled event: %d", status)
	}
	if inbox, jobs := e.rows(t); inbox != 1 || jobs != 1 {
		t.Fatalf("%d inbox rows, %d jobs; want only the push", inbox, jobs)
	}
}

func TestDuplicateDeliveryCreatesOneJob(t *testing.T) {
	t.Parallel()
	e := setup(t)
	body := fixture(t, "push.tag_created")
	const delivery = "dup-0000-1111"
	var wg sync.WaitGroup
	statuses := make(chan int, 20)
	for i := 0; i < 20; i++ { // redeliveries racing each other
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, _, _ := e.send(t, req{event: "push", delivery: delivery, body: body})
			statuses <- status
		}()
	}
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	if counts[202] != 1 || counts[200] != 19 {
		t.Fatalf("statuses %v, want one 202 and nineteen 200", counts)
	}
	if inbox, jobs := e.rows(t); inbox != 1 || jobs != 1 {
		t.Fatalf("%d inbox rows, %d jobs", inbox, jobs)
	}
}

func TestSecretRotation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	body := fixture(t, "ping")
	oldSecret, newSecret := []byte("old-generated-secret"), []byte("new-generated-secret")
	steps := []struct {
		configured [][]byte
		signWith   []byte
		want       int
	}{
		{[][]byte{oldSecret}, oldSecret, 202},
		{[][]byte{oldSecret, newSecret}, oldSecret, 202}, // rotation under way: both work
		{[][]byte{oldSecret, newSecret}, newSecret, 202},
		{[][]byte{newSecret}, newSecret, 202},
		{[][]byte{newSecret}, oldSecret, 401}, // removed secret refused
	}
	for i, s := range steps {
		e.setSecrets(s.configured...)
		body := bytes.Replace(body, []byte(`"zen": "`), []byte(fmt.Sprintf(`"zen": "step %d: `, i)), 1) // each delivery its own body
		status, _, _ := e.send(t, req{event: "ping", body: body, signature: hubsig.Sign(s.signWith, body)})
		if status != s.want {
			t.Fatalf("step %d: status %d, want %d", i, status, s.want)
		}
	}
}

func TestResponseBodiesNeverEchoPayload(t *testing.T) {
	t.Parallel()
	e := setup(t)
	secretish := `{"installation":{"id":1},"token":"ghs_shouldneverbeechoed"`
	status, _, resp := e.send(t, req{event: "push", body: []byte(secretish)})
	raw, _ := json.Marshal(resp)
	if status != 400 || strings.Contains(string(raw), "ghs_") {
		t.Fatalf("status %d body %s", status, raw)
	}
}

// A delivery the database's row rules refuse (a check violation: here a constraint added to this
// test's database; in production the inbox's bounds on the document) can never be stored, however
// often it is redelivered. It is answered 422 and counted as rejected_unstorable, for its own
// alert, not 503 "database unavailable" that invites redeliveries and hides among outages.
func TestUnstorableDeliveryIsRefusedAsSuch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const refused = "72d3162e-cc78-11e3-81ab-0000000fffff"
	if _, err := e.pool.Exec(context.Background(),
		`ALTER TABLE webhook_inbox ADD CONSTRAINT test_refuses_one CHECK (delivery_id <> '`+refused+`')`); err != nil {
		t.Fatal(err)
	}
	status, _, resp := e.send(t, req{event: "ping", delivery: refused, body: fixture(t, "ping")})
	if status != http.StatusUnprocessableEntity || resp["status"] != webhook.ResultRejectedUnstorable {
		t.Fatalf("unstorable delivery: %d %v, want 422 %s", status, resp, webhook.ResultRejectedUnstorable)
	}
	if n := testutilCount(t, e, webhook.ResultRejectedUnstorable); n != 1 {
		t.Fatalf("%d counted as %s, want 1", n, webhook.ResultRejectedUnstorable)
	}
	if testutilCount(t, e, webhook.ResultUnavailable) != 0 || !strings.Contains(e.logs.String(), "can never be stored") {
		t.Fatalf("want it logged as unstorable, not counted unavailable:\n%s", e.logs.String())
	}
	if status, _, resp := e.send(t, req{event: "ping", body: paddedPing(t, "other", 2<<10)}); status != http.StatusAccepted {
		t.Fatalf("another delivery: %d %v", status, resp)
	}
}
