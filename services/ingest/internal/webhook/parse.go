// Package webhook is ingest's HTTP edge: it verifies a GitHub delivery, normalizes it and hands it
// to the store, answering 202 once inbox row and job are committed. It never calls GitHub.
package webhook

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"regexp"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
	"github.com/boardreadyops/cloud/pkg/hubsig"
)

// Delivery is a verified, normalized delivery ready to store.
type Delivery struct {
	ID             string
	Event          string
	Action         string
	InstallationID int64
	RepositoryID   int64
	// Document is the normalized document as stored (JSON).
	Document []byte
	// PayloadSHA256 is the digest of the raw request body.
	PayloadSHA256 [32]byte
	// Ignored is set for a verified delivery of an event the control plane does not handle:
	// acknowledged, not stored.
	Ignored bool
	// Filtered is the eventdoc.Filter reason of a handled delivery that can never matter (a
	// branch push, a workflow run the product did not dispatch, …); empty when it matters. The
	// handler drops it unless the filter is off.
	Filtered string
}

// Rejection is why a request was refused: the HTTP status, a closed-set reason for metrics and a
// message for the client (never echoing secrets or the body).
type Rejection struct {
	Status  int
	Reason  string
	Message string
}

func (r *Rejection) Error() string { return r.Message }

// Results (metric label values), a closed set.
const (
	ResultAccepted            = "accepted"
	ResultDuplicate           = "duplicate"
	ResultReplayed            = "replayed"
	ResultIgnored             = "ignored"
	ResultFiltered            = "filtered"
	ResultRejectedSignature   = "rejected_signature"
	ResultRejectedHeaders     = "rejected_headers"
	ResultRejectedContentType = "rejected_content_type"
	ResultRejectedPayload     = "rejected_payload"
	ResultRejectedTooLarge    = "rejected_too_large"
	ResultRejectedMethod      = "rejected_method"
	ResultRejectedSlow        = "rejected_slow"
	ResultOverloaded          = "overloaded"
	ResultUnavailable         = "unavailable"
	ResultRejectedUnstorable  = "rejected_unstorable"
)

// Results lists every result, the closed set of the result label.
var Results = []string{ResultAccepted, ResultDuplicate, ResultReplayed, ResultIgnored, ResultFiltered, ResultRejectedSignature,
	ResultRejectedHeaders, ResultRejectedContentType, ResultRejectedPayload, ResultRejectedTooLarge,
	ResultRejectedMethod, ResultRejectedSlow, ResultOverloaded, ResultUnavailable, ResultRejectedUnstorable}

var (
	deliveryIDPattern = regexp.MustCompile(`^[A-Za-z0-9-]{1,100}$`)
	eventPattern      = regexp.MustCompile(`^[a-z_]{1,64}$`)
)

// ContentType is the one payload encoding ingest accepts: the "Content type" of the GitHub App's
// webhook settings (BOARDREADYOPS_WEBHOOK_CONTENT_TYPE). The signature covers the body, not the
// Content-Type header, so accepting both would let a signed JSON body be re-read as a form.
type ContentType string

// The two encodings GitHub offers.
const (
	ContentTypeJSON ContentType = "application/json"
	ContentTypeForm ContentType = "application/x-www-form-urlencoded"
)

// ParseContentType reads the configured encoding: "json" or "form", or the media type itself.
func ParseContentType(s string) (ContentType, error) {
	switch s {
	case "json", string(ContentTypeJSON):
		return ContentTypeJSON, nil
	case "form", string(ContentTypeForm):
		return ContentTypeForm, nil
	}
	return "", fmt.Errorf("webhook content type %q: want json or form (as set in the GitHub App)", s)
}

// Parse verifies and normalizes one request body, which must be encoded as want (the zero value
// means JSON). It is pure (no I/O), so it is fuzzed directly. Order matters: nothing about the
// payload is examined before the signature is verified.
func Parse(h http.Header, body []byte, secrets [][]byte, want ContentType) (Delivery, *Rejection) {
	if err := hubsig.Verify(secrets, h.Get("X-Hub-Signature-256"), body); err != nil {
		msg := "invalid signature"
		if errors.Is(err, hubsig.ErrUnsigned) {
			msg = "missing or malformed X-Hub-Signature-256 (sha256) signature"
		}
		return Delivery{}, &Rejection{http.StatusUnauthorized, ResultRejectedSignature, msg}
	}
	d := Delivery{ID: h.Get("X-GitHub-Delivery"), Event: h.Get("X-GitHub-Event"), PayloadSHA256: sha256.Sum256(body)}
	if !deliveryIDPattern.MatchString(d.ID) {
		return Delivery{}, &Rejection{http.StatusBadRequest, ResultRejectedHeaders, "missing or invalid X-GitHub-Delivery header"}
	}
	if !eventPattern.MatchString(d.Event) {
		return Delivery{}, &Rejection{http.StatusBadRequest, ResultRejectedHeaders, "missing or invalid X-GitHub-Event header"}
	}
	payload, rej := payloadOf(h.Get("Content-Type"), body, want)
	if rej != nil {
		return Delivery{}, rej
	}
	if !eventdoc.Handled(d.Event) {
		d.Ignored = true
		return d, nil
	}
	doc, err := eventdoc.Normalize(d.Event, payload)
	if err != nil {
		return Delivery{}, &Rejection{http.StatusBadRequest, ResultRejectedPayload, err.Error()}
	}
	d.Action = doc.Action
	d.Filtered, _ = eventdoc.Filter(&doc)
	d.InstallationID = doc.InstallationID
	if doc.Repository != nil {
		d.RepositoryID = doc.Repository.ID
	}
	if d.Document, err = json.Marshal(doc); err != nil {
		return Delivery{}, &Rejection{http.StatusBadRequest, ResultRejectedPayload, "payload cannot be normalized"}
	}
	return d, nil
}

// payloadOf extracts the JSON payload from a body of the configured encoding. A form body must be
// exactly one payload field, as GitHub sends it: anything beside it would be bytes the signature
// covers but the document does not come from.
func payloadOf(contentType string, body []byte, want ContentType) ([]byte, *Rejection) {
	if want == "" {
		want = ContentTypeJSON
	}
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil || ContentType(mediaType) != want {
		return nil, &Rejection{http.StatusUnsupportedMediaType, ResultRejectedContentType,
			"Content-Type must be " + string(want) + " (the content type configured for this GitHub App)"}
	}
	if want == ContentTypeJSON {
		return body, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, &Rejection{http.StatusBadRequest, ResultRejectedPayload, "malformed form body"}
	}
	payload := form["payload"]
	if len(form) != 1 || len(payload) != 1 || payload[0] == "" {
		return nil, &Rejection{http.StatusBadRequest, ResultRejectedPayload, "form body must be exactly one payload field"}
	}
	return []byte(payload[0]), nil
}
