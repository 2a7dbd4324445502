package servicedomain

import "k8s.io/apimachinery/pkg/runtime/schema"

// The kinds Orderly writes that are not part of Kubernetes. Whether their CRDs are
// installed is asked of the API server at run time (kit.KindDetector), so that a
// ServiceDomain reports a missing CRD in a condition, and goes on once it is
// installed, without a restart.
var (
	httpRouteKind   = schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}
	gatewayKind     = schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "Gateway"}
	certificateKind = schema.GroupKind{Group: "cert-manager.io", Kind: "Certificate"}
	dnsEndpointKind = schema.GroupKind{Group: "externaldns.k8s.io", Kind: "DNSEndpoint"}
)

// The versions Orderly writes of each, best first.
var wantedVersions = map[schema.GroupKind][]string{
	httpRouteKind:   {"v1", "v1beta1"},
	gatewayKind:     {"v1", "v1beta1"},
	certificateKind: {"v1"},
	dnsEndpointKind: {"v1alpha1"},
}
