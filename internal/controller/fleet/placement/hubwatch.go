package placement

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// A change to an object on the hub wakes only the policies whose resource selectors
// name it or whose label selector matches it (before or after the change), found
// through an index of the policies by "kind/name" and "kind/*": a namespace with a
// thousand policies does not reconcile all of them for every edit in it.

// selectorIndex indexes PlacementPolicies by the objects their resource selectors
// pick: "Kind/name" for a named object, "Kind/*" for a label selector.
const selectorIndex = "fleet.orderly.dev/selects"

func selectorKeys(o client.Object) []string {
	pp, ok := o.(*fleetv1alpha1.PlacementPolicy)
	if !ok {
		return nil
	}
	keys := make([]string, 0, len(pp.Spec.ResourceSelectors))
	for _, s := range pp.Spec.ResourceSelectors {
		name := s.Name
		if name == "" {
			name = "*"
		}
		keys = append(keys, s.Kind+"/"+name)
	}
	return keys
}

func indexPolicies(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &fleetv1alpha1.PlacementPolicy{}, selectorIndex, selectorKeys); err != nil {
		return fmt.Errorf("indexing PlacementPolicies by what they select: %w", err)
	}
	return nil
}

// selecting is the event handler of one placeable kind on the hub.
func (r *Reconciler) selecting(kind string) handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) { r.enqueueSelecting(ctx, q, kind, e.Object) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			r.enqueueSelecting(ctx, q, kind, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc:  func(ctx context.Context, e event.DeleteEvent, q queue) { r.enqueueSelecting(ctx, q, kind, e.Object) },
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q queue) { r.enqueueSelecting(ctx, q, kind, e.Object) },
	}
}

// enqueueSelecting queues the policies in the objects' namespace that select any of
// them: by name, or by a label selector matching the object's labels (the old
// labels too, so that a policy an object leaves lets go of it).
func (r *Reconciler) enqueueSelecting(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], kind string, objs ...client.Object) {
	if len(objs) == 0 || objs[0] == nil {
		return
	}
	o := objs[0]
	var named, bySelector fleetv1alpha1.PlacementPolicyList
	if err := r.List(ctx, &named, client.InNamespace(o.GetNamespace()), client.MatchingFields{selectorIndex: kind + "/" + o.GetName()}); err != nil {
		return
	}
	for _, req := range kit.Requests(named.Items) {
		q.Add(req)
	}
	if err := r.List(ctx, &bySelector, client.InNamespace(o.GetNamespace()), client.MatchingFields{selectorIndex: kind + "/*"}); err != nil {
		return
	}
	for i := range bySelector.Items {
		pp := &bySelector.Items[i]
		if selectsAny(pp, kind, objs) {
			q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pp)})
		}
	}
}

// selectsAny says whether one of pp's label selectors of kind matches one of objs.
// A selector that does not parse matches everything: the reconcile reports it.
func selectsAny(pp *fleetv1alpha1.PlacementPolicy, kind string, objs []client.Object) bool {
	for _, s := range pp.Spec.ResourceSelectors {
		if s.Kind != kind || s.Name != "" {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(s.LabelSelector)
		if err != nil {
			return true
		}
		for _, o := range objs {
			if o != nil && sel.Matches(k8slabels.Set(o.GetLabels())) {
				return true
			}
		}
	}
	return false
}

// memberResults is the handler of the members' results (a sync that changed what
// the policy's status says): they queue the policy behind changes on the hub, which
// a status refresh must not delay.
func memberResults() handler.EventHandler {
	return handler.Funcs{GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)}
		if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, req)
			return
		}
		q.Add(req)
	}}
}

// newHubCache is a cache of the metadata (without managed fields) of every Service
// and Secret on the hub; it runs with the manager. The manager's cache holds those
// kinds only as other controllers narrowed them (Orderly's Services for Canary,
// DevDatabase connection Secrets), and a metadata watch there would share that
// narrowing. A Secret's metadata carries its resourceVersion, so a change of its data
// is seen too, without its data ever being held.
func newHubCache(mgr ctrl.Manager) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultTransform: cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, fmt.Errorf("building the cache of the hub's Services and Secrets: %w", err)
	}
	return c, mgr.Add(c)
}

// hubObject is an empty metadata-only object of a core kind, for the hub cache.
func hubObject(kind string) *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	return o
}
