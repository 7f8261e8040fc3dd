package githubsim

import (
	"net/http"
	"strings"
)

// Repository roles GitHub assigns (REST API, collaborators). The permission endpoint reports each
// as a legacy base permission: maintain as write, triage as read.
const (
	RoleAdmin    = "admin"
	RoleMaintain = "maintain"
	RoleWrite    = "write"
	RoleTriage   = "triage"
	RoleRead     = "read"
)

// basePermission is the legacy permission GitHub reports for a role (a custom role reports its
// base role, given as "name:base").
func basePermission(role string) (roleName, permission string) {
	if name, base, ok := strings.Cut(role, ":"); ok {
		role, roleName = base, name
	}
	switch role {
	case RoleAdmin:
		permission = "admin"
	case RoleMaintain, RoleWrite:
		permission = "write"
	case RoleTriage, RoleRead:
		permission = "read"
	default:
		permission = "none"
	}
	if roleName == "" {
		roleName = role
	}
	return roleName, permission
}

// SetCollaborator gives login the role on the repository fullName: admin, maintain, write,
// triage or read, or a custom role as "name:base" (its base role one of those). An empty role
// removes the collaborator; GitHub then answers 404 for them.
func (s *Simulator) SetCollaborator(fullName, login, role string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := strings.ToLower(fullName)
	if role == "" {
		delete(s.collaborators[repo], strings.ToLower(login))
		return
	}
	if s.collaborators == nil {
		s.collaborators = map[string]map[string]string{}
	}
	if s.collaborators[repo] == nil {
		s.collaborators[repo] = map[string]string{}
	}
	s.collaborators[repo][strings.ToLower(login)] = role
}

// getCollaboratorPermission: GET /repos/{owner}/{repo}/collaborators/{username}/permission, with
// GitHub's response shape (permission, role_name and the user as a collaborator); 404 for a
// user who is not a collaborator.
func (s *Simulator) getCollaboratorPermission(w http.ResponseWriter, r *http.Request, _ *reqInfo, repo *repository) {
	login := r.PathValue("username")
	s.mu.Lock()
	role, ok := s.collaborators[strings.ToLower(repo.fullName)][strings.ToLower(login)]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	roleName, permission := basePermission(role)
	writeJSON(w, http.StatusOK, map[string]any{
		"permission": permission,
		"role_name":  roleName,
		"user": map[string]any{
			"login": login, "id": int64(len(login)) + 583000, "type": "User", "site_admin": false,
			"permissions": map[string]bool{
				"admin": permission == "admin", "maintain": permission == "admin" || roleName == RoleMaintain,
				"push": permission == "admin" || permission == "write", "triage": permission != "none",
				"pull": permission != "none"},
			"role_name": roleName,
		},
	})
}
