package tenant

import (
	"context"
	"fmt"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

// The kinds of spec.resources are whatever the platform allows, known only once a
// Tenant names them, so they are watched from the first reconcile that applies one,
// by metadata only, in two caches of their own:
//
//   - copies: objects labelled with a spec.resources entry and Orderly's managed-by
//     label. A hand edit (a change of what anyone set, seen in the managed fields) or
//     a deletion brings their Tenant back at once, not at the next resync;
//   - sources: objects labelled tenancy.orderly.dev/shareable=true. Any change of one,
//     and its owner removing the label (it leaves the selection), brings back every
//     Tenant that copies it, by name or by a selector in its namespace.
//
// A watch needs list and watch on the kind across namespaces, which the platform's
// allow-list may not grant: the manager asks first (SelfSubjectAccessReview) and,
// refused, relies on the resync (ResourcesResync) and asks again later.

// watchAskAgain is how long a refused list/watch is trusted before asking again.
const watchAskAgain = 5 * time.Minute

type watchRole int

const (
	watchCopies watchRole = iota
	watchSources
)

type watchKey struct {
	gvk  schema.GroupVersionKind
	role watchRole
}

// resourceWatches starts and remembers the watches on spec.resources kinds.
type resourceWatches struct {
	copies, sources cache.Cache
	ctrl            controller.Controller
	client          client.Client
	owner           handler.EventHandler
	// copying maps a shareable object of a kind to the Tenants that copy it.
	copying func(schema.GroupKind) handler.EventHandler

	mu      sync.Mutex
	started map[watchKey]bool
	refused map[watchKey]time.Time
}

// newResourceWatches builds the two caches (they run with the manager) for the
// controller c.
func (r *Reconciler) newResourceWatches(mgr ctrl.Manager, c controller.Controller) (*resourceWatches, error) {
	newCache := func(sel k8slabels.Selector, transform toolscache.TransformFunc) (cache.Cache, error) {
		cc, err := cache.New(mgr.GetConfig(), cache.Options{
			HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
			DefaultLabelSelector: sel, DefaultTransform: transform,
		})
		if err != nil {
			return nil, err
		}
		return cc, mgr.Add(cc)
	}
	entry, err := k8slabels.NewRequirement(tenancyv1alpha1.ResourceLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	managed, err := k8slabels.NewRequirement(labels.ManagedBy, selection.Equals, []string{labels.ManagedByValue})
	if err != nil {
		return nil, err
	}
	copies, err := newCache(k8slabels.NewSelector().Add(*entry, *managed), childMetadata)
	if err != nil {
		return nil, fmt.Errorf("building the cache of spec.resources copies: %w", err)
	}
	sources, err := newCache(k8slabels.SelectorFromSet(k8slabels.Set{tenancyv1alpha1.ShareableLabel: "true"}), cache.TransformStripManagedFields())
	if err != nil {
		return nil, fmt.Errorf("building the cache of shareable sources: %w", err)
	}
	return &resourceWatches{
		copies: copies, sources: sources, ctrl: c, client: mgr.GetClient(),
		owner: handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &tenancyv1alpha1.Tenant{}, handler.OnlyControllerOwner()),
		copying: func(gk schema.GroupKind) handler.EventHandler {
			return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return r.tenantsCopying(ctx, gk, o)
			})
		},
		started: map[watchKey]bool{}, refused: map[watchKey]time.Time{},
	}, nil
}

// ensure starts the watch of role on gvk (resource names its resource) once the
// manager may list and watch it; a refusal is only logged.
func (w *resourceWatches) ensure(ctx context.Context, gvk schema.GroupVersionKind, resource schema.GroupVersionResource, role watchRole) {
	if w == nil {
		return
	}
	key := watchKey{gvk: gvk, role: role}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started[key] || time.Since(w.refused[key]) < watchAskAgain {
		return
	}
	allowed, err := w.mayListAndWatch(ctx, resource)
	if err != nil || !allowed {
		w.refused[key] = time.Now()
		log.FromContext(ctx).Info("Not watching a spec.resources kind: the manager may not list and watch it in every namespace; hand edits are repaired at the resync",
			"kind", gvk.Kind, "resource", resource.GroupResource().String(), "error", fmt.Sprint(err))
		return
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	var src source.Source
	if role == watchSources {
		src = source.Kind(w.sources, client.Object(obj), w.copying(gvk.GroupKind()))
	} else {
		src = source.Kind(w.copies, client.Object(obj), w.owner, ownedChanged)
	}
	if err := w.ctrl.Watch(src); err != nil {
		log.FromContext(ctx).Error(err, "Watching a spec.resources kind", "kind", gvk.Kind)
		return
	}
	w.started[key] = true
}

// mayListAndWatch asks the API server whether the manager may list and watch
// resource in every namespace.
func (w *resourceWatches) mayListAndWatch(ctx context.Context, resource schema.GroupVersionResource) (bool, error) {
	for _, verb := range []string{"list", "watch"} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: resource.Group, Resource: resource.Resource, Verb: verb},
		}}
		if err := w.client.Create(ctx, review); err != nil {
			return false, err
		}
		if !review.Status.Allowed {
			return false, nil
		}
	}
	return true, nil
}

// tenantsCopying maps a shareable object of kind gk to every Tenant with an entry
// copying it: by name, or by a selector in its namespace (whether the selector
// matches is the reconcile's to judge: the object may just have left the selection).
func (r *Reconciler) tenantsCopying(ctx context.Context, gk schema.GroupKind, o client.Object) []reconcile.Request {
	var list tenancyv1alpha1.TenantList
	if err := r.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "Listing Tenants for a shared object", "kind", gk.Kind, "object", client.ObjectKeyFromObject(o))
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		for _, e := range list.Items[i].Spec.Resources {
			f := e.From
			if f == nil || f.Kind != gk.Kind || f.Namespace != o.GetNamespace() || (f.Selector == nil && f.Name != o.GetName()) {
				continue
			}
			if gv, err := schema.ParseGroupVersion(f.APIVersion); err == nil && gv.Group == gk.Group {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: list.Items[i].Name}})
				break
			}
		}
	}
	return out
}
