package webhook_test

import (
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
	"github.com/boardreadyops/cloud/pkg/hubsig"
	"github.com/boardreadyops/cloud/services/ingest/internal/webhook"
)

// FuzzParse drives signature verification, the content-type rule, the header checks and
// normalization with arbitrary combinations of body, signature, event, delivery id, content type
// and configured encoding, the body signed or not. Invariants: it never panics; it never accepts
// a body whose signature does not verify, nor one in another encoding than the configured one
// (a form only as exactly one payload field), nor a delivery id outside GitHub's set; an accepted
// document is valid JSON, bounded, storable (no NUL, valid UTF-8) and of the named event's shape,
// with full names in GitHub's owner/name set, and filtered for a listed reason of that document. The corpus in testdata/fuzz/FuzzParse (every handled
// event and action, and the attacks of docs/security.md) runs as plain tests under `go test`.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"zen":"x","hook_id":1,"hook":{"app_id":1}}`), "", "ping", "application/json", true, "d-1", false)
	f.Add([]byte(`{}`), "sha256=00", "push", "application/json", false, "d-2", false)
	f.Add([]byte(`payload=%7B%22zen%22%3A%22x%22%2C%22hook_id%22%3A1%7D`), "", "ping", "application/x-www-form-urlencoded", true, "d-3", true)
	f.Fuzz(func(t *testing.T, body []byte, signature, event, contentType string, sign bool, delivery string, form bool) {
		if sign {
			signature = hubsig.Sign(testSecret, body)
		}
		configured := webhook.ContentTypeJSON
		if form {
			configured = webhook.ContentTypeForm
		}
		h := http.Header{}
		h.Set("X-Hub-Signature-256", signature)
		h.Set("X-GitHub-Event", event)
		h.Set("X-GitHub-Delivery", delivery)
		h.Set("Content-Type", contentType)
		d, rej := webhook.Parse(h, body, [][]byte{testSecret}, configured)
		if rej != nil {
			if rej.Status < 400 || rej.Status > 499 || rej.Reason == "" || rej.Message == "" {
				t.Fatalf("rejection %+v", rej)
			}
			return
		}
		if hubsig.Verify([][]byte{testSecret}, signature, body) != nil {
			t.Fatalf("accepted a body whose signature does not verify (signature %q)", signature)
		}
		if mt, _, err := mime.ParseMediaType(contentType); err != nil || mt != string(configured) {
			t.Fatalf("accepted Content-Type %q while %s is configured", contentType, configured)
		}
		if d.ID != h.Get("X-GitHub-Delivery") || d.ID == "" || len(d.ID) > 100 || strings.ContainsAny(d.ID, "/.%?# ") {
			t.Fatalf("accepted delivery id %q", d.ID)
		}
		payload := body
		if form {
			v, err := url.ParseQuery(string(body))
			if err != nil || len(v) != 1 || len(v["payload"]) != 1 {
				t.Fatalf("accepted a form body that is not exactly one payload field: %q", body)
			}
			payload = []byte(v["payload"][0])
		}
		if d.Ignored {
			if eventdoc.Handled(event) {
				t.Fatalf("handled event %q ignored", event)
			}
			return
		}
		if !json.Valid(d.Document) || len(d.Document) > 1<<20 {
			t.Fatalf("document invalid or over 1 MiB (%d bytes)", len(d.Document))
		}
		if strings.Contains(string(d.Document), `\u0000`) || !utf8.Valid(d.Document) {
			t.Fatal("document not storable as jsonb")
		}
		var doc eventdoc.Document
		if err := json.Unmarshal(d.Document, &doc); err != nil || doc.Event != event {
			t.Fatalf("document of event %q for %q: %v", doc.Event, event, err)
		}
		if _, err := eventdoc.Normalize(event, payload); err != nil {
			t.Fatalf("accepted a payload that does not normalize: %v", err)
		}
		shaped := map[string]bool{
			eventdoc.EventInstallation:             doc.Installation != nil && doc.Installation.AccountLogin != "",
			eventdoc.EventInstallationRepositories: doc.Installation != nil && doc.Installation.AccountLogin != "",
			eventdoc.EventRepository:               doc.Repository != nil && doc.Action != "",
			eventdoc.EventPush:                     doc.Push != nil && doc.Repository != nil && doc.Action == "",
			eventdoc.EventCheckRun:                 doc.CheckRun != nil && doc.Repository != nil && doc.Action != "",
			eventdoc.EventCheckSuite:               doc.CheckSuite != nil && doc.Repository != nil && doc.Action != "",
			eventdoc.EventWorkflowRun:              doc.WorkflowRun != nil && doc.Repository != nil && doc.Action != "",
			eventdoc.EventPing:                     doc.Ping != nil && doc.Ping.HookID > 0,
		}
		// The filter decides on the stored document alone, with a reason from its closed set.
		if reason, filtered := eventdoc.Filter(&doc); reason != d.Filtered || (filtered && !knownFilterRule(event, reason)) {
			t.Fatalf("filter reason %q of the delivery, %q of its document (%v)", d.Filtered, reason, filtered)
		}
		if !shaped[event] {
			t.Fatalf("accepted a %s document without its event's fields: %s", event, d.Document)
		}
		names := []string{}
		if doc.Repository != nil {
			names = append(names, doc.Repository.FullName)
		}
		for _, list := range [][]eventdoc.RepositoryRef{doc.Repositories, doc.RepositoriesAdded, doc.RepositoriesRemoved} {
			for _, r := range list {
				names = append(names, r.FullName)
			}
		}
		for _, n := range names {
			if !eventdoc.ValidFullName(n) {
				t.Fatalf("accepted full name %q", n)
			}
		}
	})
}

func knownFilterRule(event, reason string) bool {
	for _, r := range eventdoc.FilterRules {
		if r.Event == event && r.Reason == reason {
			return true
		}
	}
	return false
}
