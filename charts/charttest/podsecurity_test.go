package charttest

import (
	"path/filepath"
	"testing"

	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// TestRestrictedPodSecurity evaluates every pod template the chart renders (Deployments, the
// migration Job, the redeliver CronJob) against the restricted Pod Security Standard with the
// pod-security-admission library the API server itself uses.
func TestRestrictedPodSecurity(t *testing.T) {
	t.Parallel()
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	restricted := api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()}
	for _, file := range valueSets(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			pods := podSpecs(renderObjects(t, file, "boardreadyops"))
			if len(pods) == 0 {
				t.Fatal("no pod templates rendered")
			}
			for name, pod := range pods {
				res := policy.AggregateCheckResults(eval.EvaluatePod(restricted, &pod.ObjectMeta, &pod.Spec))
				if !res.Allowed {
					t.Errorf("%s violates the restricted Pod Security Standard: %s", name, res.ForbiddenDetail())
				}
			}
		})
	}
}
