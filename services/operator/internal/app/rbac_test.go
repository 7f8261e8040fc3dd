package app

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// generatedRole is the Role make generate writes from the controller's +kubebuilder:rbac markers;
// the chart renders its rules unchanged (templates/operator-rbac.yaml).
var generatedRole = filepath.Join("..", "..", "..", "..", "charts", "boardreadyops", "files", "role.yaml")

// asOperator returns a configuration that acts as the operator's ServiceAccount in namespace ns,
// bound there, as the chart binds it, to a Role with the generated rules: a manager run with it
// has no permission the chart does not grant. envtest's API server authorizes with RBAC, so a
// rule missing for leader election (a Lease verb or name) or for the controller fails the test.
func asOperator(t testing.TB, ctx context.Context, c client.Client, ns string) *rest.Config {
	t.Helper()
	b, err := os.ReadFile(generatedRole)
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	if _, _, err := serializer.NewCodecFactory(c.Scheme()).UniversalDeserializer().Decode(b, nil, &role); err != nil {
		t.Fatalf("decode %s: %v", generatedRole, err)
	}
	const sa = "boardreadyops-operator"
	role.ObjectMeta = metav1.ObjectMeta{Name: "boardreadyops-operator", Namespace: ns}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "boardreadyops-operator", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}
	for _, o := range []client.Object{&role, binding} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
	cfg := rest.CopyConfig(testCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
	return cfg
}

// leaseName is the leader election Lease's name (RunManager's LeaderElectionID), the one the
// Role's Lease rules name.
const leaseName = "boardreadyops-operator.boardreadyops.io"

// checkLeaseReleased fails unless the stopped manager handed its Lease in ns back
// (LeaderElectionReleaseOnCancel), so that a standby takes over at once: an update, which the
// Role must allow besides creating the Lease.
func checkLeaseReleased(t testing.TB, c client.Client, ns string) {
	t.Helper()
	var lease coordinationv1.Lease
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: leaseName}, &lease); err != nil {
		t.Fatalf("leader election Lease: %v", err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Fatalf("Lease %s still held by %q after the manager stopped", leaseName, *h)
	}
}
