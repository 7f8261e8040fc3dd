// Package webhook is ingest's HTTP edge: it verifies a GitHub delivery, normalizes it and hands it
// to the store, answering 202 once inbox row and job are committed. It never calls GitHub.
package webhook

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
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
	ResultIgnored             = "ignored"
	ResultRejectedSignature   = "rejected_signature"
	ResultRejectedHeaders     = "rejected_headers"
	ResultRejectedContentType = "rejected_content_type"
	ResultRejectedPayload     = "rejected_payload"
	ResultRejectedTooLarge    = "rejected_too_large"
	ResultRejectedMethod      = "rejected_method"
	ResultOverloaded          = "overloaded"
	ResultUnavailable         = "unavailable"
)

var (
	deliveryIDPattern = regexp.MustCompile(`^[A-Za-z0-9-]{1,100}$`)
	eventPattern      = regexp.MustCompile(`^[a-z_]{1,64}$`)
)

// Parse verifies and normalizes one request body. It is pure (no I/O), so it is fuzzed directly.
// Order matters: nothing about the payload is examined before the signature is verified.
func Parse(h http.Header, body []byte, secrets [][]byte) (Delivery, *Rejection) {
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
	if !eventdoc.Handled(d.Event) {
		d.Ignored = true
		return d, nil
	}
	payload, rej := payloadOf(h.Get("Content-Type"), body)
	if rej != nil {
		return Delivery{}, rej
	}
	doc, err := eventdoc.Normalize(d.Event, payload)
	if err != nil {
		return Delivery{}, &Rejection{http.StatusBadRequest, ResultRejectedPayload, err.Error()}
	}
	d.Action = doc.Action
	d.InstallationID = doc.InstallationID
	if doc.Repository != nil {
		d.RepositoryID = doc.Repository.ID
	}
	if d.Document, err = json.Marshal(doc); err != nil {
		return Delivery{}, &Rejection{http.StatusBadRequest, ResultRejectedPayload, "payload cannot be normalized"}
	}
	return d, nil
}

// payloadOf extracts the JSON payload for both content types GitHub offers.
func payloadOf(contentType string, body []byte) ([]byte, *Rejection) {
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, &Rejection{http.StatusUnsupportedMediaType, ResultRejectedContentType,
			"Content-Type must be application/json or application/x-www-form-urlencoded"}
	}
	switch mediaType {
	case "application/json":
		return body, nil
	case "application/x-www-form-urlencoded":
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, &Rejection{http.StatusBadRequest, ResultRejectedPayload, "malformed form body"}
		}
		payload := form.Get("payload")
		if payload == "" {
			return nil, &Rejection{http.StatusBadRequest, ResultRejectedPayload, "form body without a payload field"}
		}
		return []byte(payload), nil
	default:
		return nil, &Rejection{http.StatusUnsupportedMediaType, ResultRejectedContentType,
			"Content-Type must be application/json or application/x-www-form-urlencoded"}
	}
}
