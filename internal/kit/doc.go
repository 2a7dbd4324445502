// Package kit is what every Orderly controller shares, so that each is written the
// same way and holds only its own logic: status and finalizer writes guarded by an
// optimistic lock, conditions, Events, server-side apply, per-object metrics, the
// shared cache's narrowing, the dependencies the manager hands to controllers, the
// rule of whether a workload has rolled out (RolledOut), and the detection and watches
// of kinds found at run time (KindDetector, KindWatches).
//
// A reconcile on the kit reads:
//
//	obj := &v1alpha1.Thing{}
//	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
//		if apierrors.IsNotFound(err) { series.Forget(req.NamespacedName) }
//		return ctrl.Result{}, client.IgnoreNotFound(err)
//	}
//	if !obj.DeletionTimestamp.IsZero() { ...cleanup; kit.RemoveFinalizer(...) }
//	if err := kit.AddFinalizer(ctx, r.Client, r.APIReader, obj, finalizer); err != nil { ... }
//	obs := r.observeAndConverge(ctx, obj)  // the controller's own phases
//	err := kit.PatchStatus(ctx, r.Client, r.APIReader, obj, func(o *v1alpha1.Thing) {
//		o.Status = computeStatus(o, obs) // pure: derived from o and what was observed
//	})
//
// When observing fails (a list, a read, an external system), the status still gets
// written, with Ready=False and a reason and message that say what failed, and then
// the error is returned for the controller's backoff: a user must never read a stale
// status that hides the error.
//
// A controller that reconciles one object many times in a burst (a SleepSchedule
// through a transition's workload events) can keep a WrittenVersions: a reconcile
// that finds its cached copy older than the controller's own last write of it waits
// for the cache instead of computing a status that would meet a 409.
//
// It is a kit, not a framework: a controller calls what it needs and keeps its own
// Reconcile.
package kit
