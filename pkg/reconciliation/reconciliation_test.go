package reconciliation_test

import (
	"testing"

	"github.com/boardreadyops/cloud/pkg/githubapp"
	"github.com/boardreadyops/cloud/pkg/reconciliation"
)

func TestClassifyAndDecide(t *testing.T) {
	t.Parallel()
	const sha, other = "6dcb09b5b57875f334f61aebed695e2e4193db5e", "0000000000000000000000000000000000000001"
	d := reconciliation.Dispatch{ReleaseRunID: "run-1", ExecutionAttemptID: "att-1", Ref: "refs/tags/v1.2.0", HeadSHA: sha}
	run := func(id int64, title, branch, head string) githubapp.WorkflowRun {
		return githubapp.WorkflowRun{ID: id, DisplayTitle: title, HeadBranch: branch, HeadSHA: head}
	}
	exact := run(1, "release run-1 attempt att-1", "v1.2.0", sha)
	decoyBranch := run(2, "release run-1 attempt att-1", "v1.2.0-decoy", sha)
	decoySHA := run(3, "release run-1 attempt att-1", "v1.2.0", other)
	otherAttempt := run(4, "release run-1 attempt att-0", "v1.2.0", sha)
	sameTag := run(5, "release lost attempt lost", "v1.2.0", sha)
	unrelated := run(6, "Release", "main", other)

	tests := []struct {
		name        string
		runs        []githubapp.WorkflowRun
		wantClasses []string
		wantResolve int64 // 0: left for a person
	}{
		{"one exact among the rest", []githubapp.WorkflowRun{unrelated, exact, otherAttempt},
			[]string{"none", "exact", "release_run"}, 1},
		{"decoy on another branch only", []githubapp.WorkflowRun{decoyBranch}, []string{"name_only"}, 0},
		{"decoy on another commit only", []githubapp.WorkflowRun{decoySHA}, []string{"name_only"}, 0},
		{"exact with a decoy beside it", []githubapp.WorkflowRun{decoyBranch, exact}, []string{"name_only", "exact"}, 1},
		{"two exact", []githubapp.WorkflowRun{exact, run(7, "release run-1 attempt att-1", "v1.2.0", sha)}, []string{"exact", "exact"}, 0},
		{"same tag, not named", []githubapp.WorkflowRun{sameTag}, []string{"tag"}, 0},
		{"nothing", nil, []string{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cands := reconciliation.Candidates(d, tt.runs)
			for i, c := range cands {
				if c.Match != tt.wantClasses[i] {
					t.Errorf("run %d: %s, want %s", c.ID, c.Match, tt.wantClasses[i])
				}
			}
			dec := reconciliation.Decide(cands)
			if dec.Resolve != (tt.wantResolve != 0) || dec.WorkflowRunID != tt.wantResolve || dec.Reason == "" {
				t.Fatalf("decision %+v, want run %d", dec, tt.wantResolve)
			}
		})
	}
}
