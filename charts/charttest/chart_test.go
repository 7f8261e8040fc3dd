package charttest

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func TestLint(t *testing.T) {
	t.Parallel()
	for _, file := range valueSets(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			l := lint.RunAll(chartDir, readValues(t, file), "boardreadyops")
			for _, m := range l.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("lint: %s", m)
				}
			}
		})
	}
}

func TestDefaultValuesNameWhatIsMissing(t *testing.T) {
	t.Parallel()
	_, err := render(t, map[string]any{}, "boardreadyops")
	if err == nil || !strings.Contains(err.Error(), "is required") {
		t.Fatalf("render with default values = %v, want an error naming the required Secret", err)
	}
}

func TestSchemaRejectsTyposAndWrongTypes(t *testing.T) {
	t.Parallel()
	base := readValues(t, filepath.Join(chartDir, "ci", "minimal-values.yaml"))
	tests := []struct {
		name  string
		patch string
		want  string
	}{
		{"typo at top level", "ingets: {replicas: 2}", "ingets"},
		{"typo in a service", "ingest: {replica: 2}", "replica"},
		{"string for an integer", `outboxDispatcher: {replicas: "two"}`, "replicas"},
		{"unknown log level", "logging: {level: verbose}", "level"},
		{"lease too short", "lifecycle: {leaseSeconds: 1}", "leaseSeconds"},
		{"malformed duration", "ingest: {storeTimeout: soon}", "storeTimeout"},
		// Lifecycle refuses a retention interval or lease of 0 (a crash loop); the chart says so.
		{"retention interval of 0", `retention: {interval: "0"}`, "interval"},
		{"retention lease of 0", `retention: {lease: "0"}`, "lease"},
		{"retention interval of 0s", `retention: {interval: "0s"}`, "interval"},
		{"retention lease under a second", `retention: {lease: "500ms"}`, "lease"},
		{"API URL without trailing slash", "github: {apiURL: https://ghe.example.com/api/v3}", "apiURL"},
		{"API URL without a host (the dispatcher refuses it at start)", "github: {apiURL: 'http:///api/v3/'}", "apiURL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var patch map[string]any
			if err := yaml.Unmarshal([]byte(tt.patch), &patch); err != nil {
				t.Fatal(err)
			}
			_, err := render(t, merge(deepCopy(base), patch), "boardreadyops")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("render = %v, want a schema error naming %q", err, tt.want)
			}
		})
	}
}

// TestRenderedObjects: the kinds each values file renders, one ConfigMap per dashboard (the
// overview and one per service, hack/dashboards), hooks included.
func TestRenderedObjects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file  string
		kinds map[string]int
	}{
		{"minimal-values.yaml", map[string]int{"Deployment": 4, "Service": 5, "ServiceAccount": 4, "PodDisruptionBudget": 3,
			"Job": 1, "Role": 1, "RoleBinding": 1, "OutboxMonitor": 1, "ConfigMap": 4, "CustomResourceDefinition": 1}},
		{"production-values.yaml", map[string]int{"Deployment": 4, "Service": 5, "ServiceAccount": 4, "PodDisruptionBudget": 3,
			"Job": 1, "CronJob": 1, "Role": 1, "RoleBinding": 1, "OutboxMonitor": 1, "ConfigMap": 4, "Ingress": 1,
			"HorizontalPodAutoscaler": 3, "NetworkPolicy": 6, "ServiceMonitor": 1, "PrometheusRule": 1, "CustomResourceDefinition": 1}},
		// The CRD does not depend on operator.enabled (crds.enabled does): turning the operator off
		// leaves the OutboxMonitors of the cluster served.
		{"no-operator-values.yaml", map[string]int{"Deployment": 3, "Service": 4, "ServiceAccount": 3, "PodDisruptionBudget": 3,
			"NetworkPolicy": 3, "CustomResourceDefinition": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			objs := renderObjects(t, filepath.Join(chartDir, "ci", tt.file), "boardreadyops")
			if got := kinds(objs); !reflect.DeepEqual(got, tt.kinds) {
				t.Fatalf("kinds = %v\nwant    %v", got, tt.kinds)
			}
		})
	}
}

// podSpecs returns every pod template the objects hold, by object.
func podSpecs(objs []object) map[string]*corev1.PodTemplateSpec {
	out := map[string]*corev1.PodTemplateSpec{}
	for _, o := range objs {
		switch v := o.typed.(type) {
		case *appsv1.Deployment:
			out[o.String()] = &v.Spec.Template
		case *batchv1.Job:
			out[o.String()] = &v.Spec.Template
		case *batchv1.CronJob:
			out[o.String()] = &v.Spec.JobTemplate.Spec.Template
		}
	}
	return out
}

func TestServiceAccountTokensOnlyForTheOperator(t *testing.T) {
	t.Parallel()
	objs := renderObjects(t, filepath.Join(chartDir, "ci", "production-values.yaml"), "boardreadyops")
	for name, pod := range podSpecs(objs) {
		automount := pod.Spec.AutomountServiceAccountToken != nil && *pod.Spec.AutomountServiceAccountToken
		wantToken := strings.Contains(name, "-operator ")
		if automount != wantToken {
			t.Errorf("%s: automountServiceAccountToken = %v, want %v", name, automount, wantToken)
		}
		for _, c := range pod.Spec.Containers {
			if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
				t.Errorf("%s/%s: root filesystem is writable", name, c.Name)
			}
		}
	}
}

func TestGracePeriodOutlastsTheLease(t *testing.T) {
	t.Parallel()
	objs := renderObjects(t, filepath.Join(chartDir, "ci", "production-values.yaml"), "boardreadyops")
	for _, d := range []struct{ name, leaseEnv string }{
		{"brops-boardreadyops-lifecycle", "BOARDREADYOPS_LIFECYCLE_LEASE"},
		{"brops-boardreadyops-outbox-dispatcher", "BOARDREADYOPS_DISPATCHER_LEASE"},
	} {
		dep := find(t, objs, "Deployment", d.name).typed.(*appsv1.Deployment)
		pod := dep.Spec.Template.Spec
		grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
		lease := envDuration(t, pod.Containers[0], d.leaseEnv)
		shutdown := envDuration(t, pod.Containers[0], "BOARDREADYOPS_SHUTDOWN_TIMEOUT")
		if grace <= lease || shutdown >= grace {
			t.Errorf("%s: grace %v, lease %v, shutdown timeout %v: want shutdown < grace and lease < grace", d.name, grace, lease, shutdown)
		}
		if dep.Spec.Replicas != nil {
			t.Errorf("%s: replicas set although the HPA owns them", d.name)
		}
	}
}

func envDuration(t testing.TB, c corev1.Container, name string) time.Duration {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == name {
			d, err := time.ParseDuration(e.Value)
			if err != nil {
				t.Fatalf("%s=%q: %v", name, e.Value, err)
			}
			return d
		}
	}
	t.Fatalf("container %s has no %s", c.Name, name)
	return 0
}

func TestSecretsOnlyByReference(t *testing.T) {
	t.Parallel()
	objs := renderObjects(t, filepath.Join(chartDir, "ci", "production-values.yaml"), "boardreadyops")
	if n := kinds(objs)["Secret"]; n != 0 {
		t.Fatalf("the chart renders %d Secrets; it must only reference existing ones", n)
	}
	for name, pod := range podSpecs(objs) {
		for _, c := range pod.Spec.Containers {
			for _, e := range c.Env {
				if e.Name == "DATABASE_URL" && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
					t.Errorf("%s: DATABASE_URL is not a secretKeyRef", name)
				}
			}
		}
	}
}

func TestMonitoringObjectsMatchTheirSources(t *testing.T) {
	t.Parallel()
	objs := renderObjects(t, filepath.Join(chartDir, "ci", "production-values.yaml"), "boardreadyops")

	var rulesFile map[string]any
	if err := yaml.Unmarshal(readFile(t, filepath.Join(chartDir, "rules", "boardreadyops.rules.yml")), &rulesFile); err != nil {
		t.Fatal(err)
	}
	rule := find(t, objs, "PrometheusRule", "brops-boardreadyops")
	groups, _, err := unstructured.NestedSlice(rule.u.Object, "spec", "groups")
	if err != nil {
		t.Fatal(err)
	}
	// The one rule the chart scopes: BoardReadyOpsDispatcherAbsent, to this namespace's dispatchers.
	// The rules file's absent() sees every namespace.
	want := normalize(t, rulesFile["groups"])
	scoped := 0
	for _, g := range want.([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			if rule["alert"] != "BoardReadyOpsDispatcherAbsent" {
				continue
			}
			scoped++
			rule["expr"] = `absent(up{namespace="boardreadyops", job=~".*outbox-dispatcher.*"} == 1)`
			rule["labels"].(map[string]any)["namespace"] = "boardreadyops"
			rule["annotations"].(map[string]any)["description"] = "No outbox dispatcher target in namespace boardreadyops has been up for 5 minutes " +
				"(absent = {{ $value }}), or none exists (scaled to 0, its ServiceMonitor removed): GitHub effects of this installation are not being delivered."
		}
	}
	if scoped != 1 {
		t.Fatalf("%d BoardReadyOpsDispatcherAbsent rules in the rules file, want 1", scoped)
	}
	if got := normalize(t, groups); !reflect.DeepEqual(got, want) {
		t.Fatalf("the PrometheusRule's groups differ from rules/boardreadyops.rules.yml, beyond the scoped BoardReadyOpsDispatcherAbsent:\n%v", got)
	}

	files, err := filepath.Glob(filepath.Join(chartDir, "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in the chart (%v)", err)
	}
	for _, f := range files {
		file := filepath.Base(f)
		name := "brops-boardreadyops-dashboard-" + strings.TrimPrefix(strings.TrimSuffix(file, ".json"), "boardreadyops-")
		cm := find(t, objs, "ConfigMap", name).typed.(*corev1.ConfigMap)
		if cm.Labels["grafana_dashboard"] != "1" {
			t.Fatalf("%s lacks the sidecar label: %v", name, cm.Labels)
		}
		want := strings.TrimRight(string(readFile(t, f)), "\n")
		if got := cm.Data[file]; got != want {
			t.Fatalf("%s does not hold %s unchanged", name, file)
		}
		if !json.Valid([]byte(cm.Data[file])) {
			t.Fatalf("%s is not valid JSON", file)
		}
	}
}

// normalize round-trips through JSON so that numbers and maps compare equal.
func normalize(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func deepCopy(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// merge overlays patch onto base, recursively for maps.
func merge(base, patch map[string]any) map[string]any {
	for k, v := range patch {
		if pm, ok := v.(map[string]any); ok {
			if bm, ok := base[k].(map[string]any); ok {
				base[k] = merge(bm, pm)
				continue
			}
		}
		base[k] = v
	}
	return base
}

// TestMonitoringAutodetect: with the Prometheus Operator's API served, the minimal values render
// the ServiceMonitor and PrometheusRule without enabling them; with autodetect off, they do not.
func TestMonitoringAutodetect(t *testing.T) {
	t.Parallel()
	apis := []string{"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule"}
	base := readValues(t, filepath.Join(chartDir, "ci", "minimal-values.yaml"))
	for _, tt := range []struct {
		autodetect bool
		want       bool
	}{{true, true}, {false, false}} {
		vals := merge(deepCopy(base), map[string]any{"monitoring": map[string]any{"autodetect": tt.autodetect}})
		out, err := render(t, vals, "boardreadyops", apis...)
		if err != nil {
			t.Fatal(err)
		}
		for _, tpl := range []string{"monitoring-servicemonitor.yaml", "monitoring-prometheusrule.yaml"} {
			got := strings.TrimSpace(out["boardreadyops/templates/"+tpl]) != ""
			if got != tt.want {
				t.Errorf("autodetect %v: %s rendered = %v, want %v", tt.autodetect, tpl, got, tt.want)
			}
		}
	}
	// Without the API (the default capabilities), nothing is rendered unless enabled.
	out, err := render(t, base, "boardreadyops")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out["boardreadyops/templates/monitoring-servicemonitor.yaml"]) != "" {
		t.Error("ServiceMonitor rendered although the API is not served and it is not enabled")
	}
}

// TestOperatorEgressToPrometheus: with the monitor reading Prometheus and NetworkPolicies on, the
// operator may reach Prometheus; without the Prometheus source it may not.
func TestOperatorEgressToPrometheus(t *testing.T) {
	t.Parallel()
	hasPromEgress := func(vals map[string]any) bool {
		out, err := render(t, vals, "boardreadyops")
		if err != nil {
			t.Fatal(err)
		}
		np := out["boardreadyops/templates/networkpolicies.yaml"]
		i := strings.Index(np, "name: brops-boardreadyops-operator")
		return i >= 0 && strings.Contains(np[i:], "kubernetes.io/metadata.name: monitoring\n      ports:\n        - {protocol: TCP, port: 9090}")
	}
	prod := readValues(t, filepath.Join(chartDir, "ci", "production-values.yaml"))
	if !hasPromEgress(prod) {
		t.Error("production values (monitor reads Prometheus): no operator egress to Prometheus")
	}
	noProm := merge(readValues(t, filepath.Join(chartDir, "ci", "minimal-values.yaml")), map[string]any{"networkPolicy": map[string]any{
		"enabled": true, "kubeAPIServerTo": []any{map[string]any{"ipBlock": map[string]any{"cidr": "172.18.0.2/32"}}}}})
	if hasPromEgress(noProm) {
		t.Error("operator egress to Prometheus without a Prometheus source")
	}
}
