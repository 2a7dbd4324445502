package servicedomain

import (
	"context"
	"fmt"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// routeTarget is what the route says the record's value is: the Gateway's or the
// Ingress's addresses, and where they came from.
type routeTarget struct {
	source    string
	addresses []string
	// watched: a change of the addresses wakes the ServiceDomain.
	watched bool
}

func pathsOf(sd *networkv1alpha1.ServiceDomain) []string {
	if len(sd.Spec.Paths) == 0 {
		return []string{"/"}
	}
	return sd.Spec.Paths
}

// reconcileRoute writes sd's HTTPRoute or Ingress and observes the address it
// yields.
func (r *Reconciler) reconcileRoute(ctx context.Context, sd *networkv1alpha1.ServiceDomain, zone *networkv1alpha1.DomainZone, obs *observation) error {
	if sd.Spec.Route == networkv1alpha1.RouteIngress {
		return r.reconcileIngress(ctx, sd, zone, obs)
	}
	return r.reconcileHTTPRoute(ctx, sd, zone, obs)
}

// serviceNote is added to a ready route's message when the Service is missing.
func (r *Reconciler) routeReady(sd *networkv1alpha1.ServiceDomain, obs *observation, reason, message string) {
	if obs.serviceMissing {
		obs.route.wait("ServiceNotFound", fmt.Sprintf("%s; but Service %s does not exist in namespace %s: create it (port %d), the route sends traffic to it", message, sd.Spec.Service.Name, sd.Namespace, sd.Spec.Service.Port), obs.serviceWatched)
		return
	}
	obs.route.ok(reason, message)
}

func (r *Reconciler) reconcileHTTPRoute(ctx context.Context, sd *networkv1alpha1.ServiceDomain, zone *networkv1alpha1.DomainZone, obs *observation) error {
	obs.routeKind, obs.routeName = "HTTPRoute", sd.Name
	gw := zone.Spec.Route.Gateway
	if gw == nil {
		obs.route.fail("ZoneHasNoGateway", fmt.Sprintf("DomainZone %s names no gateway; use route: Ingress (it has ingress class %q) or ask a platform admin to add a gateway", zone.Name, zone.Spec.Route.IngressClassName))
		return nil
	}
	gvk, existing, ok, err := r.ownChild(ctx, sd, httpRouteKind, &obs.route, "GatewayAPIMissing",
		"the Gateway API CRDs (gateway.networking.k8s.io HTTPRoute) are not installed; install them (standard channel) and this ServiceDomain goes on by itself")
	if !ok {
		return err
	}
	parent := map[string]any{"group": gatewayKind.Group, "kind": "Gateway", "name": gw.Name, "namespace": gw.Namespace}
	if gw.SectionName != "" {
		parent["sectionName"] = gw.SectionName
	}
	var matches []any
	for _, p := range pathsOf(sd) {
		matches = append(matches, map[string]any{"path": map[string]any{"type": "PathPrefix", "value": p}})
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"parentRefs": []any{parent},
			"hostnames":  []any{sd.Spec.Hostname},
			"rules": []any{map[string]any{
				"matches":     matches,
				"backendRefs": []any{map[string]any{"name": sd.Spec.Service.Name, "port": int64(sd.Spec.Service.Port)}},
			}},
		},
	}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(sd.Namespace)
	u.SetName(sd.Name)
	u.SetLabels(childLabels(sd))
	u.SetOwnerReferences([]metav1.OwnerReference{ownerRef(sd)})
	if err := r.apply(ctx, u); err != nil {
		obs.route.fail("RouteWriteFailed", err.Error())
		return err
	}

	// The Gateway: that it exists, and its addresses.
	gwVersion, err := r.kinds.Version(gatewayKind)
	if err != nil {
		obs.route.fail("GatewayAPIMissing", "the Gateway kind is not served; install the Gateway API CRDs")
		return err
	}
	if gwVersion == "" {
		obs.route.wait("GatewayAPIMissing", "the Gateway kind is not served; install the Gateway API CRDs", r.watch.waitFor(ctx, gatewayKind, sd))
		return nil
	}
	g, _, err := r.watch.get(ctx, r.APIReader, gatewayKind.WithVersion(gwVersion), client.ObjectKey{Namespace: gw.Namespace, Name: gw.Name})
	switch {
	case apierrors.IsNotFound(err):
		obs.route.wait("GatewayNotFound", fmt.Sprintf("HTTPRoute %s is written, but Gateway %s/%s that DomainZone %s names does not exist; a platform admin must create it (or fix the zone)", sd.Name, gw.Namespace, gw.Name, zone.Name),
			r.watch.isWatching(gatewayKind))
		return nil
	case err != nil:
		obs.route.fail("GatewayReadFailed", err.Error())
		return err
	}
	obs.routeTarget = &routeTarget{source: fmt.Sprintf("Gateway %s/%s status.addresses", gw.Namespace, gw.Name), addresses: gatewayAddresses(g),
		watched: r.watch.isWatching(gatewayKind)}

	// What the Gateway's controller says of the route, when one runs.
	if reason, msg, refused := routeRefusal(existing, gw); refused {
		obs.route.wait(reason, fmt.Sprintf("Gateway %s/%s does not accept HTTPRoute %s: %s", gw.Namespace, gw.Name, sd.Name, msg), r.watch.isWatching(httpRouteKind))
		return nil
	}
	r.routeReady(sd, obs, "Attached", fmt.Sprintf("HTTPRoute %s is attached to Gateway %s/%s", sd.Name, gw.Namespace, gw.Name))
	return nil
}

// gatewayAddresses are a Gateway's status.addresses values.
func gatewayAddresses(g *unstructured.Unstructured) []string {
	list, _, _ := unstructured.NestedSlice(g.Object, "status", "addresses")
	var out []string
	for _, a := range list {
		m, _ := a.(map[string]any)
		if v, _ := m["value"].(string); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// routeRefusal finds an Accepted=False condition that the Gateway's controller wrote
// for gw in route's status.parents.
func routeRefusal(route *unstructured.Unstructured, gw *networkv1alpha1.GatewayRef) (reason, message string, refused bool) {
	if route == nil || route.Object == nil {
		return "", "", false
	}
	parents, _, _ := unstructured.NestedSlice(route.Object, "status", "parents")
	for _, p := range parents {
		pm, _ := p.(map[string]any)
		ref, _ := pm["parentRef"].(map[string]any)
		if n, _ := ref["name"].(string); n != gw.Name {
			continue
		}
		if ns, _ := ref["namespace"].(string); ns != "" && ns != gw.Namespace {
			continue
		}
		conds, _ := pm["conditions"].([]any)
		for _, c := range conds {
			cm, _ := c.(map[string]any)
			if cm["type"] == "Accepted" && cm["status"] == "False" {
				reason, _ := cm["reason"].(string)
				msg, _ := cm["message"].(string)
				return "RouteNotAccepted", strings.TrimSpace(reason + " " + msg), true
			}
		}
	}
	return "", "", false
}

func (r *Reconciler) reconcileIngress(ctx context.Context, sd *networkv1alpha1.ServiceDomain, zone *networkv1alpha1.DomainZone, obs *observation) error {
	obs.routeKind, obs.routeName = "Ingress", sd.Name
	class := zone.Spec.Route.IngressClassName
	if class == "" {
		obs.route.fail("ZoneHasNoIngressClass", fmt.Sprintf("DomainZone %s names no ingressClassName; use route: Gateway or ask a platform admin to add one", zone.Name))
		return nil
	}
	var existing networkingv1.Ingress
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: sd.Namespace, Name: sd.Name}, &existing)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		obs.route.fail("RouteReadFailed", err.Error())
		return err
	case !ownedBy(&existing, sd):
		obs.route.fail("Conflict", fmt.Sprintf("Ingress %s exists in namespace %s and is not this ServiceDomain's; Orderly does not take it over: rename or delete it", sd.Name, sd.Namespace))
		return nil
	}
	prefix := networkingv1.PathTypePrefix
	var paths []networkingv1.HTTPIngressPath
	for _, p := range pathsOf(sd) {
		paths = append(paths, networkingv1.HTTPIngressPath{
			Path: p, PathType: &prefix,
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: sd.Spec.Service.Name, Port: networkingv1.ServiceBackendPort{Number: sd.Spec.Service.Port},
			}},
		})
	}
	ing := &networkingv1.Ingress{
		TypeMeta: metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "Ingress"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: sd.Namespace, Name: sd.Name, Labels: childLabels(sd),
			OwnerReferences: []metav1.OwnerReference{ownerRef(sd)},
		},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To(class),
			Rules: []networkingv1.IngressRule{{
				Host:             sd.Spec.Hostname,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}},
			}},
		},
	}
	if wantsCertificate(sd, zone) {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{sd.Spec.Hostname}, SecretName: secretName(sd)}}
	}
	if err := kit.Apply(ctx, r.Client, ing); err != nil {
		obs.route.fail("RouteWriteFailed", err.Error())
		return err
	}
	var addrs []string
	for _, lb := range existing.Status.LoadBalancer.Ingress {
		switch {
		case lb.IP != "":
			addrs = append(addrs, lb.IP)
		case lb.Hostname != "":
			addrs = append(addrs, lb.Hostname)
		}
	}
	obs.routeTarget = &routeTarget{source: fmt.Sprintf("Ingress %s status.loadBalancer", sd.Name), addresses: addrs,
		watched: r.watch != nil} // Orderly's Ingresses are watched from start-up
	r.routeReady(sd, obs, "Written", fmt.Sprintf("Ingress %s of class %s is written", sd.Name, class))
	return nil
}

// apply writes u with server-side apply under Orderly's field manager.
func (r *Reconciler) apply(ctx context.Context, u *unstructured.Unstructured) error {
	if err := r.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(labels.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// deleteOwned deletes the object gvk namespace/name when sd controls it, and
// nothing else.
func (r *Reconciler) deleteOwned(ctx context.Context, sd *networkv1alpha1.ServiceDomain, gvk schema.GroupVersionKind) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: sd.Namespace, Name: sd.Name}, u); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !ownedBy(u, sd) {
		return nil
	}
	uid := u.GetUID()
	if err := r.Delete(ctx, u, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s: %w", gvk.Kind, sd.Name, err)
	}
	return nil
}
