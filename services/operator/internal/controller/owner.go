package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/boardreadyops/cloud/services/operator/api/v1alpha1"
)

// ownByDispatcher adds an owner reference from a monitor annotated
// v1alpha1.AnnotationDeleteWithDispatcher to its dispatcher Deployment, once; it leaves every
// other monitor alone. A missing Deployment is no error: the reference is added once it exists.
// The reference is no controller reference and does not block the Deployment's deletion.
func (r *Reconciler) ownByDispatcher(ctx context.Context, mon *v1alpha1.OutboxMonitor) error {
	if mon.Annotations[v1alpha1.AnnotationDeleteWithDispatcher] != "true" {
		return nil
	}
	var dep appsv1.Deployment
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: mon.Namespace, Name: mon.Spec.Dispatcher.DeploymentName}, &dep)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read dispatcher deployment: %w", err)
	}
	for _, o := range mon.OwnerReferences {
		if o.UID == dep.UID {
			return nil
		}
	}
	base := client.MergeFromWithOptions(mon.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if err := controllerutil.SetOwnerReference(&dep, mon, r.Client.Scheme()); err != nil {
		return fmt.Errorf("owner reference to the dispatcher deployment: %w", err)
	}
	if err := r.Client.Patch(ctx, mon, base); err != nil {
		return fmt.Errorf("patch outboxmonitor owner references: %w", err)
	}
	return nil
}
