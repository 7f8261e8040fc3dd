package charttest

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestHooksGoAfterTheirRun: Helm never deletes a hook's objects at helm uninstall, so every hook
// the chart renders must be deleted by Helm once its event's hooks have run (hook-succeeded; the
// Job keeps its failed run for inspection until the next install or upgrade replaces it). make
// test-cluster found the migration Job's NetworkPolicy left behind after uninstall.
func TestHooksGoAfterTheirRun(t *testing.T) {
	t.Parallel()
	hooks := 0
	for _, o := range renderObjects(t, filepath.Join(chartDir, "ci", "production-values.yaml"), "boardreadyops") {
		a := o.u.GetAnnotations()
		if a["helm.sh/hook"] == "" {
			continue
		}
		hooks++
		policies := strings.Split(a["helm.sh/hook-delete-policy"], ",")
		has := func(p string) bool {
			for _, q := range policies {
				if strings.TrimSpace(q) == p {
					return true
				}
			}
			return false
		}
		if !has("hook-succeeded") || !has("before-hook-creation") {
			t.Errorf("%s: hook-delete-policy %q, want before-hook-creation and hook-succeeded", o, a["helm.sh/hook-delete-policy"])
		}
	}
	if hooks < 2 {
		t.Fatalf("%d hook objects rendered, want the migration Job and its NetworkPolicy", hooks)
	}
}
