package charttest

import (
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// policies returns the rendered NetworkPolicies.
func policies(objs []object) []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, o := range objs {
		if np, ok := o.typed.(*networkingv1.NetworkPolicy); ok {
			out = append(out, np)
		}
	}
	return out
}

// egressPorts lists a policy's egress ports as "TCP/5432", sorted.
func egressPorts(np *networkingv1.NetworkPolicy) []string {
	var out []string
	for _, r := range np.Spec.Egress {
		for _, p := range r.Ports {
			out = append(out, string(*p.Protocol)+"/"+p.Port.String())
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// TestNetworkPoliciesCoverEveryPod: with NetworkPolicies on, every pod the chart runs — the
// services, the migration Job and the redeliver CronJob — is selected by exactly one policy with
// both directions restricted, and the batch pods accept no connections and reach only DNS,
// PostgreSQL and (redeliver) GitHub.
func TestNetworkPoliciesCoverEveryPod(t *testing.T) {
	t.Parallel()
	objs := renderObjects(t, filepath.Join(chartDir, "ci", "production-values.yaml"), "boardreadyops")
	nps := policies(objs)
	pods := podSpecs(objs)
	if len(pods) != 6 {
		t.Fatalf("%d pod templates, want the 4 services, the migration Job and the redeliver CronJob", len(pods))
	}
	for name, pod := range pods {
		var selected []*networkingv1.NetworkPolicy
		for _, np := range nps {
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil {
				t.Fatal(err)
			}
			if sel.Matches(labels.Set(pod.Labels)) {
				selected = append(selected, np)
			}
		}
		if len(selected) != 1 {
			t.Errorf("%s: selected by %d NetworkPolicies, want 1", name, len(selected))
			continue
		}
		np := selected[0]
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			t.Errorf("%s: policy %s restricts %v, want Ingress and Egress", name, np.Name, np.Spec.PolicyTypes)
		}
		batch := map[string][]string{
			"migrations": {"TCP/53", "TCP/5432", "UDP/53"},
			"redeliver":  {"TCP/443", "TCP/53", "TCP/5432", "UDP/53"},
		}
		component := pod.Labels["app.kubernetes.io/component"]
		if want, ok := batch[component]; ok {
			if len(np.Spec.Ingress) != 0 {
				t.Errorf("%s: %d ingress rules, want none", name, len(np.Spec.Ingress))
			}
			if got := egressPorts(np); !slices.Equal(got, want) {
				t.Errorf("%s: egress ports %v, want %v", name, got, want)
			}
		}
	}
	// The migration Job is a pre-install hook: its policy must exist before it, so it is a hook of
	// the same phases with a lower weight.
	job := find(t, objs, "Job", "brops-boardreadyops-migrations")
	np := find(t, objs, "NetworkPolicy", "brops-boardreadyops-migrations")
	if np.u.GetAnnotations()["helm.sh/hook"] != job.u.GetAnnotations()["helm.sh/hook"] ||
		np.u.GetAnnotations()["helm.sh/hook-weight"] >= job.u.GetAnnotations()["helm.sh/hook-weight"] {
		t.Errorf("migrations NetworkPolicy annotations %v do not run it before the Job (%v)", np.u.GetAnnotations(), job.u.GetAnnotations())
	}
}

// operatorEgress renders vals and returns the operator policy's egress peers as strings.
func operatorEgress(t *testing.T, vals map[string]any) []string {
	t.Helper()
	out, err := render(t, vals, "boardreadyops")
	if err != nil {
		t.Fatal(err)
	}
	return peersOf(t, out)
}

func peersOf(t *testing.T, out map[string]string) []string {
	t.Helper()
	objs := objectsOf(t, out)
	var peers []string
	for _, np := range policies(objs) {
		if np.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"] != "operator" {
			continue
		}
		for _, r := range np.Spec.Egress {
			for _, p := range r.To {
				switch {
				case p.IPBlock != nil:
					peers = append(peers, "ip:"+p.IPBlock.CIDR)
				case p.PodSelector != nil && p.NamespaceSelector == nil:
					peers = append(peers, "pods:"+p.PodSelector.MatchLabels["app.kubernetes.io/component"])
				default:
					peers = append(peers, "other:"+p.String())
				}
			}
		}
	}
	sort.Strings(peers)
	return peers
}

// TestOperatorEgressOnlyAPIServerAndDispatchers: the operator reaches the API server's endpoints
// and the dispatcher pods and nothing else (no DNS, no 0.0.0.0/0); a peer matching every address
// is refused, and so is an install where the endpoints are neither configured nor found.
func TestOperatorEgressOnlyAPIServerAndDispatchers(t *testing.T) {
	t.Parallel()
	base := func(to []any) map[string]any {
		return merge(readValues(t, filepath.Join(chartDir, "ci", "minimal-values.yaml")), map[string]any{
			"networkPolicy": map[string]any{"enabled": true, "kubeAPIServerTo": to}})
	}
	ip := func(cidr string) any { return map[string]any{"ipBlock": map[string]any{"cidr": cidr}} }

	got := operatorEgress(t, base([]any{ip("172.18.0.2/32"), ip("172.18.0.3/32")}))
	want := []string{"ip:172.18.0.2/32", "ip:172.18.0.3/32", "pods:outbox-dispatcher"}
	if !slices.Equal(got, want) {
		t.Errorf("operator egress peers = %v, want %v", got, want)
	}
	for _, tt := range []struct {
		name string
		to   []any
		want string
	}{
		{"everything", []any{ip("0.0.0.0/0")}, "matches every address"},
		{"everything v6", []any{ip("172.18.0.2/32"), ip("::/0")}, "matches every address"},
		{"not found", []any{}, "could not be looked up"},
	} {
		if _, err := render(t, base(tt.to), "boardreadyops"); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: render error %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestOperatorEgressLooksUpTheAPIServer: with no peers configured, an install reads the API
// server's EndpointSlice (here envtest's kube-apiserver) and allows exactly its addresses and port.
func TestOperatorEgressLooksUpTheAPIServer(t *testing.T) {
	t.Parallel()
	vals := merge(readValues(t, filepath.Join(chartDir, "ci", "minimal-values.yaml")), map[string]any{
		"networkPolicy": map[string]any{"enabled": true}})
	out, err := renderWith(t, apiServer, vals, "boardreadyops")
	if err != nil {
		t.Fatal(err)
	}
	peers := peersOf(t, out)
	if len(peers) < 2 || peers[len(peers)-1] != "pods:outbox-dispatcher" {
		t.Fatalf("operator egress peers = %v, want the API server's addresses and the dispatchers", peers)
	}
	for _, p := range peers[:len(peers)-1] {
		if !strings.HasPrefix(p, "ip:") || (!strings.HasSuffix(p, "/32") && !strings.HasSuffix(p, "/128")) {
			t.Errorf("operator egress peer %s: want a single API server address", p)
		}
	}
}

// TestTracingEgress: with tracing (tracing.otlpEndpoint) and NetworkPolicies on, the services that
// export traces — ingest, lifecycle and the dispatcher; the operator, the migration Job and the
// redeliver CronJob export none — may reach the collector (networkPolicy.otlp.to) on
// networkPolicy.otlp.port, and no other pod may; without tracing no policy allows it. Before,
// an enforcing CNI dropped every span while the services ran on. With both on and no collector
// peers the chart refuses to render instead of dropping the spans.
func TestTracingEgress(t *testing.T) {
	t.Parallel()
	collector := []any{map[string]any{
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "observability"}},
		"podSelector":       map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "opentelemetry-collector"}},
	}}
	exporters := []string{"ingest", "lifecycle", "outbox-dispatcher"}
	tests := []struct {
		name     string
		patch    map[string]any
		port     string
		want     []string // components whose policy allows the collector
		wantErr  string
		policies bool
	}{
		{"tracing on", map[string]any{"networkPolicy": map[string]any{"otlp": map[string]any{"to": collector}}}, "TCP/4318", exporters, "", true},
		{"tracing on, other port", map[string]any{"networkPolicy": map[string]any{"otlp": map[string]any{"to": collector, "port": 14318}}}, "TCP/14318", exporters, "", true},
		{"tracing off", map[string]any{"tracing": map[string]any{"otlpEndpoint": ""}, "networkPolicy": map[string]any{"otlp": map[string]any{"to": collector}}}, "TCP/4318", nil, "", true},
		{"tracing on, no collector peers", map[string]any{"networkPolicy": map[string]any{"otlp": map[string]any{"to": []any{}}}}, "", nil, "networkPolicy.otlp.to", true},
		{"tracing on, policies off", map[string]any{"networkPolicy": map[string]any{"enabled": false, "otlp": map[string]any{"to": []any{}}}}, "", nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			vals := merge(readValues(t, filepath.Join(chartDir, "ci", "production-values.yaml")), deepCopy(tt.patch))
			if vals["tracing"].(map[string]any)["otlpEndpoint"] == "" && tt.name != "tracing off" {
				t.Fatal("the production values no longer set tracing.otlpEndpoint")
			}
			out, err := render(t, vals, "boardreadyops")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("render = %v, want an error naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			nps := policies(objectsOf(t, out))
			if got := len(nps) > 0; got != tt.policies {
				t.Fatalf("%d NetworkPolicies rendered", len(nps))
			}
			var got []string
			for _, np := range nps {
				component := np.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"]
				for _, r := range np.Spec.Egress {
					ports := egressPorts(&networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{r}}})
					if !slices.Contains(ports, tt.port) {
						continue
					}
					got = append(got, component)
					if !slices.Equal(ports, []string{tt.port}) || len(r.To) != 1 || r.To[0].NamespaceSelector == nil || r.To[0].PodSelector == nil ||
						r.To[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "observability" ||
						r.To[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "opentelemetry-collector" {
						t.Errorf("%s: collector rule %v, want the collector peers on %s only", np.Name, r, tt.port)
					}
				}
			}
			sort.Strings(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("policies allowing the collector: %v, want %v", got, tt.want)
			}
		})
	}
}
