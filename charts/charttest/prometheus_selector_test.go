package charttest

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// promLabelChars are the characters Prometheus replaces with _ in a Kubernetes label's name.
var promLabelChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// TestOperatorPrometheusSelectorMatchesTheServiceMonitor: the production values' OutboxMonitor
// reads the dispatcher's series from Prometheus by spec.prometheus.selector; it must match the
// labels the chart's ServiceMonitor gives them, or every query comes back empty. The labels are
// the Prometheus Operator's for a ServiceMonitor without jobLabel (job and service: the Service's
// name; namespace; endpoint: the port's name) with the endpoint's relabelings applied after.
func TestOperatorPrometheusSelectorMatchesTheServiceMonitor(t *testing.T) {
	t.Parallel()
	objs := renderObjects(t, filepath.Join(chartDir, "ci", "production-values.yaml"), "boardreadyops")
	mon := find(t, objs, "OutboxMonitor", "brops-boardreadyops-outbox-dispatcher")
	selector, _, _ := unstructured.NestedString(mon.u.Object, "spec", "prometheus", "selector")
	depName, _, _ := unstructured.NestedString(mon.u.Object, "spec", "dispatcher", "deploymentName")
	if selector == "" {
		t.Fatal("the production values' OutboxMonitor does not read Prometheus")
	}
	pod := find(t, objs, "Deployment", depName).typed.(*appsv1.Deployment).Spec.Template

	sm := find(t, objs, "ServiceMonitor", "brops-boardreadyops").u
	if _, ok, _ := unstructured.NestedString(sm.Object, "spec", "jobLabel"); ok {
		t.Fatal("the ServiceMonitor sets jobLabel: update this test's job label")
	}
	smSelector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("%d ServiceMonitor endpoints, want 1", len(endpoints))
	}
	endpoint := endpoints[0].(map[string]any)
	port, _ := endpoint["port"].(string)

	// The Service the dispatcher's series are scraped through.
	var svc *corev1.Service
	for _, o := range objs {
		s, ok := o.typed.(*corev1.Service)
		if ok && labels.SelectorFromSet(smSelector).Matches(labels.Set(s.Labels)) &&
			labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			svc = s
		}
	}
	if svc == nil {
		t.Fatalf("no Service the ServiceMonitor selects (%v) serves the pods of %s", smSelector, depName)
	}
	series := map[string]string{"namespace": svc.Namespace, "job": svc.Name, "service": svc.Name, "endpoint": port}
	relabelings, _ := endpoint["relabelings"].([]any)
	for _, rl := range relabelings {
		r := rl.(map[string]any)
		src, _ := r["sourceLabels"].([]any)
		target, _ := r["targetLabel"].(string)
		var podLabel string
		isPodLabel := false
		if len(src) == 1 {
			name, _ := src[0].(string)
			podLabel, isPodLabel = strings.CutPrefix(name, "__meta_kubernetes_pod_label_")
		}
		if !isPodLabel || target == "" || r["action"] != nil || r["regex"] != nil || r["replacement"] != nil {
			t.Fatalf("relabeling %v: this test knows only a pod label copied to a target label", r)
		}
		value := ""
		for k, v := range pod.Labels {
			if promLabelChars.ReplaceAllString(k, "_") == podLabel {
				value = v
			}
		}
		series[target] = value
	}

	matcher := regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"]*)"\s*$`)
	for _, m := range strings.Split(selector, ",") {
		p := matcher.FindStringSubmatch(m)
		if p == nil {
			t.Fatalf("selector %s: matcher %q is not name=\"value\"", selector, m)
		}
		if got, ok := series[p[1]]; !ok || got != p[2] {
			t.Errorf("selector %s: %s=%q, but the dispatcher's series carry %s=%q (labels %v)", selector, p[1], p[2], p[1], got, series)
		}
	}
}
