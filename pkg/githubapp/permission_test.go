package githubapp_test

import (
	"context"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/githubapp"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
)

// GetCollaboratorPermission decodes GitHub's permission and role_name; a 404 is an answer, not
// an error: not a collaborator — also when the repository is not the installation's, which GitHub
// answers the same way (no permission either way). A login that is not one is never sent.
func TestGetCollaboratorPermission(t *testing.T) {
	t.Parallel()
	e := setup(t, 5*time.Second)
	ctx := context.Background()
	e.sim.SetCollaborator(repo, "Mona", githubsim.RoleMaintain)
	e.sim.SetCollaborator(repo, "hubot", "security-engineer:"+githubsim.RoleWrite)
	e.sim.SetCollaborator(repo, "watcher", githubsim.RoleTriage)
	tests := []struct {
		login string
		want  githubapp.CollaboratorPermission
	}{
		{"mona", githubapp.CollaboratorPermission{Collaborator: true, Permission: "write", RoleName: "maintain"}},
		{"hubot", githubapp.CollaboratorPermission{Collaborator: true, Permission: "write", RoleName: "security-engineer"}},
		{"watcher", githubapp.CollaboratorPermission{Collaborator: true, Permission: "read", RoleName: "triage"}},
		{"stranger", githubapp.CollaboratorPermission{}},
	}
	for _, tt := range tests {
		got, err := e.client.GetCollaboratorPermission(ctx, inst, repo, tt.login)
		if err != nil || got != tt.want {
			t.Errorf("%s: %+v, %v; want %+v", tt.login, got, err, tt.want)
		}
	}
	if got, err := e.client.GetCollaboratorPermission(ctx, inst, "other-org/secret", "mona"); err != nil || got.Collaborator {
		t.Errorf("a repository of another installation: %+v, %v; want no permission", got, err)
	}
	before := e.sim.Count(githubsim.OpGetCollaboratorPermission, 0)
	if _, err := e.client.GetCollaboratorPermission(ctx, inst, repo, "../../../orgs/octo-org"); err == nil {
		t.Error("a path as the login was accepted")
	}
	if n := e.sim.Count(githubsim.OpGetCollaboratorPermission, 0); n != before {
		t.Errorf("a path as the login was sent")
	}
}
