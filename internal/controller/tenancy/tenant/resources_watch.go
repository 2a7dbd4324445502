package tenant

import (
	"context"
	"fmt"

	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// The kinds of spec.resources are whatever the platform allows, known only once a
// Tenant names them, so they are watched through kit.KindWatches from the first
// reconcile that applies one, by metadata only, in two views:
//
//   - copies: objects labelled with a spec.resources entry and Orderly's managed-by
//     label. A hand edit (a change of what anyone set, seen in the managed fields) or
//     a deletion brings their Tenant back at once, not at the next resync;
//   - sources: objects labelled tenancy.orderly.dev/shareable=true. Any change of one,
//     and its owner removing the label (it leaves the selection), brings back every
//     Tenant that copies it, by name or by a selector in its namespace.
//
// A watch needs list and watch on the kind across namespaces, which the platform's
// allow-list may not grant: the kit asks first (SelfSubjectAccessReview) and,
// refused, asks again after kit.DefaultRetryRefused; the entry's status says so and
// the Tenant falls back to the resync (ResourcesResync). A kind that is not served is
// waited for through the kit's CRD watch.

// Views of the resources' watches.
const (
	copiesView  = "copies"
	sourcesView = "sources"
)

type watchRole int

const (
	watchCopies watchRole = iota
	watchSources
)

// resourceWatches watches the kinds of spec.resources.
type resourceWatches struct {
	kinds *kit.KindWatches
	owner handler.EventHandler
	// copying maps a shareable object of a kind to the Tenants that copy it.
	copying func(schema.GroupKind) handler.EventHandler
}

// newResourceWatches builds the two views (they run with the manager); bind them to
// the controller with kinds.Bind.
func (r *Reconciler) newResourceWatches(mgr ctrl.Manager) (*resourceWatches, error) {
	entry, err := k8slabels.NewRequirement(tenancyv1alpha1.ResourceLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	managed, err := k8slabels.NewRequirement(labels.ManagedBy, selection.Equals, []string{labels.ManagedByValue})
	if err != nil {
		return nil, err
	}
	// Refusals are timed on the kit's clock: the Tenant controller is given none yet.
	kinds, err := kit.NewKindWatches(mgr, kit.KindWatchOptions{Views: []kit.View{
		{Name: copiesView, Selector: k8slabels.NewSelector().Add(*entry, *managed), Transform: childMetadata},
		{Name: sourcesView, Selector: k8slabels.SelectorFromSet(k8slabels.Set{tenancyv1alpha1.ShareableLabel: "true"})},
	}})
	if err != nil {
		return nil, fmt.Errorf("building the watches of spec.resources kinds: %w", err)
	}
	return &resourceWatches{
		kinds: kinds,
		owner: handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &tenancyv1alpha1.Tenant{}, handler.OnlyControllerOwner()),
		copying: func(gk schema.GroupKind) handler.EventHandler {
			return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return r.tenantsCopying(ctx, gk, o)
			})
		},
	}, nil
}

// ensure starts the watch of role on gvk once the manager may list and watch it; it
// returns why the kind is not watched, "" when it is.
func (w *resourceWatches) ensure(ctx context.Context, gvk schema.GroupVersionKind, role watchRole) string {
	if w == nil {
		return ""
	}
	var st kit.WatchState
	if role == watchSources {
		st = w.kinds.Watch(ctx, sourcesView, gvk, w.copying(gvk.GroupKind()))
	} else {
		st = w.kinds.Watch(ctx, copiesView, gvk, w.owner, ownedChanged)
	}
	return st.Problem
}

// waitFor registers t as waiting for kind gk to be served; it says whether the CRD's
// appearance is watched.
func (w *resourceWatches) waitFor(ctx context.Context, gk schema.GroupKind, t *tenancyv1alpha1.Tenant) bool {
	if w == nil {
		return false
	}
	return w.kinds.WaitForKind(ctx, gk, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(t)})
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
