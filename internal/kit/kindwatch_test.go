package kit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

var (
	widgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	gadgetGVK = schema.GroupVersionKind{Group: "other.example.com", Version: "v1", Kind: "Gadget"}
	widgets   = schema.GroupResource{Group: "example.com", Resource: "widgets"}
)

// gvkInformers is a fake cache with one fake informer per kind, as the objects name it
// (informertest's keys metadata-only objects by their Go type).
type gvkInformers struct {
	informertest.FakeInformers
	mu        sync.Mutex
	informers map[schema.GroupVersionKind]*controllertest.FakeInformer
	removed   []schema.GroupVersionKind
}

func (c *gvkInformers) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gvk := obj.GetObjectKind().GroupVersionKind()
	if c.informers == nil {
		c.informers = map[schema.GroupVersionKind]*controllertest.FakeInformer{}
	}
	if c.informers[gvk] == nil {
		c.informers[gvk] = controllertest.NewFakeInformer()
	}
	return c.informers[gvk], nil
}

func (c *gvkInformers) RemoveInformer(_ context.Context, obj client.Object) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	gvk := obj.GetObjectKind().GroupVersionKind()
	delete(c.informers, gvk)
	c.removed = append(c.removed, gvk)
	return nil
}

func (c *gvkInformers) informer(gvk schema.GroupVersionKind) *controllertest.FakeInformer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.informers[gvk]
}

// fakeController records the sources it is asked to watch.
type fakeController struct {
	controller.Controller
	mu      sync.Mutex
	sources []source.Source
}

func (f *fakeController) Watch(src source.Source) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sources = append(f.sources, src)
	return nil
}

// reviews answers SelfSubjectAccessReviews from allowed (by resource), counting them.
type reviews struct {
	mu      sync.Mutex
	allowed map[string]bool
	err     error
	asked   int
}

func (r *reviews) client() client.Client {
	return fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			review, ok := obj.(*authorizationv1.SelfSubjectAccessReview)
			if !ok {
				return errors.New("unexpected create")
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			r.asked++
			if r.err != nil {
				return r.err
			}
			review.Status.Allowed = r.allowed[review.Spec.ResourceAttributes.Resource]
			return nil
		},
	}).Build()
}

func (r *reviews) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked
}

type testWatches struct {
	*KindWatches
	clock   *clocktesting.FakePassiveClock
	mapper  *meta.DefaultRESTMapper
	reviews *reviews
	view    *gvkInformers
	crds    *gvkInformers
	ctrl    *fakeController
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
}

func newTestWatches(t *testing.T) *testWatches {
	t.Helper()
	tw := &testWatches{
		clock:   clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		mapper:  meta.NewDefaultRESTMapper([]schema.GroupVersion{widgetGVK.GroupVersion(), gadgetGVK.GroupVersion()}),
		reviews: &reviews{allowed: map[string]bool{"widgets": true, "gadgets": true, "customresourcedefinitions": true}},
		view:    &gvkInformers{},
		crds:    &gvkInformers{},
		ctrl:    &fakeController{},
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()),
	}
	t.Cleanup(tw.queue.ShutDown)
	tw.mapper.Add(widgetGVK, meta.RESTScopeNamespace)
	kinds := NewKindDetector(tw.mapper, tw.clock, nil)
	tw.KindWatches = newKindWatches(KindWatchOptions{Clock: tw.clock, Kinds: kinds, Views: []View{{Name: "copies"}}},
		tw.mapper, tw.reviews.client(), nil, logr.Discard())
	tw.views["copies"].cache = tw.view
	tw.KindWatches.crds = tw.crds
	tw.recheck = []time.Duration{0}
	if err := tw.Bind(tw.ctrl); err != nil {
		t.Fatal(err)
	}
	// The controller starts its sources: the queue reaches the watches.
	if err := tw.ctrl.sources[0].Start(context.Background(), tw.queue); err != nil {
		t.Fatal(err)
	}
	return tw
}

func (tw *testWatches) watch(gvk schema.GroupVersionKind) WatchState {
	return tw.Watch(context.Background(), "copies", gvk, &handler.EnqueueRequestForObject{})
}

// A kind is watched from the first object that needs it, once, after the manager was
// found allowed to list and watch it; a kind it may not is reported, and not asked
// about again before RetryRefused.
func TestKindWatchesAskOnceAndRememberRefusals(t *testing.T) {
	tw := newTestWatches(t)
	if st := tw.watch(widgetGVK); !st.Watching || st.Problem != "" || st.Synced {
		t.Fatalf("first watch: %+v", st)
	}
	// Two reviews (list, watch) for widgets, two for the CRD watch.
	if n := tw.reviews.count(); n != 4 {
		t.Errorf("%d access reviews, want 4", n)
	}
	if len(tw.ctrl.sources) != 2 {
		t.Fatalf("%d sources, want the queue's and the widgets' informer", len(tw.ctrl.sources))
	}
	tw.view.informer(widgetGVK).Synced()
	if st := tw.watch(widgetGVK); !st.Watching || !st.Synced {
		t.Errorf("second watch: %+v", st)
	}
	if n := tw.reviews.count(); n != 4 || len(tw.ctrl.sources) != 2 {
		t.Errorf("a watched kind was asked about again (%d reviews) or watched twice (%d sources)", n, len(tw.ctrl.sources))
	}

	// Gadgets: refused.
	tw.mapper.Add(gadgetGVK, meta.RESTScopeNamespace)
	tw.reviews.allowed["gadgets"] = false
	st := tw.watch(gadgetGVK)
	if st.Watching || st.Problem != "the manager may not list gadgets.other.example.com in every namespace" {
		t.Fatalf("refused kind: %+v", st)
	}
	asked := tw.reviews.count()
	for range 100 {
		if st := tw.watch(gadgetGVK); st.Watching || st.Problem == "" {
			t.Fatalf("refused kind: %+v", st)
		}
	}
	if n := tw.reviews.count(); n != asked {
		t.Errorf("a refused kind was asked about %d more times before RetryRefused", n-asked)
	}
	tw.reviews.allowed["gadgets"] = true
	tw.clock.SetTime(tw.clock.Now().Add(DefaultRetryRefused))
	if st := tw.watch(gadgetGVK); !st.Watching {
		t.Errorf("after RetryRefused, granted: %+v", st)
	}

	// A kind that is not served is not watched (nor asked about).
	asked = tw.reviews.count()
	missing := schema.GroupVersionKind{Group: "missing.example.com", Version: "v1", Kind: "Missing"}
	if st := tw.watch(missing); st.Watching || st.Problem != "Missing.missing.example.com is not served by the API server" {
		t.Errorf("missing kind: %+v", st)
	}
	if tw.reviews.count() != asked {
		t.Error("a kind that is not served was asked about")
	}
}

// A review that could not be made is not taken for a refusal for long.
func TestKindWatchesRetryAFailedReviewSoon(t *testing.T) {
	tw := newTestWatches(t)
	tw.reviews.err = errors.New("API server unreachable")
	if st := tw.watch(widgetGVK); st.Watching || st.Problem == "" {
		t.Fatalf("%+v", st)
	}
	tw.reviews.err = nil
	if st := tw.watch(widgetGVK); st.Watching {
		t.Fatalf("asked again at once: %+v", st)
	}
	tw.clock.SetTime(tw.clock.Now().Add(retryFailedReview))
	if st := tw.watch(widgetGVK); !st.Watching {
		t.Errorf("after %s: %+v", retryFailedReview, st)
	}
}

// A list or watch the API server refuses later stops the informer and stands as a
// refusal.
func TestKindWatchesStopARefusedInformer(t *testing.T) {
	tw := newTestWatches(t)
	if st := tw.watch(widgetGVK); !st.Watching {
		t.Fatalf("%+v", st)
	}
	tw.watchFailed(context.Background(), nil, apierrors.NewForbidden(widgets, "", errors.New("RBAC changed")))
	eventually(t, func() bool { return tw.view.informer(widgetGVK) == nil })
	if st := tw.watch(widgetGVK); st.Watching || st.Problem == "" {
		t.Errorf("after the refusal: %+v", st)
	}
}

// An object waiting for a kind whose CRD is missing is queued once a CRD of its group
// appears and the kind is served; nothing is asked before.
func TestWaitForKindIsReleasedByTheCRDWatch(t *testing.T) {
	tw := newTestWatches(t)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "waiting"}}
	if !tw.WaitForKind(context.Background(), gadgetGVK.GroupKind(), req) {
		t.Fatal("CRDs may be watched: the wait is watched")
	}
	crds := tw.crds.informer(crdGVK)
	if crds == nil {
		t.Fatal("the CRD watch did not start")
	}
	crd := func(name string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	// Another group's CRD; then the group's CRD before the kind is served.
	crds.Add(crd("widgets.example.com"))
	crds.Add(crd("sprockets.other.example.com"))
	eventually(t, func() bool { return !tw.isChecking(gadgetGVK.GroupKind()) })
	if tw.queue.Len() != 0 || tw.Waiting(gadgetGVK.GroupKind()) != 1 {
		t.Fatalf("queued %d, waiting %d: nothing is served yet", tw.queue.Len(), tw.Waiting(gadgetGVK.GroupKind()))
	}
	tw.mapper.Add(gadgetGVK, meta.RESTScopeNamespace)
	crds.Update(crd("gadgets.other.example.com"), crd("gadgets.other.example.com"))
	eventually(t, func() bool { return tw.queue.Len() == 1 })
	if got, _ := tw.queue.Get(); got != req {
		t.Errorf("queued %v, want %v", got, req)
	}
	if tw.Waiting(gadgetGVK.GroupKind()) != 0 {
		t.Error("the waiter is still registered")
	}
}

// A kind served by the time the waiter registers (its CRD came between the caller's
// look and the registration) queues the waiter at once.
func TestWaitForKindServedMeanwhile(t *testing.T) {
	tw := newTestWatches(t)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: "late"}}
	tw.mapper.Add(gadgetGVK, meta.RESTScopeNamespace)
	if !tw.WaitForKind(context.Background(), gadgetGVK.GroupKind(), req) {
		t.Fatal("not watched")
	}
	if tw.queue.Len() != 1 {
		t.Errorf("queued %d, want the waiter", tw.queue.Len())
	}
}

// Without the right to watch CRDs, a wait is not watched: the caller falls back to a
// resync, and the refusal is not asked about again before RetryRefused.
func TestWaitForKindWithoutCRDWatch(t *testing.T) {
	tw := newTestWatches(t)
	tw.reviews.allowed["customresourcedefinitions"] = false
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: "w"}}
	if tw.WaitForKind(context.Background(), gadgetGVK.GroupKind(), req) {
		t.Fatal("watched without the right to watch CRDs")
	}
	asked := tw.reviews.count()
	for range 10 {
		tw.WaitForKind(context.Background(), gadgetGVK.GroupKind(), req)
	}
	if tw.reviews.count() != asked {
		t.Error("the refusal to watch CRDs was asked about again")
	}
}

// A deleted CRD stops the watches of its kinds that are no longer served.
func TestKindWatchesStopWhenTheCRDGoes(t *testing.T) {
	tw := newTestWatches(t)
	var gone atomic.Bool
	tw.discovery = resourcesFunc(func(gv string) (*metav1.APIResourceList, error) {
		if gone.Load() || gv != widgetGVK.GroupVersion().String() {
			return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
		}
		return &metav1.APIResourceList{APIResources: []metav1.APIResource{{Name: "widgets", Kind: "Widget"}}}, nil
	})
	if st := tw.watch(widgetGVK); !st.Watching {
		t.Fatalf("%+v", st)
	}
	crd := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"}}
	tw.crds.informer(crdGVK).Delete(crd)
	never(t, func() bool { return tw.view.informer(widgetGVK) == nil }, "a kind still served was stopped")
	gone.Store(true)
	// The informer hands a deletion it missed over as a tombstone.
	tw.crdChanged(context.Background(), toolscache.DeletedFinalStateUnknown{Key: crd.Name, Obj: crd}, true)
	eventually(t, func() bool { return tw.view.informer(widgetGVK) == nil })
	if _, ok := tw.current(watchKey{view: "copies", gvk: widgetGVK}); ok {
		t.Error("the stopped watch is still known")
	}
}

func TestCRDGroup(t *testing.T) {
	for name, want := range map[string]string{
		"httproutes.gateway.networking.k8s.io": "gateway.networking.k8s.io",
		"widgets.example.com":                  "example.com",
		"nodot":                                "",
	} {
		if got := crdGroup(name); got != want {
			t.Errorf("crdGroup(%q) = %q, want %q", name, got, want)
		}
	}
}

func (w *KindWatches) isChecking(gk schema.GroupKind) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.checking[gk]
}

// never fails t when cond becomes true within a short while.
func never(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			t.Fatal(msg)
		}
	}
}

func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
