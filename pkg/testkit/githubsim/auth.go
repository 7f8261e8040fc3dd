package githubsim

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// githubMessage is an error whose text is GitHub's own wording, written as the response body.
type githubMessage string

func (m githubMessage) Error() string { return string(m) }

// GitHub's messages for refused App JWTs.
const (
	errJWTDecode githubMessage = "A JSON web token could not be decoded"
	errJWTIssuer githubMessage = "'Issuer' claim ('iss') must be an Integer"
	errJWTExpiry githubMessage = "'Expiration time' claim ('exp') is too far in the future"
	// The client's clock ahead of GitHub's, or behind it by more than the JWT's life.
	errJWTIssuedAt githubMessage = "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"
	errJWTExpired  githubMessage = "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
)

// verifyJWT checks an App JWT as GitHub does: RS256, signed by the App's key, issued by the App,
// issued in the past, not expired, expiring at most 10 minutes from now.
func (s *Simulator) verifyJWT(r *http.Request) error {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return errJWTDecode
	}
	claims := &jwt.RegisteredClaims{}
	_, err := jwt.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return s.opts.AppPublicKey, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithLeeway(time.Minute),
		jwt.WithTimeFunc(s.now))
	switch {
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return errJWTIssuedAt
	case errors.Is(err, jwt.ErrTokenExpired):
		return errJWTExpired
	case err != nil:
		return errJWTDecode
	}
	if claims.Issuer != strconv.FormatInt(s.opts.AppID, 10) {
		return errJWTIssuer
	}
	// GitHub refuses an exp more than 10 minutes past its clock (a minute's leeway here).
	if claims.ExpiresAt.After(s.now().Add(11 * time.Minute)) {
		return errJWTExpiry
	}
	return nil
}

// createToken: POST /app/installations/{id}/access_tokens.
func (s *Simulator) createToken(w http.ResponseWriter, r *http.Request, info *reqInfo) {
	id, ok := pathInt(r, "id")
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	info.installationID = id
	handled, w := s.applyFault(w, r, info)
	if handled {
		return
	}
	if err := s.verifyJWT(r); err != nil {
		writeError(w, http.StatusUnauthorized, err.Error())
		return
	}
	s.mu.Lock()
	_, known := s.installations[id]
	if !known && s.opts.AutoRepositories {
		s.installations[id] = &installation{id: id, account: "auto"}
		known = true
	}
	var b [20]byte
	_, _ = rand.Read(b[:])
	tok := "ghs_sim" + hex.EncodeToString(b[:]) // simulator tokens; never real credentials
	expires := s.now().Add(s.opts.TokenTTL).UTC().Truncate(time.Second)
	if known {
		s.tokens[tok] = token{installationID: id, expires: expires}
	}
	s.mu.Unlock()
	if !known {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"token": tok, "expires_at": expires.Format(time.RFC3339), "repository_selection": "all",
		"permissions": map[string]string{"checks": "write", "actions": "write", "metadata": "read", "contents": "read"},
	})
}

// repoAuth requires a valid installation token for the installation that owns the repository.
func (s *Simulator) repoAuth(next func(w http.ResponseWriter, r *http.Request, info *reqInfo, repo *repository)) func(http.ResponseWriter, *http.Request, *reqInfo) {
	return func(w http.ResponseWriter, r *http.Request, info *reqInfo) {
		raw := r.Header.Get("Authorization")
		tok, ok := strings.CutPrefix(raw, "token ")
		if !ok {
			tok, ok = strings.CutPrefix(raw, "Bearer ")
		}
		s.mu.Lock()
		t, known := s.tokens[tok]
		s.mu.Unlock()
		if !ok || !known || s.now().After(t.expires) {
			writeError(w, http.StatusUnauthorized, "Bad credentials")
			return
		}
		info.installationID = t.installationID
		limited, done := s.limit(w, r, t.installationID)
		defer done()
		if limited {
			return
		}
		handled, w := s.applyFault(w, r, info)
		if handled {
			return
		}
		fullName := r.PathValue("owner") + "/" + r.PathValue("repo")
		s.mu.Lock()
		repo := s.repos[strings.ToLower(fullName)]
		if _, moved := s.moved[strings.ToLower(fullName)]; repo == nil && !moved && s.opts.AutoRepositories {
			repo = &repository{id: RepositoryID(fullName), fullName: fullName, installationID: t.installationID,
				workflows: map[string]Workflow{s.opts.ReleaseWorkflow: ReleaseWorkflow()}}
			s.repos[strings.ToLower(fullName)] = repo
		}
		s.mu.Unlock()
		if repo == nil && s.redirectMoved(w, r, fullName) {
			return
		}
		if repo == nil || repo.installationID != t.installationID {
			writeError(w, http.StatusNotFound, "Not Found")
			return
		}
		next(w, r, info, repo)
	}
}

// appAuth requires the App JWT (app-level endpoints such as hook deliveries).
func (s *Simulator) appAuth(next func(w http.ResponseWriter, r *http.Request, info *reqInfo)) func(http.ResponseWriter, *http.Request, *reqInfo) {
	return func(w http.ResponseWriter, r *http.Request, info *reqInfo) {
		handled, w := s.applyFault(w, r, info)
		if handled {
			return
		}
		if err := s.verifyJWT(r); err != nil {
			writeError(w, http.StatusUnauthorized, err.Error())
			return
		}
		next(w, r, info)
	}
}
