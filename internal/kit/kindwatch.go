package kit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// KindWatches watches, for one controller, kinds found at run time: the kinds a
// user names (a Tenant's spec.resources, a SleepSchedule's targets.kinds) and kinds
// whose CRDs may be installed later (Gateway API, cert-manager, Istio). Nothing is
// watched at start-up:
//
//   - Watch starts an informer for a kind the first time an object needs it, after
//     asking the API server whether the manager may list and watch it in every
//     namespace (a SelfSubjectAccessReview per verb). A refusal is remembered for
//     RetryRefused and returned as a problem for the object's status, so that neither
//     the review nor a failing list is repeated in a loop; the object falls back to a
//     resync of its controller's choosing. A list or watch refused later (RBAC
//     changed) stops the informer and counts as a refusal too.
//   - Each View holds its kinds in a cache of its own, narrowed by a label selector,
//     and as metadata only unless the controller reads the objects' data.
//   - WaitForKind registers an object that waits for a kind that is not served: the
//     CRDs are watched (metadata only) and a CRD of the kind's group appearing or
//     changing brings the object back once discovery serves the kind, without polling.
//     A CRD that goes stops the informers of its kinds.
type KindWatches struct {
	clock    clock.PassiveClock
	kinds    *KindDetector
	mapper   meta.RESTMapper
	reviewer client.Client
	// discovery tells whether a watched kind is still served (the mapper remembers
	// kinds whose CRD is gone).
	discovery ResourceLister
	views     map[string]*kindView
	crds      cache.Cache
	retry     time.Duration
	log       logr.Logger

	// ensureMu serializes starting informers and the access reviews before them.
	ensureMu sync.Mutex

	mu       sync.Mutex
	ctrl     controller.Controller
	queue    workqueue.TypedRateLimitingInterface[reconcile.Request]
	watches  map[watchKey]*kindWatch
	refused  map[schema.GroupResource]refusal
	waiting  map[schema.GroupKind]map[reconcile.Request]struct{}
	checking map[schema.GroupKind]bool
	crdWatch bool
	// recheck is the waits between the checks that a kind whose group's CRDs changed
	// is served: discovery may lag the CRD's Established condition.
	recheck []time.Duration
}

// View is how one cache of a KindWatches holds the kinds watched through it.
type View struct {
	// Name is what Watch and Reader know the view by.
	Name string
	// Selector holds only the objects it matches (a label users cannot forge); every
	// object when nil.
	Selector k8slabels.Selector
	// Transform is applied to each object held; managed fields are dropped when nil.
	Transform toolscache.TransformFunc
	// Whole holds whole objects (unstructured); only their metadata otherwise.
	Whole bool
}

// KindWatchOptions configure NewKindWatches.
type KindWatchOptions struct {
	// Clock is what refusals are timed with; the wall clock when nil.
	Clock clock.PassiveClock
	// Kinds is the controller's KindDetector; a CRD event makes it forget its group.
	Kinds *KindDetector
	// Views are the caches kinds are watched through.
	Views []View
	// RetryRefused is how long a refusal to list and watch a kind stands before the
	// manager asks again; DefaultRetryRefused when zero.
	RetryRefused time.Duration
}

// DefaultRetryRefused is how long a refusal stands when KindWatchOptions says nothing.
const DefaultRetryRefused = 5 * time.Minute

// WatchState is what Watch says of a kind.
type WatchState struct {
	// Watching: the kind's events reach the controller.
	Watching bool
	// Synced: the view's cache has listed the kind, so that reads from Reader are
	// current.
	Synced bool
	// Problem says why the kind is not watched (the manager may not list and watch
	// it, it is not served, ...), for the object's status; "" when Watching.
	Problem string
}

type kindView struct {
	View
	cache cache.Cache
}

type watchKey struct {
	view string
	gvk  schema.GroupVersionKind
}

type kindWatch struct {
	informer cache.Informer
	resource schema.GroupResource
	obj      client.Object
}

type refusal struct {
	message string
	until   time.Time
}

// retryFailedReview is how soon an access review that could not be made (not a
// refusal: the API server did not answer) is made again.
const retryFailedReview = 30 * time.Second

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// NewKindWatches builds the watches' caches (they run with mgr). Call Bind with the
// controller once it is built.
func NewKindWatches(mgr ctrl.Manager, opts KindWatchOptions) (*KindWatches, error) {
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("building a discovery client: %w", err)
	}
	w := newKindWatches(opts, mgr.GetRESTMapper(), mgr.GetClient(), dc, mgr.GetLogger().WithName("kindwatches"))
	newCache := func(sel k8slabels.Selector, transform toolscache.TransformFunc) (cache.Cache, error) {
		c, err := cache.New(mgr.GetConfig(), cache.Options{
			HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
			DefaultLabelSelector: sel, DefaultTransform: transform,
			DefaultWatchErrorHandler:    w.watchFailed,
			ReaderFailOnMissingInformer: true,
		})
		if err != nil {
			return nil, err
		}
		return c, mgr.Add(c)
	}
	for _, v := range opts.Views {
		transform := v.Transform
		if transform == nil {
			transform = cache.TransformStripManagedFields()
		}
		c, err := newCache(v.Selector, transform)
		if err != nil {
			return nil, fmt.Errorf("building the cache of view %s: %w", v.Name, err)
		}
		w.views[v.Name].cache = c
	}
	crds, err := newCache(nil, NameOnly)
	if err != nil {
		return nil, fmt.Errorf("building the cache of CustomResourceDefinitions: %w", err)
	}
	w.crds = crds
	return w, nil
}

func newKindWatches(opts KindWatchOptions, mapper meta.RESTMapper, reviewer client.Client, dc ResourceLister, log logr.Logger) *KindWatches {
	w := &KindWatches{
		clock: opts.Clock, kinds: opts.Kinds, mapper: mapper, reviewer: reviewer, discovery: dc, log: log,
		retry: opts.RetryRefused, views: map[string]*kindView{},
		watches: map[watchKey]*kindWatch{}, refused: map[schema.GroupResource]refusal{},
		waiting: map[schema.GroupKind]map[reconcile.Request]struct{}{}, checking: map[schema.GroupKind]bool{},
		recheck: []time.Duration{0, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second},
	}
	if w.clock == nil {
		w.clock = clock.RealClock{}
	}
	if w.retry <= 0 {
		w.retry = DefaultRetryRefused
	}
	if w.kinds == nil {
		w.kinds = NewKindDetector(mapper, w.clock, nil)
	}
	for _, v := range opts.Views {
		w.views[v.Name] = &kindView{View: v}
	}
	return w
}

// Bind sends the watches' events to c; call it once, after c is built.
func (w *KindWatches) Bind(c controller.Controller) error {
	w.mu.Lock()
	w.ctrl = c
	w.mu.Unlock()
	return c.Watch(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		w.mu.Lock()
		w.queue = q
		w.mu.Unlock()
		return nil
	}))
}

// Reader reads the objects of view's kinds from its cache. Read only kinds whose
// Watch is Synced: the cache starts no informer of its own.
func (w *KindWatches) Reader(view string) client.Reader {
	if v := w.views[view]; v != nil {
		return v.cache
	}
	return nil
}

// Watch makes sure gvk is watched through view, its events going to h through preds
// (both used only when the watch starts), and says how it stands.
func (w *KindWatches) Watch(ctx context.Context, view string, gvk schema.GroupVersionKind, h handler.EventHandler, preds ...predicate.Predicate) WatchState {
	key := watchKey{view: view, gvk: gvk}
	if st, ok := w.current(key); ok {
		return st
	}
	v := w.views[view]
	if v == nil {
		return WatchState{Problem: fmt.Sprintf("no view %q to watch %s through", view, gvk.Kind)}
	}
	w.ensureCRDWatch(ctx)
	w.ensureMu.Lock()
	defer w.ensureMu.Unlock()
	if st, ok := w.current(key); ok {
		return st
	}
	m, err := w.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case meta.IsNoMatchError(err):
		return WatchState{Problem: fmt.Sprintf("%s is not served by the API server", kindName(gvk))}
	case err != nil:
		return WatchState{Problem: fmt.Sprintf("asking the API server how %s is served: %v", kindName(gvk), err)}
	}
	gr := m.Resource.GroupResource()
	if msg, ok := w.refusedNow(gr); ok {
		return WatchState{Problem: msg}
	}
	if !w.mayListAndWatch(ctx, gr) {
		msg, _ := w.refusedNow(gr)
		return WatchState{Problem: msg}
	}
	obj := v.object(gvk)
	inf, err := v.cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return WatchState{Problem: fmt.Sprintf("watching %s: %v", kindName(gvk), err)}
	}
	w.mu.Lock()
	c := w.ctrl
	w.mu.Unlock()
	if c == nil {
		return WatchState{Problem: "the watches are not bound to a controller"}
	}
	if err := c.Watch(&source.Informer{Informer: inf, Handler: h, Predicates: preds}); err != nil {
		_ = v.cache.RemoveInformer(ctx, obj)
		return WatchState{Problem: fmt.Sprintf("watching %s: %v", kindName(gvk), err)}
	}
	kw := &kindWatch{informer: inf, resource: gr, obj: obj}
	w.mu.Lock()
	w.watches[key] = kw
	w.mu.Unlock()
	w.log.V(1).Info("Watching a kind found at run time", "view", view, "kind", kindName(gvk))
	return kw.state()
}

func (kw *kindWatch) state() WatchState {
	return WatchState{Watching: true, Synced: kw.informer.HasSynced()}
}

func (w *KindWatches) current(key watchKey) (WatchState, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if kw := w.watches[key]; kw != nil {
		return kw.state(), true
	}
	return WatchState{}, false
}

func (v *kindView) object(gvk schema.GroupVersionKind) client.Object {
	if v.Whole {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u
	}
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(gvk)
	return o
}

func kindName(gvk schema.GroupVersionKind) string { return gvk.GroupKind().String() }

// refusedNow returns the standing refusal of gr, if any.
func (w *KindWatches) refusedNow(gr schema.GroupResource) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.refused[gr]
	if !ok || !w.clock.Now().Before(r.until) {
		return "", false
	}
	return r.message, true
}

// refuse remembers that gr may not be watched, for retry.
func (w *KindWatches) refuse(gr schema.GroupResource, message string, retry time.Duration) {
	w.mu.Lock()
	_, again := w.refused[gr]
	w.refused[gr] = refusal{message: message, until: w.clock.Now().Add(retry)}
	w.mu.Unlock()
	if !again {
		w.log.Info("Not watching a kind: "+message+"; asked again in "+retry.String(), "resource", gr.String())
	}
}

// mayListAndWatch asks the API server whether the manager may list and watch gr in
// every namespace; a refusal, or a failure to ask, is remembered.
func (w *KindWatches) mayListAndWatch(ctx context.Context, gr schema.GroupResource) bool {
	for _, verb := range []string{"list", "watch"} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: gr.Group, Resource: gr.Resource, Verb: verb},
		}}
		if err := w.reviewer.Create(ctx, review); err != nil {
			w.refuse(gr, fmt.Sprintf("asking whether the manager may %s %s failed: %v", verb, gr, err), min(w.retry, retryFailedReview))
			return false
		}
		if !review.Status.Allowed {
			w.refuse(gr, fmt.Sprintf("the manager may not %s %s in every namespace", verb, gr), w.retry)
			return false
		}
	}
	return true
}

// watchFailed is the informers' error handler. A refusal (403) stops the informers
// of its resource and stands as a refusal; a resource that is gone (its CRD deleted)
// stops the informers of kinds no longer served; anything else the informer retries.
func (w *KindWatches) watchFailed(ctx context.Context, _ *toolscache.Reflector, err error) {
	switch {
	case apierrors.IsForbidden(err):
		gr := resourceOf(err)
		w.refuse(gr, fmt.Sprintf("the API server refused to let the manager list or watch %s: %v", gr, err), w.retry)
		go w.stopWatches(ctx, func(kw *kindWatch, _ watchKey) bool { return kw.resource == gr })
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		go w.stopUnserved(ctx, "")
	default:
		w.log.V(1).Info("Watching a kind failed; retrying", "error", err.Error())
	}
}

func resourceOf(err error) schema.GroupResource {
	var s apierrors.APIStatus
	if errors.As(err, &s) && s.Status().Details != nil {
		d := s.Status().Details
		return schema.GroupResource{Group: d.Group, Resource: d.Kind}
	}
	return schema.GroupResource{}
}

// stopWatches stops the informers of the watches match picks.
func (w *KindWatches) stopWatches(ctx context.Context, match func(*kindWatch, watchKey) bool) {
	w.mu.Lock()
	stopped := map[watchKey]*kindWatch{}
	for key, kw := range w.watches {
		if match(kw, key) {
			stopped[key] = kw
			delete(w.watches, key)
		}
	}
	w.mu.Unlock()
	for key, kw := range stopped {
		if v := w.views[key.view]; v != nil && v.cache != nil {
			if err := v.cache.RemoveInformer(ctx, kw.obj); err != nil {
				w.log.Error(err, "Stopping the watch of a kind", "view", key.view, "kind", kindName(key.gvk))
			}
		}
		w.log.Info("Stopped watching a kind", "view", key.view, "kind", kindName(key.gvk))
	}
}

// stopUnserved stops the informers of the watched kinds (of group, or all when "")
// that the API server no longer serves at their version.
func (w *KindWatches) stopUnserved(ctx context.Context, group string) {
	w.mu.Lock()
	kinds := map[schema.GroupVersionKind]bool{}
	for key := range w.watches {
		if group == "" || key.gvk.Group == group {
			kinds[key.gvk] = true
		}
	}
	w.mu.Unlock()
	gone := map[schema.GroupVersionKind]bool{}
	for gvk := range kinds {
		w.kinds.Forget(gvk.GroupKind())
		if !w.served(gvk) {
			gone[gvk] = true
		}
	}
	if len(gone) > 0 {
		w.stopWatches(ctx, func(_ *kindWatch, key watchKey) bool { return gone[key.gvk] })
	}
}

// served asks discovery whether gvk is served; true when discovery cannot tell.
func (w *KindWatches) served(gvk schema.GroupVersionKind) bool {
	if w.discovery == nil {
		return true
	}
	list, err := w.discovery.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
	switch {
	case apierrors.IsNotFound(err):
		return false
	case err != nil:
		return true
	}
	for _, r := range list.APIResources {
		if r.Kind == gvk.Kind && !strings.Contains(r.Name, "/") {
			return true
		}
	}
	return false
}

// WaitForKind registers req as waiting for gk, which is not served: once a CRD of
// gk's group makes it served, req is queued. It returns false when CRDs cannot be
// watched (the manager may not list and watch them): the caller then looks again
// after a resync of its own.
func (w *KindWatches) WaitForKind(ctx context.Context, gk schema.GroupKind, req reconcile.Request) bool {
	if !w.ensureCRDWatch(ctx) {
		return false
	}
	w.mu.Lock()
	if w.waiting[gk] == nil {
		w.waiting[gk] = map[reconcile.Request]struct{}{}
	}
	w.waiting[gk][req] = struct{}{}
	w.mu.Unlock()
	// A CRD that appeared between the caller's look and the registration made the
	// detector forget its group: only then is the API server asked again here.
	if info, err := w.kinds.Info(gk); err == nil && info.Version != "" {
		w.release(gk)
	}
	return true
}

// release queues every object waiting for gk.
func (w *KindWatches) release(gk schema.GroupKind) {
	w.mu.Lock()
	waiters, q := w.waiting[gk], w.queue
	delete(w.waiting, gk)
	w.mu.Unlock()
	if q == nil {
		return
	}
	for req := range waiters {
		q.Add(req)
	}
}

// Waiting is how many objects wait for gk.
func (w *KindWatches) Waiting(gk schema.GroupKind) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.waiting[gk])
}

// ensureCRDWatch starts the watch of CRDs, once the manager may list and watch them;
// it says whether it runs.
func (w *KindWatches) ensureCRDWatch(ctx context.Context) bool {
	w.mu.Lock()
	started := w.crdWatch
	w.mu.Unlock()
	if started {
		return true
	}
	if w.crds == nil {
		return false
	}
	w.ensureMu.Lock()
	defer w.ensureMu.Unlock()
	w.mu.Lock()
	started = w.crdWatch
	w.mu.Unlock()
	if started {
		return true
	}
	gr := schema.GroupResource{Group: crdGVK.Group, Resource: "customresourcedefinitions"}
	if _, refused := w.refusedNow(gr); refused || !w.mayListAndWatch(ctx, gr) {
		return false
	}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(crdGVK)
	inf, err := w.crds.GetInformer(ctx, crd, cache.BlockUntilSynced(false))
	if err != nil {
		w.log.Error(err, "Watching CustomResourceDefinitions")
		return false
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.crdChanged(ctx, obj, false) },
		UpdateFunc: func(_, obj any) { w.crdChanged(ctx, obj, false) },
		DeleteFunc: func(obj any) { w.crdChanged(ctx, obj, true) },
	}); err != nil {
		w.log.Error(err, "Watching CustomResourceDefinitions")
		return false
	}
	w.mu.Lock()
	w.crdWatch = true
	w.mu.Unlock()
	return true
}

// crdGroup is the API group of a CRD, from its name (<plural>.<group>).
func crdGroup(name string) string {
	_, group, _ := strings.Cut(name, ".")
	return group
}

// crdChanged is the CRD watch's handler: the detector forgets the CRD's group, the
// kinds of the group that objects wait for are checked until discovery serves them,
// and a deleted CRD stops the watches of the kinds no longer served.
func (w *KindWatches) crdChanged(ctx context.Context, obj any, deleted bool) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	group := crdGroup(o.GetName())
	w.kinds.ForgetGroup(group)
	w.mu.Lock()
	var check []schema.GroupKind
	for gk := range w.waiting {
		if gk.Group == group && !w.checking[gk] {
			w.checking[gk] = true
			check = append(check, gk)
		}
	}
	w.mu.Unlock()
	for _, gk := range check {
		go w.checkServed(gk)
	}
	if deleted {
		go w.stopUnserved(ctx, group)
	}
}

// checkServed asks discovery whether gk is served, a few times over some seconds
// (discovery may lag the CRD's Established condition), and releases its waiters once
// it is.
func (w *KindWatches) checkServed(gk schema.GroupKind) {
	defer func() {
		w.mu.Lock()
		delete(w.checking, gk)
		w.mu.Unlock()
	}()
	for _, d := range w.recheck {
		if d > 0 {
			time.Sleep(d)
		}
		w.kinds.Forget(gk)
		if info, err := w.kinds.Info(gk); err == nil && info.Version != "" {
			w.release(gk)
			return
		}
	}
}
