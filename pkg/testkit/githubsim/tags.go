package githubsim

import (
	"crypto/sha1"
	"encoding/hex"
	"net/http"
	"strings"
)

// A repository's tags, as far as the API calls BoardReadyOps makes are concerned: the commit a
// tag points at (GET /repos/{owner}/{repo}/commits/tags/{tag} and the head_sha of a run
// dispatched on it). A tag is resolved in this order: SetTag and DeleteTag; Options.TagCommit;
// AutoTagCommit when Options.AutoTags is set. Otherwise the repository has no such tag.

// tagKey keys s.tags: the lower-cased repository full name and the tag.
func tagKey(fullName, tag string) string { return strings.ToLower(fullName) + "\x00" + tag }

// SetTag points tag of the repository at sha, as a push (or a forced push that moves it) would.
func (s *Simulator) SetTag(fullName, tag, sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tags[tagKey(fullName, tag)] = strings.ToLower(sha)
}

// DeleteTag deletes tag of the repository (git push --delete).
func (s *Simulator) DeleteTag(fullName, tag string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tags[tagKey(fullName, tag)] = ""
}

// AutoTagCommit is the commit a tag points at under Options.AutoTags until SetTag or DeleteTag
// says otherwise: derived from the repository's full name (case-insensitively) and the tag, so
// that a harness pushing the tag names the commit the simulator will answer, as RepositoryID does
// for AutoRepositories.
func AutoTagCommit(fullName, tag string) string {
	sum := sha1.Sum([]byte(strings.ToLower(fullName) + "\x00" + tag))
	return hex.EncodeToString(sum[:])
}

// TagsAt is an Options.TagCommit under which every tag of every repository points at sha: for
// harnesses that push all their tags at one commit.
func TagsAt(sha string) func(repo, tag string) string {
	return func(string, string) string { return sha }
}

// tagCommit resolves a tag of the repository; ok is false when it has none of that name.
func (s *Simulator) tagCommit(fullName, tag string) (sha string, ok bool) {
	s.mu.Lock()
	sha, set := s.tags[tagKey(fullName, tag)]
	s.mu.Unlock()
	switch {
	case set:
		return sha, sha != ""
	case s.opts.TagCommit != nil:
		if sha := s.opts.TagCommit(fullName, tag); sha != "" {
			return strings.ToLower(sha), true
		}
	}
	if s.opts.AutoTags {
		return AutoTagCommit(fullName, tag), true
	}
	return "", false
}

// getCommit: GET /repos/{owner}/{repo}/commits/{ref}, for a tag ("tags/NAME") and the sha media
// type only, which is all BoardReadyOps asks: the commit's SHA as the body, and the SHA quoted as
// the ETag. An If-None-Match naming that ETag is answered 304 Not Modified, which GitHub does not
// count against the primary rate limit. A ref that is not a known tag is answered as GitHub
// answers a name it cannot resolve: 422 "No commit found for SHA: …".
func (s *Simulator) getCommit(w http.ResponseWriter, r *http.Request, info *reqInfo, repo *repository) {
	ref := r.PathValue("ref")
	if !strings.Contains(r.Header.Get("Accept"), "application/vnd.github.sha") {
		writeError(w, http.StatusUnsupportedMediaType, "the simulator answers this request only with the sha media type")
		return
	}
	tag, isTag := strings.CutPrefix(ref, "tags/")
	sha, ok := "", false
	if isTag && tag != "" {
		sha, ok = s.tagCommit(repo.fullName, tag)
	}
	if !ok {
		writeError(w, http.StatusUnprocessableEntity, "No commit found for SHA: "+ref)
		return
	}
	etag := `"` + sha + `"`
	w.Header().Set("ETag", etag)
	for _, m := range strings.Split(r.Header.Get("If-None-Match"), ",") {
		if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(m), "W/")) == etag {
			s.refund(w, info.installationID)
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	w.Header().Set("Content-Type", "application/vnd.github.sha; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(sha))
}
