// Package v1beta1 contains the beta API of the power.orderly.dev group: off-hours
// power saving with SleepSchedules. Served beside v1alpha1 with the same fields; the
// manager's conversion webhook converts between them (docs/install.md, "API
// versioning policy").
// +kubebuilder:object:generate=true
// +groupName=power.orderly.dev
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "power.orderly.dev", Version: "v1beta1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &SleepSchedule{}, &SleepScheduleList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
