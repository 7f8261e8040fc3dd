package checkrun

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
)

// The external_id of a release run's check run: what BoardReadyOps writes on the check run when it
// creates it, searches for before creating one, and reads back from check_run webhooks.
//
// It is derived from the release run's natural key, not from its database id: a point-in-time
// restore forgets release runs that GitHub remembers, and the run that a redelivered push creates
// afterwards gets a new id. From the key, that run re-finds the check run its lost incarnation
// created on the commit and adopts it, instead of creating a second one and leaving the first in
// progress for good. The key is release_runs_identity_key (repository id, ref, head SHA); the
// check run already sits on the head SHA, so the external_id carries the other two:
//
//	v2:<repository id>:<first 32 hex digits of SHA-256 of the ref>
//
// at most 55 characters whatever the ref's length (a ref is never bounded by GitHub). The SQL
// function boardreadyops_release_run_external_id (migration 00031) computes the same string for
// lifecycle's lookup; a test holds the two equal.
//
// Check runs created before 00031 carry the release run id (a UUID, "v1"); they are still
// recognised, by the dispatcher's search (as the run's earlier form) and by lifecycle.
const (
	externalIDPrefix = "v2:"
	digestLen        = 32 // hex digits: 128 bits of SHA-256
	// MaxExternalIDLen bounds an external_id this package writes or accepts.
	MaxExternalIDLen = len(externalIDPrefix) + 19 + 1 + digestLen
)

// ErrExternalID is returned by ParseExternalID for a string that is no BoardReadyOps external_id.
var ErrExternalID = errors.New("not a BoardReadyOps check run external_id")

// Identity is a parsed external_id: either ReleaseRunID (the v1 form) or RepositoryID and
// RefDigest (v2). The zero Identity identifies nothing.
type Identity struct {
	// ReleaseRunID is the release run id of a check run created before migration 00031, in
	// canonical lowercase UUID form; empty for v2.
	ReleaseRunID string
	// RepositoryID is GitHub's repository id (v2), greater than zero.
	RepositoryID int64
	// RefDigest is the 32 lowercase hex digits of RefDigest(ref) (v2).
	RefDigest string
}

// ExternalID is the external_id of the check run of the release run for ref in repository
// repositoryID.
func ExternalID(repositoryID int64, ref string) string {
	return externalIDPrefix + strconv.FormatInt(repositoryID, 10) + ":" + RefDigest(ref)
}

// RefDigest is the first 32 hex digits of the SHA-256 of ref's bytes.
func RefDigest(ref string) string {
	sum := sha256.Sum256([]byte(ref))
	return hex.EncodeToString(sum[:digestLen/2])
}

// String is the external_id the identity was parsed from.
func (id Identity) String() string {
	if id.ReleaseRunID != "" {
		return id.ReleaseRunID
	}
	if id.RepositoryID <= 0 {
		return ""
	}
	return externalIDPrefix + strconv.FormatInt(id.RepositoryID, 10) + ":" + id.RefDigest
}

// Of reports whether the identity is that of the release run releaseRunID for ref in
// repositoryID, in either form.
func (id Identity) Of(releaseRunID string, repositoryID int64, ref string) bool {
	if id.ReleaseRunID != "" {
		return id.ReleaseRunID == releaseRunID
	}
	return id.RepositoryID == repositoryID && id.RefDigest == RefDigest(ref)
}

// ParseExternalID parses an external_id read from GitHub (a check_run webhook, a listed check
// run): untrusted input. It accepts exactly the strings ExternalID writes and canonical
// lowercase UUIDs (v1), so that every accepted string is its Identity's String, and returns
// ErrExternalID for anything else.
func ParseExternalID(s string) (Identity, error) {
	if len(s) > MaxExternalIDLen {
		return Identity{}, ErrExternalID
	}
	if rest, ok := strings.CutPrefix(s, externalIDPrefix); ok {
		repo, digest, ok := strings.Cut(rest, ":")
		if !ok || len(digest) != digestLen || !lowerHex(digest) || repo == "" || repo[0] == '0' || !digits(repo) {
			return Identity{}, ErrExternalID
		}
		n, err := strconv.ParseInt(repo, 10, 64)
		if err != nil {
			return Identity{}, ErrExternalID
		}
		return Identity{RepositoryID: n, RefDigest: digest}, nil
	}
	if isUUID(s) {
		return Identity{ReleaseRunID: s}, nil
	}
	return Identity{}, ErrExternalID
}

// isUUID: 8-4-4-4-12 lowercase hex digits, as PostgreSQL prints a uuid.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !lowerHex(s[i : i+1]) {
				return false
			}
		}
	}
	return true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
