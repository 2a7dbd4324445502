package canary

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// An HTTPRoute that Orderly creates for a Canary carries only hostnames that the
// Canary's namespace holds: each must be claimed (a HostnameClaim, first ServiceDomain
// wins, cluster-wide) by a ServiceDomain of the Canary's own namespace that still
// exists. Otherwise the manager, which may write HTTPRoutes where the built-in edit
// role may not, would route another team's hostname for whoever may write a Canary.
// A created route also needs at least one hostname: a route without hostnames takes
// every hostname of the listeners it attaches to. Which Gateways it may attach to
// (parentRefs) is left to each Gateway's allowedRoutes, which the Gateway's owner
// sets. Routes the Canary names without create are the user's: they are not checked.

// Reasons of a created route whose hostnames the namespace does not hold.
const (
	reasonHostnameRequired   = "HostnameRequired"
	reasonHostnameNotClaimed = "HostnameNotClaimed"
)

// claimIndex indexes Canaries by each hostname of the HTTPRoute they create, so that
// a HostnameClaim made or released brings back the Canaries that name its hostname.
const claimIndex = "spec.traffic.httpRoute.createdHostnames"

func indexClaims(o client.Object) []string {
	c, ok := o.(*deliveryv1alpha1.Canary)
	if !ok || c.Spec.Traffic.HTTPRoute == nil || !c.Spec.Traffic.HTTPRoute.Create {
		return nil
	}
	return slices.Clone(c.Spec.Traffic.HTTPRoute.Hostnames)
}

// canariesForClaim maps a HostnameClaim to the Canaries, in any namespace, whose
// created route names its hostname.
func (r *Reconciler) canariesForClaim(ctx context.Context, o client.Object) []reconcile.Request {
	var list deliveryv1alpha1.CanaryList
	if err := r.List(ctx, &list, client.MatchingFields{claimIndex: o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "Listing Canaries for a HostnameClaim", "hostname", o.GetName())
		return nil
	}
	return kit.Requests(list.Items)
}

// holding is what was read of one hostname's claim.
type holding struct {
	// claimed: a HostnameClaim exists; holder is the ServiceDomain it names.
	claimed bool
	holder  networkv1alpha1.ClaimHolder
	// holderExists: that ServiceDomain exists with the claim's UID.
	holderExists bool
}

// hostnameRefusal says why a created route may not carry the Canary's hostnames:
// reason and message, "" when it may. held are the hostnames the namespace holds, in
// the Canary's order: what a route Orderly created earlier may keep. Pure.
func hostnameRefusal(c *deliveryv1alpha1.Canary, holdings map[string]holding) (reason, message string, held []string) {
	h := c.Spec.Traffic.HTTPRoute
	if len(h.Hostnames) == 0 {
		return reasonHostnameRequired, fmt.Sprintf("HTTPRoute %s would have no hostnames, and a route without hostnames takes every hostname of its Gateway listeners: "+
			"list in spec.traffic.httpRoute.hostnames the hostnames it serves, each claimed by a ServiceDomain in namespace %s", h.Name, c.Namespace), nil
	}
	var refused []string
	for _, host := range h.Hostnames {
		hd := holdings[host]
		switch {
		case len(validation.IsDNS1123Subdomain(host)) > 0:
			refused = append(refused, fmt.Sprintf("%s is not a hostname a ServiceDomain can claim (a lower-case DNS name, no wildcard)", host))
		case !hd.claimed:
			refused = append(refused, fmt.Sprintf("%s is not claimed: create a ServiceDomain for it in namespace %s", host, c.Namespace))
		case hd.holder.Namespace != c.Namespace:
			// The holder is another team's: it is not named here.
			refused = append(refused, fmt.Sprintf("%s is held by a ServiceDomain of another namespace", host))
		case !hd.holderExists:
			refused = append(refused, fmt.Sprintf("%s is claimed for ServiceDomain %s, which no longer exists: create a ServiceDomain for it in namespace %s", host, hd.holder.Name, c.Namespace))
		default:
			held = append(held, host)
		}
	}
	if len(refused) == 0 {
		return "", "", held
	}
	return reasonHostnameNotClaimed, fmt.Sprintf("Orderly creates HTTPRoute %s only with hostnames that a ServiceDomain in namespace %s holds: %s",
		h.Name, c.Namespace, strings.Join(refused, "; ")), held
}

// readHoldings reads the claim of each hostname of the Canary's created route and,
// where the claim names the Canary's namespace, whether its ServiceDomain exists.
// Claims come from the cache (they are watched); the ServiceDomain from the API server.
func (r *Reconciler) readHoldings(ctx context.Context, c *deliveryv1alpha1.Canary) (map[string]holding, error) {
	out := map[string]holding{}
	for _, host := range c.Spec.Traffic.HTTPRoute.Hostnames {
		if len(validation.IsDNS1123Subdomain(host)) > 0 {
			continue // no claim can be named after it
		}
		var claim networkv1alpha1.HostnameClaim
		err := r.Get(ctx, client.ObjectKey{Name: host}, &claim)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("reading the HostnameClaim of %s: %w", host, err)
		}
		hd := holding{claimed: true, holder: claim.Spec.Holder}
		if hd.holder.Namespace == c.Namespace {
			var sd networkv1alpha1.ServiceDomain
			err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: hd.holder.Name}, &sd)
			switch {
			case err == nil:
				hd.holderExists = sd.UID == types.UID(hd.holder.UID)
			case !apierrors.IsNotFound(err):
				return nil, fmt.Errorf("reading ServiceDomain %s: %w", hd.holder.Name, err)
			}
		}
		out[host] = hd
	}
	return out, nil
}

// withdrawHostnames takes off a route Orderly created the hostnames its namespace no
// longer holds (a ServiceDomain deleted, its claim taken by another team), and
// detaches the route from every Gateway when none is left: without hostnames it
// would take all of its listeners'. It writes nothing when the route carries none
// of them.
func withdrawHostnames(u *unstructured.Unstructured, held []string) bool {
	have, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "hostnames")
	keep := slices.DeleteFunc(slices.Clone(have), func(h string) bool { return !slices.Contains(held, h) })
	parents, _, _ := unstructured.NestedSlice(u.Object, "spec", "parentRefs")
	switch {
	case len(keep) > 0 && len(keep) == len(have):
		return false
	case len(keep) > 0:
		_ = unstructured.SetNestedStringSlice(u.Object, keep, "spec", "hostnames")
		return true
	case len(parents) == 0:
		return false // detached already
	}
	unstructured.RemoveNestedField(u.Object, "spec", "parentRefs")
	return true
}
