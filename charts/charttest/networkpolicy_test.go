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
