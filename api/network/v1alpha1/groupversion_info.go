// Package v1alpha1 contains the API of the network.orderly.dev group: service
// domains. A platform team declares the DNS zones teams may use (DomainZone); a team
// registers a service under a hostname in one of them (ServiceDomain), and Orderly
// writes its DNS record, its TLS certificate and its route together.
// +kubebuilder:object:generate=true
// +groupName=network.orderly.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "network.orderly.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&DomainZone{}, &DomainZoneList{},
		&ServiceDomain{}, &ServiceDomainList{},
		&HostnameClaim{}, &HostnameClaimList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
