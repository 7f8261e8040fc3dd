package cli_test

import (
	"strings"
	"testing"
)

func TestDispatchPauseResume(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	o.enqueueDispatch() // records installation 55501
	steps := []struct {
		args     []string
		wantCode int
		want     string
	}{
		{[]string{"dispatch", "pause"}, 2, "--reason is required"},
		{[]string{"dispatch", "pause", "--installation", "999", "--reason", "x"}, 1, "installation 999 is not recorded"},
		{[]string{"dispatch", "status"}, 0, "no dispatch pause"},
		{[]string{"dispatch", "pause", "--reason", "GitHub incident 123"}, 0, "every installation paused"},
		{[]string{"dispatch", "pause", "--installation", "55501", "--reason", "noisy"}, 0, "installation 55501 paused"},
		{[]string{"dispatch", "pause", "--reason", "GitHub incident 124"}, 0, "already paused; reason updated"},
		{[]string{"dispatch", "status"}, 0, "GitHub incident 124"},
		{[]string{"dispatch", "resume", "--reason", "incident over"}, 0, "every installation resumed"},
		{[]string{"dispatch", "resume", "--reason", "again"}, 0, "were not paused"},
		{[]string{"dispatch", "status"}, 0, "installation 55501"},
	}
	for _, s := range steps {
		code, out, errOut := run(t, o.env, s.args...)
		if code != s.wantCode || !strings.Contains(out+errOut, s.want) {
			t.Fatalf("%v: exit %d %q %q, want %d and %q", s.args, code, out, errOut, s.wantCode, s.want)
		}
	}
	var pauses, resumes int
	if err := o.pool.QueryRow(o.ctx, `SELECT count(*) FILTER (WHERE action = 'dispatch.pause'), count(*) FILTER (WHERE action = 'dispatch.resume')
		FROM control_plane_audit WHERE operator = 'alice' AND subject_type = 'dispatch_pause'`).Scan(&pauses, &resumes); err != nil || pauses != 3 || resumes != 1 {
		t.Fatalf("audit: %d pauses, %d resumes (%v); want 3 and 1", pauses, resumes, err)
	}
}
