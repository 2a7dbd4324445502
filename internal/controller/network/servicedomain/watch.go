package servicedomain

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// The kinds a ServiceDomain waits on (HTTPRoutes, Certificates, DNSEndpoints it
// writes, and the Gateways its zone names) may not be served when the manager starts:
// the Gateway API or cert-manager can be installed later. So they are watched through
// kit.KindWatches, from the first reconcile that finds them served, and each is read
// from its watch's cache instead of the API server; a kind that is not served is
// waited for through the kit's CRD watch, not polled.
//
//   - What Orderly writes is held in a view of its own that lists only objects
//     labelled with a ServiceDomain's name and Orderly's managed-by label: one
//     HTTPRoute, Certificate and DNSEndpoint per ServiceDomain, never anyone else's.
//     An object absent from it is still looked up on the API server before one is
//     written, since an object of the same name that is not Orderly's does not
//     carry the label.
//   - Gateways are the platform's: a view holds them whole (a cluster has few), and
//     only a change of their addresses wakes the ServiceDomains of the zones that
//     name them (a Gateway's status also counts attached routes, which changes with
//     every new route).
//   - Services are the teams': a ServiceDomain only needs to know whether its Service
//     exists, so a cache of their own holds every Service's name and nothing else, and
//     only a Service's creation or deletion wakes the ServiceDomains that name it.
//     (The manager's cache cannot: it holds only Orderly's Services, for Canary, and a
//     metadata watch there would share that selection.)

// cacheReadTimeout bounds a read from a watch's cache whose first list has not
// finished (RBAC missing, a CRD just removed): the read falls back to the API server.
const cacheReadTimeout = 5 * time.Second

// watchedRecheck is how soon a ServiceDomain that waits on something a running watch
// reports is looked at again anyway, in case an event was missed.
const watchedRecheck = 2 * time.Minute

// Views of kit.KindWatches.
const (
	childrenView = "children"
	gatewaysView = "gateways"
)

// watches starts the watches on kinds found served at run time and reads from them.
type watches struct {
	kinds *kit.KindWatches
	// services holds the names of all Services.
	services cache.Cache
	owner    handler.EventHandler
	gateways handler.EventHandler

	mu       sync.Mutex
	watching map[schema.GroupKind]bool
}

// newKindWatches is the kit's watches of the kinds found at run time: Orderly's
// children by their labels, Gateways whole. Both run with the manager.
func newKindWatches(mgr ctrl.Manager, clk clock.PassiveClock, kinds *kit.KindDetector) (*kit.KindWatches, error) {
	sdLabel, err := k8slabels.NewRequirement(networkv1alpha1.ServiceDomainLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	managed, err := k8slabels.NewRequirement(labels.ManagedBy, selection.Equals, []string{labels.ManagedByValue})
	if err != nil {
		return nil, err
	}
	kw, err := kit.NewKindWatches(mgr, kit.KindWatchOptions{Clock: clk, Kinds: kinds, Views: []kit.View{
		{Name: childrenView, Selector: k8slabels.NewSelector().Add(*sdLabel, *managed), Whole: true},
		{Name: gatewaysView, Whole: true},
	}})
	if err != nil {
		return nil, fmt.Errorf("building the watches of ServiceDomains' routes, certificates and Gateways: %w", err)
	}
	return kw, nil
}

// serviceObject is an empty Service for the services cache (kit.NewNameCache: every
// Service's name and namespace, nothing else).
func serviceObject() *metav1.PartialObjectMetadata {
	return kit.MetadataOf(corev1.SchemeGroupVersion.WithKind("Service"))
}

// serviceExists says whether Service key exists: from the services cache, or from
// reader when the cache does not answer in time. watched is true when the answer
// came from the cache, whose watch reports the Service's creation.
func (w *watches) serviceExists(ctx context.Context, reader client.Reader, key client.ObjectKey) (exists, watched bool, err error) {
	if w != nil {
		cctx, cancel := context.WithTimeout(ctx, cacheReadTimeout)
		err := w.services.Get(cctx, key, serviceObject())
		cancel()
		if err == nil || apierrors.IsNotFound(err) {
			return err == nil, true, nil
		}
		log.FromContext(ctx).V(1).Info("The Services cache did not answer; reading from the API server", "error", err.Error())
	}
	err = reader.Get(ctx, key, serviceObject())
	if apierrors.IsNotFound(err) {
		return false, false, nil
	}
	return err == nil, false, err
}

// createdOrDeleted lets through creations and deletions only.
func createdOrDeleted() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }, GenericFunc: func(event.GenericEvent) bool { return false }}
}

// domainsOfService maps a Service to the ServiceDomains of its namespace that name it.
func (r *Reconciler) domainsOfService(ctx context.Context, o client.Object) []reconcile.Request {
	var list networkv1alpha1.ServiceDomainList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "Listing ServiceDomains for Service", "service", client.ObjectKeyFromObject(o))
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Spec.Service.Name == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// isWatching is true once gk's watch runs.
func (w *watches) isWatching(gk schema.GroupKind) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.watching[gk]
}

// ensure makes sure gvk is watched, and says how it stands.
func (w *watches) ensure(ctx context.Context, gvk schema.GroupVersionKind) kit.WatchState {
	var st kit.WatchState
	if gvk.GroupKind() == gatewayKind {
		st = w.kinds.Watch(ctx, gatewaysView, gvk, w.gateways, addressesChanged())
	} else {
		st = w.kinds.Watch(ctx, childrenView, gvk, w.owner, childChanged())
	}
	w.mu.Lock()
	w.watching[gvk.GroupKind()] = st.Watching
	w.mu.Unlock()
	return st
}

// viewOf is the view gk is watched through.
func viewOf(gk schema.GroupKind) string {
	if gk == gatewayKind {
		return gatewaysView
	}
	return childrenView
}

// get reads namespace/name of gvk from its watch's cache; from reader when the kind
// is not watched, or its cache has not listed it yet. fromCache is true when the
// cache answered: for a kind of the children view, an object it does not hold must
// still be asked of the API server before writing.
func (w *watches) get(ctx context.Context, reader client.Reader, gvk schema.GroupVersionKind, key client.ObjectKey) (obj *unstructured.Unstructured, fromCache bool, err error) {
	obj = &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if w != nil {
		if st := w.ensure(ctx, gvk); st.Synced {
			err := w.kinds.Reader(viewOf(gvk.GroupKind())).Get(ctx, key, obj)
			if err == nil || apierrors.IsNotFound(err) {
				return obj, true, err
			}
			log.FromContext(ctx).V(1).Info("The watch's cache did not answer; reading from the API server", "kind", gvk.Kind, "error", err.Error())
		}
	}
	return obj, false, reader.Get(ctx, key, obj)
}

// waitFor registers sd as waiting for kind gk to be served; it says whether its
// CRD's appearance is watched.
func (w *watches) waitFor(ctx context.Context, gk schema.GroupKind, sd *networkv1alpha1.ServiceDomain) bool {
	if w == nil {
		return false
	}
	return w.kinds.WaitForKind(ctx, gk, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(sd)})
}

// childChanged lets through what a ServiceDomain must look at again: a change of
// status (cert-manager issued, a Gateway's controller accepted or refused a route),
// of spec (someone edited it: Orderly repairs it), of labels or owners, and a
// deletion. Creations are Orderly's own writes.
func childChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, okOld := e.ObjectOld.(*unstructured.Unstructured)
			n, okNew := e.ObjectNew.(*unstructured.Unstructured)
			if !okOld || !okNew {
				return true
			}
			return o.GetGeneration() != n.GetGeneration() ||
				!equality.Semantic.DeepEqual(o.Object["status"], n.Object["status"]) ||
				!equality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels()) ||
				!equality.Semantic.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences())
		},
	}
}

// addressesChanged lets through a Gateway's creation, deletion, and a change of its
// addresses (the records' values).
func addressesChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, okOld := e.ObjectOld.(*unstructured.Unstructured)
			n, okNew := e.ObjectNew.(*unstructured.Unstructured)
			return !okOld || !okNew || !slices.Equal(gatewayAddresses(o), gatewayAddresses(n))
		},
	}
}

// domainsOfGateway maps a Gateway to the ServiceDomains of every zone that routes
// through it.
func (r *Reconciler) domainsOfGateway(ctx context.Context, o client.Object) []reconcile.Request {
	var zones networkv1alpha1.DomainZoneList
	if err := r.List(ctx, &zones); err != nil {
		log.FromContext(ctx).Error(err, "Listing DomainZones for Gateway", "gateway", client.ObjectKeyFromObject(o))
		return nil
	}
	var out []reconcile.Request
	for i := range zones.Items {
		gw := zones.Items[i].Spec.Route.Gateway
		if gw != nil && gw.Name == o.GetName() && gw.Namespace == o.GetNamespace() {
			out = append(out, r.domainsOfZone(ctx, &zones.Items[i])...)
		}
	}
	return out
}
