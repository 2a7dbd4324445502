package canary

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// The route kinds (HTTPRoute, VirtualService) may not be installed when the manager
// starts, so they are watched from the first Canary that uses one, through
// kit.KindWatches, by metadata only: the routes of the whole cluster are users', and
// a Canary reads its own from the API server when it is reconciled. A route's
// creation, deletion or new spec (generation) brings back the Canaries that name it
// (routeIndex); a Canary whose route kind is not installed waits for its CRD through
// the CRD watch. Only where a watch cannot be had (the manager may not list and watch
// the kind, or CRDs) does a Canary look at its routes again every trafficRecheck.

// routesView is the view of kit.KindWatches the route kinds are watched through.
const routesView = "routes"

// routeIndex indexes Canaries by "<namespace>/<kind>/<name>" of each route they name.
const routeIndex = "spec.traffic.routes"

func routeKey(namespace, kind, name string) string { return namespace + "/" + kind + "/" + name }

func indexRoutes(o client.Object) []string {
	c, ok := o.(*deliveryv1alpha1.Canary)
	if !ok {
		return nil
	}
	var keys []string
	for _, rt := range routersOf(c) {
		keys = append(keys, routeKey(c.Namespace, rt.kind, rt.name))
	}
	return keys
}

// canariesForRoute maps a route to the Canaries that name it.
func (r *Reconciler) canariesForRoute(ctx context.Context, o client.Object) []reconcile.Request {
	kind := o.GetObjectKind().GroupVersionKind().Kind
	var list deliveryv1alpha1.CanaryList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{routeIndex: routeKey(o.GetNamespace(), kind, o.GetName())}); err != nil {
		log.FromContext(ctx).Error(err, "Listing Canaries for a route", "kind", kind, "route", o.GetName())
		return nil
	}
	return kit.Requests(list.Items)
}

// watchRoutes makes sure the routes of gvk are watched; it says whether they are.
func (r *Reconciler) watchRoutes(ctx context.Context, gvk schema.GroupVersionKind) bool {
	if r.watches == nil {
		return false
	}
	st := r.watches.Watch(ctx, routesView, gvk, handler.EnqueueRequestsFromMapFunc(r.canariesForRoute), predicate.GenerationChangedPredicate{})
	return st.Watching
}

// waitForKind registers c as waiting for the CRD of gk; it says whether the CRD's
// appearance is watched.
func (r *Reconciler) waitForKind(ctx context.Context, c *deliveryv1alpha1.Canary, gk schema.GroupKind) bool {
	if r.watches == nil {
		return false
	}
	return r.watches.WaitForKind(ctx, gk, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
}

// routesWatched says whether every route that is not ready is watched: then nothing
// needs to be looked at again until an event says so.
func routesWatched(routes []routerObservation) bool {
	for i := range routes {
		if !routes[i].ready() && !routes[i].watched {
			return false
		}
	}
	return true
}

// trafficRequeue is when a Canary whose traffic is not ready looks at its routes
// again, given plan's result: never where they are watched (plan's own trafficRecheck
// included), within trafficRecheck otherwise.
func trafficRequeue(res *result, obs *observation, routes []routerObservation) time.Duration {
	switch {
	case obs.trafficReady:
		return res.requeueAfter
	case routesWatched(routes):
		if res.reason == reasonTrafficNotReady && res.requeueAfter == trafficRecheck {
			return 0
		}
		return res.requeueAfter
	case res.requeueAfter == 0 || res.requeueAfter > trafficRecheck:
		return trafficRecheck
	}
	return res.requeueAfter
}

// reasonTrafficNotReady is plan's reason for a Canary waiting on its routes.
const reasonTrafficNotReady = "TrafficNotReady"
