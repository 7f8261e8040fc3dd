package charttest

import (
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// operatorLease is the operator's leader election Lease (its LeaderElectionID, docs/operator.md).
const operatorLease = "boardreadyops-operator.boardreadyops.io"

// TestOperatorRoleNamesItsLease: the operator may create a Lease (RBAC cannot limit create to a
// name: the request carries none) and get and update the one its leader election holds, but no
// other: every other Lease verb is limited to that name, so it can neither read nor take over
// another component's Lease in the namespace. Leader election needs no more (client-go's
// LeaseLock gets, creates and updates; services/operator's TestRunManager runs as this Role).
func TestOperatorRoleNamesItsLease(t *testing.T) {
	t.Parallel()
	objs := renderObjects(t, filepath.Join(chartDir, "ci", "production-values.yaml"), "boardreadyops")
	role := find(t, objs, "Role", "brops-boardreadyops-operator").typed.(*rbacv1.Role)
	granted := map[string]bool{} // verb → granted on the operator's Lease
	for _, r := range role.Rules {
		group := slices.Contains(r.APIGroups, "coordination.k8s.io") || slices.Contains(r.APIGroups, "*")
		resource := slices.Contains(r.Resources, "leases") || slices.Contains(r.Resources, "*")
		if !group || !resource {
			continue
		}
		for _, verb := range r.Verbs {
			if verb != "create" && !slices.Equal(r.ResourceNames, []string{operatorLease}) {
				t.Errorf("rule %+v: %s on Leases %q (none: every Lease in the namespace), want it limited to %s by resourceNames",
					r, verb, r.ResourceNames, operatorLease)
			}
			if verb == "create" || len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, operatorLease) {
				granted[verb] = true
			}
		}
	}
	for _, verb := range []string{"create", "get", "update"} {
		if !granted[verb] {
			t.Errorf("the operator's Role does not grant %s on its Lease %s, which leader election needs (rules %+v)", verb, operatorLease, role.Rules)
		}
	}
}
