package cluster

import (
	"testing"

	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
)

// TestPushPayloadsNameSimulatorRepositories: a push whose repository id is not the simulator's
// gets a release run whose workflow_run webhooks never match it (execution_attempt_finish looks
// in the delivery's repository), and make test-cluster ends with every run 'running' and every
// workflow_run job deferred as "not matched to a dispatched attempt yet".
func TestPushPayloadsNameSimulatorRepositories(t *testing.T) {
	t.Parallel()
	for n := int64(1); n <= 2*repos; n++ {
		repo := pushPayload(n)["repository"].(map[string]any)
		name := repo["full_name"].(string)
		if id, want := repo["id"], githubsim.RepositoryID(name); id != want {
			t.Errorf("push %d: repository %s has id %v, the simulator's is %d", n, name, id, want)
		}
	}
}
