package charttest

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
)

// TestHooksGoAfterTheirRun: Helm never deletes a hook's objects at helm uninstall, so every hook
// the chart renders must be deleted by Helm once its event's hooks have run (hook-succeeded). A
// failed migration Job is kept for inspection, with its pods' logs, for the 24 hours of its
// ttlSecondsAfterFinished (as the chart README and docs/upgrading.md say), or until the next
// install or upgrade replaces it. make test-cluster found the migration Job's NetworkPolicy left
// behind after uninstall.
//
// The one exception is the OutboxMonitor: a hook only because its CRD is created by the same
// release (operator-crd.yaml), it must outlive its hook, so it is replaced at the next install or
// upgrade (before-hook-creation) and never deleted after its run; the operator's owner reference
// to the dispatcher Deployment removes it at uninstall.
func TestHooksGoAfterTheirRun(t *testing.T) {
	t.Parallel()
	// The hooks by kind: their events and delete policies, each sorted.
	want := map[string]struct{ events, policies []string }{
		"Job":           {[]string{"pre-install", "pre-upgrade"}, []string{"before-hook-creation", "hook-succeeded"}},
		"NetworkPolicy": {[]string{"pre-install", "pre-upgrade"}, []string{"before-hook-creation", "hook-succeeded"}},
		"OutboxMonitor": {[]string{"post-install", "post-upgrade"}, []string{"before-hook-creation"}},
	}
	split := func(s string) []string {
		var out []string
		for _, p := range strings.Split(s, ",") {
			out = append(out, strings.TrimSpace(p))
		}
		slices.Sort(out)
		return out
	}
	seen := map[string]int{}
	for _, o := range renderObjects(t, filepath.Join(chartDir, "ci", "production-values.yaml"), "boardreadyops") {
		a := o.u.GetAnnotations()
		if a["helm.sh/hook"] == "" {
			continue
		}
		w, ok := want[o.u.GetKind()]
		if !ok {
			t.Errorf("%s: a hook of a kind this test does not know", o)
			continue
		}
		seen[o.u.GetKind()]++
		if got := split(a["helm.sh/hook"]); !slices.Equal(got, w.events) {
			t.Errorf("%s: hook %q, want %v", o, a["helm.sh/hook"], w.events)
		}
		if got := split(a["helm.sh/hook-delete-policy"]); !slices.Equal(got, w.policies) {
			t.Errorf("%s: hook-delete-policy %q, want %v", o, a["helm.sh/hook-delete-policy"], w.policies)
		}
		if job, ok := o.typed.(*batchv1.Job); ok {
			if ttl := job.Spec.TTLSecondsAfterFinished; ttl == nil || *ttl != 86400 {
				t.Errorf("%s: ttlSecondsAfterFinished is not 86400, the 24 hours the docs promise a failed Job's logs", o)
			}
		}
		if o.u.GetKind() == "OutboxMonitor" && a["boardreadyops.io/delete-with-dispatcher"] != "true" {
			t.Errorf("%s: not annotated boardreadyops.io/delete-with-dispatcher: helm uninstall would leave it", o)
		}
	}
	for kind := range want {
		if seen[kind] == 0 {
			t.Errorf("no %s hook rendered", kind)
		}
	}
}
