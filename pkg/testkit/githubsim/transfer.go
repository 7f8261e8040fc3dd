package githubsim

import (
	"fmt"
	"net/http"
	"strings"
)

// TransferRepository moves the repository fullName to installationID under newFullName, as a
// transfer to another account's installation does (a rename keeps the installation). Its check
// runs, workflow runs, tags and collaborators move with it, and its webhooks come from the new
// installation under the new name. Requests for the old name are redirected as GitHub redirects
// a renamed or transferred repository's: 301 for GET and HEAD, 307 for every other method (which
// a client repeats verbatim), once the token is accepted. GitHub's Location names the repository
// by id (/repositories/{id}/…); the simulator's names it by its new name, the path it serves.
func (s *Simulator) TransferRepository(fullName string, installationID int64, newFullName string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	oldKey, newKey := strings.ToLower(fullName), strings.ToLower(newFullName)
	repo := s.repos[oldKey]
	if repo == nil {
		return fmt.Errorf("repository %s does not exist", fullName)
	}
	if other := s.repos[newKey]; other != nil && other != repo {
		return fmt.Errorf("repository %s exists", newFullName)
	}
	delete(s.repos, oldKey)
	old := repo.fullName
	repo.fullName, repo.installationID = newFullName, installationID
	s.repos[newKey] = repo
	s.moved[oldKey] = newFullName
	delete(s.moved, newKey)
	for _, c := range s.checkRuns {
		if c.repo == old {
			c.repo = newFullName
		}
	}
	for key, crs := range s.checkRunsAt {
		if rest, ok := strings.CutPrefix(key, old+"@"); ok {
			delete(s.checkRunsAt, key)
			s.checkRunsAt[newFullName+"@"+rest] = crs
		}
	}
	for key, sha := range s.tags {
		if tag, ok := strings.CutPrefix(key, tagKey(old, "")); ok {
			delete(s.tags, key)
			s.tags[tagKey(newFullName, tag)] = sha
		}
	}
	if roles, ok := s.collaborators[oldKey]; ok {
		delete(s.collaborators, oldKey)
		s.collaborators[newKey] = roles
	}
	return nil
}

// redirectMoved answers a request for a repository's former name with GitHub's redirect to its
// current one; it reports false when fullName is not a former name.
func (s *Simulator) redirectMoved(w http.ResponseWriter, r *http.Request, fullName string) bool {
	s.mu.Lock()
	to, ok := s.moved[strings.ToLower(fullName)]
	s.mu.Unlock()
	if !ok {
		return false
	}
	prefix := "/repos/" + fullName
	rest, found := strings.CutPrefix(r.URL.Path, prefix)
	if !found {
		return false
	}
	loc := *r.URL
	loc.Path, loc.RawPath = "/repos/"+to+rest, ""
	status := http.StatusTemporaryRedirect
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		status = http.StatusMovedPermanently
	}
	w.Header().Set("Location", loc.RequestURI())
	writeError(w, status, http.StatusText(status))
	return true
}
