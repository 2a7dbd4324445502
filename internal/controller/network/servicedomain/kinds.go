package servicedomain

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
)

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

// ownChild finds what stands at sd's name in sd's namespace for kind gk, which may
// not be installed: the served version, and the object there (nil when there is
// none). ok is false when the part cannot go on, with the part told why: the kind is
// not served (missingReason, missingMessage), the read failed (err is returned, to
// retry), or an object that is not sd's holds the name (Orderly never takes it over).
func (r *Reconciler) ownChild(ctx context.Context, sd *networkv1alpha1.ServiceDomain, gk schema.GroupKind, p *part,
	missingReason, missingMessage string) (gvk schema.GroupVersionKind, existing *unstructured.Unstructured, ok bool, err error) {
	version, err := r.kinds.Version(gk)
	if err != nil {
		p.fail("DiscoveryFailed", err.Error())
		return gvk, nil, false, err
	}
	if version == "" {
		p.wait(missingReason, missingMessage, r.watch.waitFor(ctx, gk, sd))
		return gvk, nil, false, nil
	}
	gvk = gk.WithVersion(version)
	key := client.ObjectKey{Namespace: sd.Namespace, Name: sd.Name}
	existing, fromCache, err := r.watch.get(ctx, r.APIReader, gvk, key)
	if fromCache && apierrors.IsNotFound(err) {
		// The cache holds only objects labelled as a ServiceDomain's: one of the
		// same name without the label is found on the API server alone.
		err = r.APIReader.Get(ctx, key, existing)
	}
	switch {
	case apierrors.IsNotFound(err):
		return gvk, nil, true, nil
	case err != nil:
		// Perhaps the CRD went away: ask again next time (the CRD watch stops the
		// kind's watch when it did).
		r.kinds.Forget(gk)
		p.fail(gk.Kind+"ReadFailed", err.Error())
		return gvk, nil, false, err
	case !ownedBy(existing, sd):
		p.fail("Conflict", fmt.Sprintf("%s %s exists in namespace %s and is not this ServiceDomain's; Orderly does not take it over: rename or delete it", gk.Kind, sd.Name, sd.Namespace))
		return gvk, nil, false, nil
	}
	return gvk, existing, true, nil
}
