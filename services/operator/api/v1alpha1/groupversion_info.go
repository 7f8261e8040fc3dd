// Package v1alpha1 holds the boardreadyops.io/v1alpha1 API: the OutboxMonitor resource through
// which the operator reports the external-broker transition triggers (docs/operator.md). It
// depends only on k8s.io/apimachinery, so that any client can import it.
//
// +kubebuilder:object:generate=true
// +groupName=boardreadyops.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of the types in this package.
	GroupVersion = schema.GroupVersion{Group: "boardreadyops.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &OutboxMonitor{}, &OutboxMonitorList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
