package dispatcher

import (
	"testing"

	"github.com/boardreadyops/cloud/pkg/checkrun"
)

// One decode gives a delivery everything its payload says: the top-level fields and, for a
// check-run update, the rendered state (checkrun.State, embedded). A field added to payload under
// one of the state's JSON names would shadow it silently; this payload, as
// boardreadyops_release_run_enqueue_check_run writes it, shows that it does not.
func TestDecodePayloadOnce(t *testing.T) {
	t.Parallel()
	p, err := decodePayload([]byte(`{"release_run_id": "r-1", "execution_attempt_id": "a-1", "attempt_number": 2,
		"installation_id": 7, "repository_full_name": "octo-org/hello-world", "check_run_id": 42, "state": "succeeded",
		"tag": "v1.0.0", "head_sha": "abc", "workflow_file": "boardreadyops-release.yml", "notice": "n", "retry": true,
		"details_url": "https://github.com/x", "attempts": [{"number": 1, "status": "failed"}, {"number": 2, "status": "succeeded"}],
		"attempts_total": 2, "conclusion": "success", "workflow_run_id": 9, "workflow_run_url": "https://github.com/x"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := checkrun.State{State: checkrun.StateSucceeded, Tag: "v1.0.0", HeadSHA: "abc", WorkflowFile: "boardreadyops-release.yml",
		Notice: "n", Retry: true, DetailsURL: "https://github.com/x",
		Attempts: []checkrun.Attempt{{Number: 1, Status: "failed"}, {Number: 2, Status: "succeeded"}}, AttemptsTotal: 2}
	if p.State.State != want.State || p.Tag != want.Tag || p.HeadSHA != want.HeadSHA || p.WorkflowFile != want.WorkflowFile ||
		p.Notice != want.Notice || !p.Retry || p.DetailsURL != want.DetailsURL || len(p.Attempts) != 2 || p.Attempts[1] != want.Attempts[1] ||
		p.AttemptsTotal != 2 {
		t.Errorf("state %+v, want %+v", p.State, want)
	}
	if p.RepositoryFullName != "octo-org/hello-world" || p.CheckRunID != 42 || p.Conclusion != "success" || p.WorkflowRunID != 9 ||
		p.AttemptNumber != 2 || p.InstallationID != 7 {
		t.Errorf("payload %+v", p)
	}
	if !showsConclusion(p) {
		t.Error("a succeeded check-run update does not show its conclusion")
	}
	// The completion of before 00021: no state, a conclusion.
	if p, err := decodePayload([]byte(`{"repository_full_name": "o/r", "check_run_id": 1, "conclusion": "failure"}`)); err != nil ||
		p.State.State != "" || !showsConclusion(p) {
		t.Errorf("earlier completion: %+v, %v", p, err)
	}
}
