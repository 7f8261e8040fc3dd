package controller

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/boardreadyops/cloud/services/operator/api/v1alpha1"
)

// TestMonitorOwnedByItsDispatcherWhenAnnotated: a monitor annotated delete-with-dispatcher (the
// chart's hook monitor, which helm uninstall leaves) gets one owner reference to its dispatcher
// Deployment, so that the garbage collector deletes it with the release's Deployment; a monitor
// without the annotation keeps no owner. envtest runs no garbage collector: make test-cluster
// shows the monitor gone after helm uninstall.
func TestMonitorOwnedByItsDispatcherWhenAnnotated(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		annotations map[string]string
		owned       bool
	}{
		{"annotated", map[string]string{v1alpha1.AnnotationDeleteWithDispatcher: "true"}, true},
		{"not annotated", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ns := newNamespace(t)
			d := newFakeDispatcher(t)
			dep := dispatcherFixture(t, ns, d.port(t))
			mon := &v1alpha1.OutboxMonitor{
				ObjectMeta: metav1.ObjectMeta{Name: "dispatcher", Namespace: ns, Annotations: tt.annotations},
				Spec:       v1alpha1.OutboxMonitorSpec{Dispatcher: v1alpha1.DispatcherTarget{DeploymentName: dep.Name}},
			}
			must(t, testClient.Create(ctx, mon))
			r := &Reconciler{Client: testClient, Recorder: newRecorder(t), HTTP: d.srv.Client(), Metrics: NewMetrics(prometheus.NewRegistry())}
			// Twice: the second reconcile adds no second reference.
			for range 2 {
				_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(mon)})
				must(t, err)
			}
			var got v1alpha1.OutboxMonitor
			must(t, testClient.Get(ctx, client.ObjectKeyFromObject(mon), &got))
			if !tt.owned {
				if len(got.OwnerReferences) != 0 {
					t.Fatalf("owner references %+v, want none", got.OwnerReferences)
				}
				return
			}
			refs := got.OwnerReferences
			if len(refs) != 1 || refs[0].UID != dep.UID || refs[0].Kind != "Deployment" || refs[0].APIVersion != "apps/v1" ||
				refs[0].Name != dep.Name || (refs[0].Controller != nil && *refs[0].Controller) {
				t.Fatalf("owner references %+v, want one non-controller reference to deployment %s (%s)", refs, dep.Name, dep.UID)
			}
			if got.Status.LastScrapeTime == nil {
				t.Fatalf("status not written after the owner reference: %+v", got.Status)
			}
		})
	}
}
