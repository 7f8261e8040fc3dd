// Package v1alpha1 holds the boardreadyops.io/v1alpha1 API: the OutboxMonitor resource through
// which the operator reports the seed's external-broker transition triggers.
//
// +kubebuilder:object:generate=true
// +groupName=boardreadyops.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of the types in this package.
	GroupVersion = schema.GroupVersion{Group: "boardreadyops.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = (&scheme.Builder{GroupVersion: GroupVersion}).Register(&OutboxMonitor{}, &OutboxMonitorList{})

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
