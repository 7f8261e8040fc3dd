package cluster

import (
	"fmt"
	"strings"

	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
)

// This file has no build tag: make test compiles it and runs push_payload_test.go, so the
// payloads the cluster load sends are checked on every run, not only under make test-cluster.

const repos = 4

// pushedSHA is the commit every tag the test pushes points at (the simulator's tags, githubsim.TagsAt).
const pushedSHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"

// pushPayload is the n-th push the cluster load sends: a new release tag in one of four
// repositories of two installations. The repository id is the simulator's
// (githubsim.RepositoryID of the full name): lifecycle matches a workflow_run to an attempt only
// in the delivery's repository, and the simulator's workflow_run webhooks carry that id.
func pushPayload(n int64) map[string]any {
	r := n % repos
	fullName := fmt.Sprintf("org-%d/repo-%d", r%2, r)
	return map[string]any{
		"ref": fmt.Sprintf("refs/tags/v1.%d.0", n), "before": strings.Repeat("0", 40), "after": pushedSHA,
		"created": true, "deleted": false, "installation": map[string]any{"id": 5000 + r%2},
		"repository": map[string]any{"id": githubsim.RepositoryID(fullName), "name": fmt.Sprintf("repo-%d", r), "full_name": fullName,
			"default_branch": "main", "owner": map[string]any{"login": fmt.Sprintf("org-%d", r%2), "type": "Organization"}},
	}
}
