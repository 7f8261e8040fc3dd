package webhook_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/boardreadyops/cloud/pkg/hubsig"
	"github.com/boardreadyops/cloud/services/ingest/internal/webhook"
)

// FuzzParse drives signature verification and normalization with arbitrary bodies and headers.
// Invariants: it never panics; it never accepts a body whose signature does not verify; an
// accepted document is valid JSON, bounded, and storable (no NUL, valid UTF-8).
// The corpus in testdata/fuzz/FuzzParse runs as plain tests under `go test`.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"zen":"x","hook":{"app_id":1}}`), "", "ping", "application/json", true)
	f.Add([]byte(`{}`), "sha256=00", "push", "application/json", false)
	f.Fuzz(func(t *testing.T, body []byte, signature, event, contentType string, sign bool) {
		if sign {
			signature = hubsig.Sign(testSecret, body)
		}
		h := http.Header{}
		h.Set("X-Hub-Signature-256", signature)
		h.Set("X-GitHub-Event", event)
		h.Set("X-GitHub-Delivery", "fuzz-delivery")
		h.Set("Content-Type", contentType)
		d, rej := webhook.Parse(h, body, [][]byte{testSecret})
		if rej != nil {
			if rej.Status < 400 || rej.Status > 499 || rej.Reason == "" {
				t.Fatalf("rejection %+v", rej)
			}
			return
		}
		if hubsig.Verify([][]byte{testSecret}, signature, body) != nil {
			t.Fatalf("accepted a body whose signature does not verify (signature %q)", signature)
		}
		if d.Ignored {
			return
		}
		if !json.Valid(d.Document) || len(d.Document) > 1<<20 {
			t.Fatalf("document invalid or over 1 MiB (%d bytes)", len(d.Document))
		}
		if strings.Contains(string(d.Document), `\u0000`) || !utf8.Valid(d.Document) {
			t.Fatal("document not storable as jsonb")
		}
	})
}
