package charttest

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func env(c corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// Every container runs with GOGC at runtime.goGC (400), and every container with a memory limit
// with GOMEMLIMIT at runtime.goMemLimitPercent (90) of it, in every value set, so the garbage
// collector works before the kernel kills the pod.
func TestGoMemLimitFromEveryMemoryLimit(t *testing.T) {
	t.Parallel()
	for _, file := range valueSets(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			pods := podSpecs(renderObjects(t, file, "boardreadyops"))
			if len(pods) == 0 {
				t.Fatal("no pods")
			}
			for name, pod := range pods {
				for _, c := range pod.Spec.Containers {
					if got, _ := env(c, "GOGC"); got != "400" {
						t.Errorf("%s/%s: GOGC %q, want \"400\" (runtime.goGC)", name, c.Name, got)
					}
					limit, ok := c.Resources.Limits[corev1.ResourceMemory]
					got, set := env(c, "GOMEMLIMIT")
					if !ok {
						if set {
							t.Errorf("%s/%s: GOMEMLIMIT %s without a memory limit", name, c.Name, got)
						}
						continue
					}
					want := fmt.Sprintf("%dMiB", limit.Value()/(1<<20)*90/100)
					if got != want {
						t.Errorf("%s/%s: GOMEMLIMIT %q, want %q (90%% of %s)", name, c.Name, got, want, limit.String())
					}
				}
			}
		})
	}
}

// The ingest body budget stays at most half the container's memory limit: the chart refuses more.
func TestIngestBodyBudgetWellUnderTheMemoryLimit(t *testing.T) {
	t.Parallel()
	for _, file := range valueSets(t) {
		objs := renderObjects(t, file, "boardreadyops")
		dep := find(t, objs, "Deployment", "brops-boardreadyops-ingest").typed.(*appsv1.Deployment)
		c := dep.Spec.Template.Spec.Containers[0]
		budget, _ := env(c, "BOARDREADYOPS_INGEST_BODY_BUDGET_MIB")
		mib, err := strconv.ParseInt(budget, 10, 64)
		limit := c.Resources.Limits[corev1.ResourceMemory]
		if err != nil || mib<<20 > limit.Value()/2 {
			t.Errorf("%s: body budget %s MiB against a %s limit", filepath.Base(file), budget, limit.String())
		}
		if ct, _ := env(c, "BOARDREADYOPS_WEBHOOK_CONTENT_TYPE"); ct != "json" {
			t.Errorf("%s: content type %q, want json", filepath.Base(file), ct)
		}
	}
	vals := readValues(t, filepath.Join(chartDir, "ci", "minimal-values.yaml"))
	for _, tt := range []struct {
		limit  any
		budget int
		want   string // "" renders; else part of the error
	}{
		{"512Mi", 256, ""},
		{"512Mi", 257, "more than half of the memory limit"},
		{"1Gi", 512, ""},
		{"1G", 512, "more than half"},
		{"0.5Gi", 100, "write whole Ki, Mi, Gi"},
	} {
		v := deepCopy(vals)
		ingest, _ := v["ingest"].(map[string]any)
		if ingest == nil {
			ingest = map[string]any{}
			v["ingest"] = ingest
		}
		ingest["bodyBudgetMiB"] = tt.budget
		ingest["resources"] = map[string]any{"limits": map[string]any{"memory": tt.limit}}
		_, err := render(t, v, "boardreadyops")
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("limit %v budget %d: %v", tt.limit, tt.budget, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("limit %v budget %d: %v, want an error containing %q", tt.limit, tt.budget, err, tt.want)
		}
	}
}
