package e2e_test

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/boardreadyops/cloud/hack/test/proctest"
	"github.com/boardreadyops/cloud/pkg/hubsig"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// span is what the receiver keeps of an exported span.
type span struct {
	service, name, traceID string
	attrs                  map[string]string
}

// otlpReceiver accepts OTLP/HTTP protobuf trace exports.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []span
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, _ := io.ReadAll(body)
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				attrs := map[string]string{}
				for _, kv := range sp.GetAttributes() {
					if v := kv.GetValue(); v.GetStringValue() != "" {
						attrs[kv.GetKey()] = v.GetStringValue()
					} else {
						attrs[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
					}
				}
				o.spans = append(o.spans, span{service: service, name: sp.GetName(), traceID: hex.EncodeToString(sp.GetTraceId()), attrs: attrs})
			}
		}
	}
	o.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(nil)
}

func (o *otlpReceiver) snapshot() []span {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]span(nil), o.spans...)
}

// One delivery, one trace: the push's spans in ingest, lifecycle and the dispatcher (and its
// GitHub calls) share the trace id the webhook request started, across three processes.
func TestOneTracePerDeliveryAcrossServices(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	build(t, dir)
	dbURL := pgtest.NewURL(t)
	key, pub, err := githubsim.NewAppKey()
	if err != nil {
		t.Fatal(err)
	}
	var sb [24]byte
	_, _ = rand.Read(sb[:])
	secret := []byte(hex.EncodeToString(sb[:]))
	keyFile, secretFile := filepath.Join(dir, "app-key.pem"), filepath.Join(dir, "webhook-secret")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	sim := githubsim.New(githubsim.Options{AppID: appID, AppPublicKey: pub, AutoRepositories: true, TagCommit: githubsim.TagsAt(pushedSHA)})
	defer sim.Close()
	gh := httptest.NewServer(sim)
	defer gh.Close()
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	defer collector.Close()

	ingestAddr := proctest.FreeAddr(t)
	common := []string{"DATABASE_URL=" + dbURL, "LOG_LEVEL=warn", fmt.Sprintf("BOARDREADYOPS_GITHUB_APP_ID=%d", appID),
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL, "OTEL_BSP_SCHEDULE_DELAY=100"}
	startProduct(t, dir, common, ingestAddr, secretFile, gh.URL, keyFile)

	body, _ := json.Marshal(map[string]any{
		"ref": "refs/tags/v9.0.0", "before": strings.Repeat("0", 40), "after": pushedSHA,
		"created": true, "deleted": false, "installation": map[string]any{"id": 5000},
		"repository": map[string]any{"id": 9100, "name": "traced", "full_name": "org/traced", "owner": map[string]any{"login": "org", "type": "Organization"}},
	})
	req, _ := http.NewRequest(http.MethodPost, "http://"+ingestAddr+"/webhook", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", "trace-delivery-1")
	req.Header.Set("X-Hub-Signature-256", hubsig.Sign(secret, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("push: %v %v", resp, err)
	}
	resp.Body.Close()

	want := map[string]string{ // span name → service
		"webhook.receive": "boardreadyops-ingest", "ingest.accept": "boardreadyops-ingest",
		"lifecycle.job": "boardreadyops-lifecycle", "outbox.deliver": "boardreadyops-outbox-dispatcher",
		"github.create_check_run": "boardreadyops-outbox-dispatcher", "github.dispatch_workflow": "boardreadyops-outbox-dispatcher",
		// database calls inside the trace, in each service
		"db boardreadyops_webhook_accept": "boardreadyops-ingest", "db boardreadyops_release_run_create_from_push": "boardreadyops-lifecycle",
		"db boardreadyops_outbox_start_delivery": "boardreadyops-outbox-dispatcher",
		// group-committed calls, spanned in the delivery's trace by the dispatcher
		"db boardreadyops_outbox_complete_check_run_create":           "boardreadyops-outbox-dispatcher",
		"db boardreadyops_outbox_complete_workflow_dispatch_with_run": "boardreadyops-outbox-dispatcher",
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		spans := recv.snapshot()
		var traceID string
		for _, s := range spans {
			if s.name == "webhook.receive" && s.attrs["github.delivery_id"] == "trace-delivery-1" {
				traceID = s.traceID
			}
		}
		found := map[string]int{}
		for _, s := range spans {
			if traceID != "" && s.traceID == traceID && want[s.name] == s.service {
				found[s.name]++
			}
		}
		if len(found) == len(want) && found["outbox.deliver"] >= 2 {
			return // create and dispatch both delivered inside the webhook's trace
		}
		if time.Now().After(deadline) {
			var names []string
			for _, s := range spans {
				names = append(names, s.service+"/"+s.name+"@"+s.traceID[:8])
			}
			t.Fatalf("trace %q incomplete: found %v of %v\nall spans: %v", traceID, found, want, names)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
