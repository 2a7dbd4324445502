// Package v1alpha1 contains the API of the policy.orderly.dev group: cost-label
// enforcement with LabelPolicy, and the LabelValueSets it may take its values from.
// +kubebuilder:object:generate=true
// +groupName=policy.orderly.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "policy.orderly.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &LabelPolicy{}, &LabelPolicyList{}, &LabelValueSet{}, &LabelValueSetList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
