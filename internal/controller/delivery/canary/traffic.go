package canary

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

// The route kinds Orderly writes weights to. Neither is part of Kubernetes: whether
// their CRDs are installed is asked of the API server at run time, so a Canary
// reports a missing CRD instead of the manager failing, and goes on once it is
// installed.
var (
	httpRouteKind      = schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}
	virtualServiceKind = schema.GroupKind{Group: "networking.istio.io", Kind: "VirtualService"}
)

// Kinds of RouterStatus.
const (
	kindHTTPRoute      = "HTTPRoute"
	kindVirtualService = "VirtualService"
)

// router is one route of spec.traffic.
type router struct {
	kind   string
	gk     schema.GroupKind
	name   string
	create bool
}

func routersOf(c *deliveryv1alpha1.Canary) []router {
	var out []router
	if h := c.Spec.Traffic.HTTPRoute; h != nil {
		out = append(out, router{kind: kindHTTPRoute, gk: httpRouteKind, name: h.Name, create: h.Create})
	}
	if v := c.Spec.Traffic.VirtualService; v != nil {
		out = append(out, router{kind: kindVirtualService, gk: virtualServiceKind, name: v.Name})
	}
	return out
}

// routerObservation is what was seen of one route.
type routerObservation struct {
	router
	version string
	status  deliveryv1alpha1.RouterStatus
	// obj is the route; nil when it does not exist (yet).
	obj *unstructured.Unstructured
	// weight is the canary's weight in it.
	weight int32
	// problem says why traffic cannot be written here (reason, message); empty when
	// it can.
	reason, message string
	// watched: what would make the route ready (its CRD installed, the route created
	// or edited) brings the Canary back through a watch.
	watched bool
}

func (o *routerObservation) ready() bool { return o.reason == "" }

// observeRouter reads one route, straight from the API server (a weight is written
// over what was read, under its resourceVersion). The route kinds are watched by
// metadata, from the first Canary that uses one (kit.KindWatches): a route created,
// edited or deleted brings its Canaries back; a kind whose CRD is missing is waited
// for through the CRD watch.
func (r *Reconciler) observeRouter(ctx context.Context, c *deliveryv1alpha1.Canary, rt router) (routerObservation, error) {
	o := routerObservation{router: rt, status: deliveryv1alpha1.RouterStatus{Kind: rt.kind, Name: rt.name}}
	version, err := r.kinds.Version(rt.gk)
	if err != nil {
		return o, err
	}
	if version == "" {
		o.reason = rt.kind + "CRDMissing"
		o.message = fmt.Sprintf("the %s CRD (%s) is not installed in the cluster", rt.kind, rt.gk.Group)
		o.watched = r.waitForKind(ctx, c, rt.gk)
		return o, nil
	}
	o.version = version
	o.status.Installed = true
	o.watched = r.watchRoutes(ctx, rt.gk.WithVersion(version))
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(rt.gk.WithVersion(version))
	err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: rt.name}, u)
	switch {
	case meta.IsNoMatchError(err):
		r.kinds.Forget(rt.gk)
		o.status.Installed = false
		o.reason, o.message = rt.kind+"CRDMissing", fmt.Sprintf("the %s CRD (%s) is not installed in the cluster", rt.kind, rt.gk.Group)
		o.watched = r.waitForKind(ctx, c, rt.gk)
		return o, nil
	case apierrors.IsNotFound(err):
		if !rt.create {
			o.reason, o.message = "RouteNotFound", fmt.Sprintf("%s %s does not exist in namespace %s: create it, or set create: true", rt.kind, rt.name, c.Namespace)
			return o, nil
		}
		// Created only with hostnames the namespace holds.
		return o, r.checkHostnames(ctx, c, &o)
	case err != nil:
		return o, fmt.Errorf("reading %s %s: %w", rt.kind, rt.name, err)
	}
	o.obj = u
	o.status.Found = true
	if rt.create && !metav1.IsControlledBy(u, c) {
		o.reason, o.message = "RouteConflict", fmt.Sprintf("%s %s exists and was not created by this Canary: Orderly does not take it over; remove create: true to have Orderly set weights in it, or choose another name", rt.kind, rt.name)
		return o, nil
	}
	primary, canary := serviceNames(c)
	var found bool
	switch rt.kind {
	case kindHTTPRoute:
		o.weight, found = httpRouteWeight(u, c.Namespace, primary, canary)
	case kindVirtualService:
		o.weight, found = virtualServiceWeight(u, c.Namespace, primary, canary, c.Spec.Traffic.VirtualService.Routes)
	}
	o.status.CanaryWeight = &o.weight
	if !found && !rt.create {
		o.reason = "RouteNotReferencing"
		o.message = fmt.Sprintf("%s %s sends no traffic to Service %s: point a rule at it, and Orderly adds %s next to it", rt.kind, rt.name, primary, canary)
		if rt.kind == kindVirtualService {
			o.message = fmt.Sprintf("VirtualService %s sends no traffic to Service %s in the http routes Orderly shifts (%s): point one at it, and Orderly adds %s next to it when the first step starts",
				rt.name, primary, shiftedRoutes(c.Spec.Traffic.VirtualService.Routes), canary)
		}
	}
	if rt.create {
		// A route Orderly created keeps only hostnames the namespace still holds.
		return o, r.checkHostnames(ctx, c, &o)
	}
	return o, nil
}

// checkHostnames refuses a route Orderly creates for hostnames the Canary's
// namespace does not hold (hostnames.go): nothing is created, and a route created
// earlier loses those hostnames (or, with none left, its Gateways) at once, whether or
// not the Canary's traffic is otherwise ready.
func (r *Reconciler) checkHostnames(ctx context.Context, c *deliveryv1alpha1.Canary, o *routerObservation) error {
	holdings, err := r.readHoldings(ctx, c)
	if err != nil {
		return err
	}
	reason, message, held := hostnameRefusal(c, holdings)
	if reason == "" {
		return nil
	}
	// A claim made or released, or a new spec, brings the Canary back.
	o.reason, o.message, o.watched = reason, message, r.claimsWatched
	if o.obj == nil {
		return nil
	}
	updated := o.obj.DeepCopy()
	if !withdrawHostnames(updated, held) {
		return nil
	}
	if err := r.Update(ctx, updated, client.FieldOwner(labels.FieldManager)); err != nil {
		return fmt.Errorf("taking hostnames namespace %s does not hold off HTTPRoute %s: %w", c.Namespace, o.name, err)
	}
	o.obj = updated
	return nil
}

// writeWeight sets the canary's weight in one route (creating it when Orderly owns
// it), writing nothing when it already holds that weight. The write carries the
// route's resourceVersion: a route changed meanwhile is read again next time.
func (r *Reconciler) writeWeight(ctx context.Context, c *deliveryv1alpha1.Canary, o *routerObservation, weight int32) error {
	primary, canary := serviceNames(c)
	port := c.Spec.Service.Port
	if o.create && o.obj == nil {
		route, err := buildHTTPRoute(c, o.version, weight, r.Scheme())
		if err != nil {
			return err
		}
		if err := r.Create(ctx, route, client.FieldOwner(labels.FieldManager)); err != nil {
			return fmt.Errorf("creating HTTPRoute %s: %w", o.name, err)
		}
		o.obj, o.weight = route, weight
		o.status.Found = true
		return nil
	}
	updated := o.obj.DeepCopy()
	var changed bool
	var err error
	switch o.kind {
	case kindHTTPRoute:
		if o.create {
			changed = setHTTPRouteParents(updated, c)
		}
		var w bool
		w, err = setHTTPRouteWeights(updated, c.Namespace, primary, canary, port, weight)
		changed = changed || w
	case kindVirtualService:
		changed, err = setVirtualServiceWeights(updated, c.Namespace, primary, canary, weight, c.Spec.Traffic.VirtualService.Routes)
	}
	if err != nil || !changed {
		return err
	}
	if err := r.Update(ctx, updated, client.FieldOwner(labels.FieldManager)); err != nil {
		return fmt.Errorf("setting the canary's weight in %s %s: %w", o.kind, o.name, err)
	}
	o.obj, o.weight = updated, weight
	return nil
}

// serviceNames are the Services of the primary and the canary.
func serviceNames(c *deliveryv1alpha1.Canary) (primary, canary string) {
	return c.Spec.TargetRef.Name + "-primary", c.Spec.TargetRef.Name + "-canary"
}

// buildHTTPRoute is the HTTPRoute Orderly creates: one rule to the two Services.
func buildHTTPRoute(c *deliveryv1alpha1.Canary, version string, weight int32, scheme ownerScheme) (*unstructured.Unstructured, error) {
	primary, canary := serviceNames(c)
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"rules": []any{map[string]any{"backendRefs": []any{
				backendRef(primary, c.Spec.Service.Port, 100-weight),
				backendRef(canary, c.Spec.Service.Port, weight),
			}}},
		},
	}}
	u.SetGroupVersionKind(httpRouteKind.WithVersion(version))
	u.SetNamespace(c.Namespace)
	u.SetName(c.Spec.Traffic.HTTPRoute.Name)
	u.SetLabels(map[string]string{labels.ManagedBy: labels.ManagedByValue, deliveryv1alpha1.CanaryLabel: c.Name})
	setHTTPRouteParents(u, c)
	if err := setOwner(c, u, scheme); err != nil {
		return nil, err
	}
	return u, nil
}

func backendRef(name string, port, weight int32) map[string]any {
	return map[string]any{"name": name, "port": int64(port), "weight": int64(weight)}
}

// setHTTPRouteParents puts spec.parentRefs and spec.hostnames of a route Orderly
// created to what the Canary says, and tells whether that changed them.
func setHTTPRouteParents(u *unstructured.Unstructured, c *deliveryv1alpha1.Canary) bool {
	h := c.Spec.Traffic.HTTPRoute
	want := make([]any, 0, len(h.ParentRefs))
	for _, p := range h.ParentRefs {
		ref := map[string]any{"group": httpRouteKind.Group, "kind": "Gateway", "name": p.Name}
		if p.Namespace != "" {
			ref["namespace"] = p.Namespace
		}
		if p.SectionName != "" {
			ref["sectionName"] = p.SectionName
		}
		want = append(want, ref)
	}
	have, _, _ := unstructured.NestedSlice(u.Object, "spec", "parentRefs")
	changed := !sameParents(have, want)
	if changed {
		_ = unstructured.SetNestedSlice(u.Object, want, "spec", "parentRefs")
	}
	wantHosts := make([]any, 0, len(h.Hostnames))
	for _, host := range h.Hostnames {
		wantHosts = append(wantHosts, host)
	}
	haveHosts, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "hostnames")
	if !slices.Equal(haveHosts, h.Hostnames) {
		changed = true
		if len(wantHosts) == 0 {
			unstructured.RemoveNestedField(u.Object, "spec", "hostnames")
		} else {
			_ = unstructured.SetNestedSlice(u.Object, wantHosts, "spec", "hostnames")
		}
	}
	return changed
}

// sameParents compares parentRefs by the fields Orderly sets (the API server fills
// in defaults of others).
func sameParents(have, want []any) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range have {
		h, _ := have[i].(map[string]any)
		w, _ := want[i].(map[string]any)
		for _, k := range []string{"name", "namespace", "sectionName"} {
			if fmt.Sprint(h[k]) != fmt.Sprint(w[k]) {
				return false
			}
		}
	}
	return true
}

// isServiceRef says whether a backendRef names Service name in namespace.
func isServiceRef(ref map[string]any, namespace, name string) bool {
	group, _ := ref["group"].(string)
	kind, _ := ref["kind"].(string)
	ns, _ := ref["namespace"].(string)
	n, _ := ref["name"].(string)
	return group == "" && (kind == "" || kind == "Service") && (ns == "" || ns == namespace) && n == name
}

func intOf(v any, dflt int64) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int32:
		return int64(x)
	case int:
		return int64(x)
	case float64:
		return int64(x)
	}
	return dflt
}

// percent is the canary's share of wp+wc, in percent.
func percent(wp, wc int64) int32 {
	if wp+wc <= 0 {
		return 0
	}
	return int32(math.Round(100 * float64(wc) / float64(wp+wc)))
}

// httpRouteWeight is the canary's weight in the rules of an HTTPRoute that send
// traffic to the primary (the highest, should they differ), and whether any does.
// A backendRef without a weight has weight 1, as Gateway API says.
func httpRouteWeight(u *unstructured.Unstructured, namespace, primary, canary string) (int32, bool) {
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	var weight int32
	found := false
	for _, rule := range rules {
		refs, _, _ := unstructured.NestedSlice(asMap(rule), "backendRefs")
		var wp, wc int64
		hasPrimary := false
		for _, ref := range refs {
			m := asMap(ref)
			switch {
			case isServiceRef(m, namespace, primary):
				hasPrimary = true
				wp += intOf(m["weight"], 1)
			case isServiceRef(m, namespace, canary):
				wc += intOf(m["weight"], 1)
			}
		}
		if hasPrimary {
			found = true
			weight = max(weight, percent(wp, wc))
		}
	}
	return weight, found
}

// setHTTPRouteWeights sets, in every rule of an HTTPRoute with a backendRef to the
// primary, the primary's weight to 100-weight and the canary's to weight, adding a
// canary backendRef (like the primary's, on port) where there is none. Other rules
// and backendRefs are left as they are.
func setHTTPRouteWeights(u *unstructured.Unstructured, namespace, primary, canary string, port, weight int32) (bool, error) {
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	changed, found := false, false
	for i, rule := range rules {
		rm := asMap(rule)
		refs, _, _ := unstructured.NestedSlice(rm, "backendRefs")
		pi, ci := -1, -1
		for j, ref := range refs {
			m := asMap(ref)
			switch {
			case isServiceRef(m, namespace, primary) && pi < 0:
				pi = j
			case isServiceRef(m, namespace, canary) && ci < 0:
				ci = j
			}
		}
		if pi < 0 {
			continue
		}
		found = true
		p := asMap(refs[pi])
		if intOf(p["weight"], 1) != int64(100-weight) {
			p["weight"] = int64(100 - weight)
			changed = true
		}
		if ci < 0 {
			ref := map[string]any{"name": canary, "weight": int64(weight)}
			for _, k := range []string{"group", "kind", "namespace", "port"} {
				if v, ok := p[k]; ok {
					ref[k] = v
				}
			}
			if _, ok := ref["port"]; !ok {
				ref["port"] = int64(port)
			}
			refs = append(refs, ref)
			changed = true
		} else if cm := asMap(refs[ci]); intOf(cm["weight"], 1) != int64(weight) {
			cm["weight"] = int64(weight)
			changed = true
		}
		rm["backendRefs"] = refs
		rules[i] = rm
	}
	if !found {
		return false, fmt.Errorf("HTTPRoute %s sends no traffic to Service %s", u.GetName(), primary)
	}
	if changed {
		if err := unstructured.SetNestedSlice(u.Object, rules, "spec", "rules"); err != nil {
			return false, err
		}
	}
	return changed, nil
}

// hostIs says whether an Istio destination host names Service name in namespace: its
// short name, name.namespace, or a name.namespace.svc[.cluster domain] form.
func hostIs(host, namespace, name string) bool {
	return host == name || host == name+"."+namespace || strings.HasPrefix(host, name+"."+namespace+".svc")
}

// canaryHost is the canary's host written like the primary's.
func canaryHost(primaryHost, primary, canary string) string {
	return canary + strings.TrimPrefix(primaryHost, primary)
}

// shiftsRoute says whether Orderly sets the weights of one http route of a
// VirtualService: one named in routes, or, when routes is empty, one that does not
// pick its requests by header or query parameter (VirtualServiceTraffic.Routes).
func shiftsRoute(route map[string]any, routes []string) bool {
	if len(routes) > 0 {
		name, _ := route["name"].(string)
		return slices.Contains(routes, name)
	}
	matches, _, _ := unstructured.NestedSlice(route, "match")
	for _, m := range matches {
		mm := asMap(m)
		if mm["headers"] != nil || mm["queryParams"] != nil || mm["withoutHeaders"] != nil {
			return false
		}
	}
	return true
}

// shiftedRoutes says which http routes of a VirtualService Orderly shifts.
func shiftedRoutes(routes []string) string {
	if len(routes) > 0 {
		return "those named in spec.traffic.virtualService.routes: " + strings.Join(routes, ", ")
	}
	return "those that do not match requests by header or query parameter"
}

// virtualServiceWeight is the canary's weight in the http routes of a
// VirtualService that Orderly shifts and that send traffic to the primary, and
// whether any does. A destination without a weight takes what the others leave of
// 100: alone, all.
func virtualServiceWeight(u *unstructured.Unstructured, namespace, primary, canary string, shifted []string) (int32, bool) {
	routes, _, _ := unstructured.NestedSlice(u.Object, "spec", "http")
	var weight int32
	found := false
	for _, route := range routes {
		if !shiftsRoute(asMap(route), shifted) {
			continue
		}
		dests, _, _ := unstructured.NestedSlice(asMap(route), "route")
		var wp, wc int64
		hasPrimary := false
		for _, d := range dests {
			m := asMap(d)
			host, _, _ := unstructured.NestedString(m, "destination", "host")
			switch {
			case hostIs(host, namespace, primary):
				hasPrimary = true
				wp += intOf(m["weight"], int64(100/len(dests)))
			case hostIs(host, namespace, canary):
				wc += intOf(m["weight"], 0)
			}
		}
		if hasPrimary {
			found = true
			weight = max(weight, percent(wp, wc))
		}
	}
	return weight, found
}

// setVirtualServiceWeights is setHTTPRouteWeights for the http routes of an Istio
// VirtualService that Orderly shifts. A route without the canary's destination gets
// one only for a weight above zero: until the first step, the VirtualService stays
// as its owner wrote it (a GitOps tool sees no drift).
func setVirtualServiceWeights(u *unstructured.Unstructured, namespace, primary, canary string, weight int32, shifted []string) (bool, error) {
	routes, _, _ := unstructured.NestedSlice(u.Object, "spec", "http")
	changed, found := false, false
	for i, route := range routes {
		rm := asMap(route)
		if !shiftsRoute(rm, shifted) {
			continue
		}
		dests, _, _ := unstructured.NestedSlice(rm, "route")
		pi, ci := -1, -1
		for j, d := range dests {
			host, _, _ := unstructured.NestedString(asMap(d), "destination", "host")
			switch {
			case hostIs(host, namespace, primary) && pi < 0:
				pi = j
			case hostIs(host, namespace, canary) && ci < 0:
				ci = j
			}
		}
		if pi < 0 {
			continue
		}
		found = true
		if ci < 0 && weight == 0 {
			continue
		}
		p := asMap(dests[pi])
		if intOf(p["weight"], -1) != int64(100-weight) {
			p["weight"] = int64(100 - weight)
			changed = true
		}
		if ci < 0 {
			d := asMap(p["destination"])
			dest := map[string]any{}
			for k, v := range d {
				dest[k] = v
			}
			host, _ := d["host"].(string)
			dest["host"] = canaryHost(host, primary, canary)
			// A subset is the primary host's (its DestinationRule), not the canary's.
			delete(dest, "subset")
			dests = append(dests, map[string]any{"destination": dest, "weight": int64(weight)})
			changed = true
		} else if cm := asMap(dests[ci]); intOf(cm["weight"], -1) != int64(weight) {
			cm["weight"] = int64(weight)
			changed = true
		}
		rm["route"] = dests
		routes[i] = rm
	}
	if !found {
		return false, fmt.Errorf("VirtualService %s sends no traffic to Service %s in the routes Orderly shifts", u.GetName(), primary)
	}
	if changed {
		if err := unstructured.SetNestedSlice(u.Object, routes, "spec", "http"); err != nil {
			return false, err
		}
	}
	return changed, nil
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	if m == nil {
		return map[string]any{}
	}
	return m
}
