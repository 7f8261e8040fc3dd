// Package hubsig signs and verifies GitHub webhook deliveries (X-Hub-Signature-256: HMAC-SHA256
// of the raw body, hex encoded, prefixed "sha256=").
package hubsig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
)

// ErrUnsigned means the request carries no usable X-Hub-Signature-256 header (absent, or only the
// SHA-1 X-Hub-Signature GitHub also sends, or malformed).
var ErrUnsigned = errors.New("missing or malformed X-Hub-Signature-256")

// ErrBadSignature means the signature matches none of the configured secrets.
var ErrBadSignature = errors.New("signature does not match any configured secret")

const signaturePrefix = "sha256="

// Verify checks header (the X-Hub-Signature-256 value, "sha256=<64 hex digits>") against the
// HMAC-SHA256 of body under each secret. Every secret is tried, whatever matched before, and each
// comparison is constant-time, so timing tells nothing about which secret (if any) matched or
// how much of the signature was right.
func Verify(secrets [][]byte, header string, body []byte) error {
	if !strings.HasPrefix(header, signaturePrefix) {
		return ErrUnsigned
	}
	got, err := hex.DecodeString(header[len(signaturePrefix):])
	if err != nil || len(got) != sha256.Size {
		return ErrUnsigned
	}
	ok := 0
	for _, secret := range secrets {
		mac := hmac.New(sha256.New, secret)
		mac.Write(body)
		if hmac.Equal(mac.Sum(nil), got) {
			ok = 1
		}
	}
	if ok == 0 {
		return ErrBadSignature
	}
	return nil
}

// Sign returns the X-Hub-Signature-256 value for body under secret, as GitHub computes it. The
// simulator and the tests use it to send signed deliveries.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return signaturePrefix + hex.EncodeToString(mac.Sum(nil))
}
