package sleepschedule

import (
	"cmp"
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

// kindsView is the view of kit.KindWatches the kinds of targets.kinds are watched
// through: every object of the kind, metadata only (the whole objects are read from
// the API server when a schedule is reconciled).
const kindsView = "kinds"

// watchKind makes sure ek's objects are watched, their events mapped to the schedules
// they concern as a workload's are; it says whether they are.
func (r *Reconciler) watchKind(ctx context.Context, ek *extraKind) bool {
	if r.watches == nil {
		return false
	}
	return r.watches.Watch(ctx, kindsView, ek.gvk(), delayed{r.forWorkload}, kindObjectChanged()).Watching
}

// waitForKind registers s as waiting for gk to be served; it says whether the CRD's
// appearance is watched.
func (r *Reconciler) waitForKind(ctx context.Context, gk schema.GroupKind, s *powerv1alpha1.SleepSchedule) bool {
	if r.watches == nil {
		return false
	}
	return r.watches.WaitForKind(ctx, gk, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(s)})
}

// kindObjectChanged passes creates, deletes, and the updates a schedule acts on: a new
// spec (generation), changed labels or annotations. The objects' status is not read.
func kindObjectChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc:  func(e event.UpdateEvent) bool { return !sameSpecAndMetadata(e.ObjectOld, e.ObjectNew) },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// kindsRecheck is how soon a schedule naming targets.kinds looks at them again, given
// the problems this reconcile found: never (0) while each kind is watched or, not
// served, waited for through the CRD watch; every KindsRecheck while one is not, or a
// problem no watch reports stands (a refused list or write, discovery failing, a kind
// that cannot sleep as named).
func (r *Reconciler) kindsRecheck(ctx context.Context, s *powerv1alpha1.SleepSchedule, problems []kindProblem) time.Duration {
	recheck := cmp.Or(r.KindsRecheck, DefaultKindsRecheck)
	for _, p := range problems {
		if p.reason != ReasonKindNotFound || !p.waited {
			return recheck
		}
	}
	kinds, _ := resolveKinds(s.Spec.Targets.Kinds, r.kinds.Info)
	for _, ek := range kinds {
		if !r.watchKind(ctx, ek) {
			return recheck
		}
	}
	return 0
}
