package charttest

import (
	"flag"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/boardreadyops/cloud/pkg/config"
	"github.com/boardreadyops/cloud/pkg/retention"
)

// The retention settings the chart renders into lifecycle are ones lifecycle starts with, in
// every value set: the digests period (the replay window) included, which lifecycle refuses
// under 72h, under the jobs period, or with a jobs period of never.
func TestLifecycleRetentionSettingsAreValid(t *testing.T) {
	t.Parallel()
	for _, file := range valueSets(t) {
		objs := renderObjects(t, file, "boardreadyops")
		dep := find(t, objs, "Deployment", "brops-boardreadyops-lifecycle").typed.(*appsv1.Deployment)
		c := dep.Spec.Template.Spec.Containers[0]
		if _, ok := env(c, "BOARDREADYOPS_RETENTION_DIGESTS"); !ok {
			t.Errorf("%s: lifecycle has no BOARDREADYOPS_RETENTION_DIGESTS", filepath.Base(file))
		}
		var s retention.Settings
		e := config.NewEnv(flag.NewFlagSet("lifecycle", flag.ContinueOnError), func(k string) string { v, _ := env(c, k); return v })
		s.Register(e)
		if err := e.Parse(nil); err != nil {
			t.Fatalf("%s: %v", filepath.Base(file), err)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("%s: lifecycle would refuse the chart's retention settings: %v", filepath.Base(file), err)
		}
	}
}
