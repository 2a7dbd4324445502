package placement

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// MemberWorkers is how many of a member's policies are synced at once.
const MemberWorkers = 4

// resyncPriority puts resyncs behind what changed in a member's queue.
const resyncPriority = handler.LowPriority

// placedKinds are the kinds a PlacementPolicy may place; a purge lists these.
var placedKinds = []schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "apps", Version: "v1", Kind: "StatefulSet"},
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "Secret"},
	{Version: "v1", Kind: "Service"},
	{Version: "v1", Kind: "ServiceAccount"},
}

// plan is what one policy wants on one member.
type plan struct {
	UID       types.UID
	Namespace string
	// Objects are applied in order.
	Objects []*unstructured.Unstructured
	// Purge deletes the policy's objects on the member that Objects leave out.
	Purge bool
	// Paused leaves the member alone (it failed; nothing is applied or deleted
	// until it returns).
	Paused bool
	// Forget ends the policy's work on the member once Objects (empty) are synced.
	Forget bool
}

// result is the last sync of one policy on one member.
type result struct {
	Synced    bool
	Applied   int32
	Ready     int32
	LastSync  time.Time
	Err       string
	Forgotten bool
}

// memberSyncer applies policies' plans to one member cluster, from a work queue of
// its own: a slow or dead member holds only its own worker.
type memberSyncer struct {
	// key is the member's ClusterProfile: profiles of one name in two namespaces are
	// two members.
	key types.NamespacedName
	// allowed are the namespaces whose policies may place here ("*": all).
	allowed []string
	hash    string
	client  client.Client
	cfg     *rest.Config
	clock   clock.PassiveClock
	timings timings
	notify  func(types.NamespacedName)
	// queue serves what changed (a plan, a copy on the member) ahead of resyncs.
	queue     priorityqueue.PriorityQueue[types.NamespacedName]
	queueDone sync.Once
	// cancel ends the workers and the watches.
	cancel context.CancelFunc

	mu      sync.Mutex
	plans   map[types.NamespacedName]*plan
	results map[types.NamespacedName]result
	purged  map[types.NamespacedName]string
	// wrote is what Orderly's last apply of each of a policy's copies wrote, by
	// objKey: the watch event of that version is Orderly's own write, and a copy
	// the watch shows unchanged since needs no apply of the same object.
	wrote map[types.NamespacedName]map[string]applied
	// namespaces are the namespaces known to exist on the member.
	namespaces map[string]bool

	watchMu   sync.Mutex
	informers []cache.Informer
	// copies reads the watches' cache (nil until they start).
	copies client.Reader
	// refused is when the member last refused a list or watch, by resource.
	refused       map[string]time.Time
	refusalLogged map[string]bool
}

func newMemberSyncer(key types.NamespacedName, hash string, cfg *rest.Config, c client.Client, clk clock.PassiveClock, t timings, notify func(types.NamespacedName)) *memberSyncer {
	return &memberSyncer{
		key: key, hash: hash, cfg: cfg, client: c, clock: clk, timings: t, notify: notify,
		queue: priorityqueue.New("placement-"+key.String(), func(o *priorityqueue.Opts[types.NamespacedName]) {
			o.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](500*time.Millisecond, 30*time.Second)
		}),
		plans:      map[types.NamespacedName]*plan{},
		results:    map[types.NamespacedName]result{},
		purged:     map[types.NamespacedName]string{},
		wrote:      map[types.NamespacedName]map[string]applied{},
		namespaces: map[string]bool{},
		refused:    map[string]time.Time{}, refusalLogged: map[string]bool{},
	}
}

// set replaces a policy's plan; the sync runs in the member's worker.
func (m *memberSyncer) set(key types.NamespacedName, p *plan) {
	m.mu.Lock()
	m.plans[key] = p
	m.mu.Unlock()
	m.queue.Add(key)
}

// drop forgets a policy on this member at once, touching nothing there.
func (m *memberSyncer) drop(key types.NamespacedName) {
	m.mu.Lock()
	delete(m.plans, key)
	delete(m.results, key)
	delete(m.purged, key)
	delete(m.wrote, key)
	m.mu.Unlock()
}

func (m *memberSyncer) result(key types.NamespacedName) (result, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.results[key]
	return r, ok
}

// run starts the member's watches and workers; they end when ctx ends or stop is
// called. A member whose watches cannot start is still synced, by the resync.
func (m *memberSyncer) run(ctx context.Context, workers int) {
	if err := m.startWatch(ctx); err != nil {
		logf.FromContext(ctx).Error(err, "Not watching Orderly's copies on a member: changes there wait for the resync", "member", m.key.String())
	}
	for range workers {
		go func() {
			for m.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	m.shutDown()
}

func (m *memberSyncer) stop() {
	if m.cancel != nil {
		m.cancel()
	}
	m.shutDown()
}

// shutDown ends the queue once (the priority queue panics on a second time).
func (m *memberSyncer) shutDown() {
	m.queueDone.Do(m.queue.ShutDown)
}

func (m *memberSyncer) next(ctx context.Context) bool {
	key, shutdown := m.queue.Get()
	if shutdown {
		return false
	}
	defer m.queue.Done(key)
	m.mu.Lock()
	p := m.plans[key]
	m.mu.Unlock()
	if p == nil {
		m.queue.Forget(key)
		return true
	}
	if p.Paused {
		m.queue.Forget(key)
		return true
	}
	began := time.Now()
	sctx, cancel := context.WithTimeout(ctx, m.timings.SyncTimeout)
	r, planHash, err := m.sync(sctx, key, p)
	cancel()
	syncSeconds.WithLabelValues(memberSeries.Values(m.key)...).Observe(time.Since(began).Seconds())
	r.LastSync = m.clock.Now()
	if err != nil {
		r.Err = kit.Truncate(err.Error(), 1000)
		applyErrors.WithLabelValues(memberSeries.Values(m.key)...).Inc()
		logf.FromContext(ctx).V(1).Info("Placing on member failed", "member", m.key.String(), "policy", key, "error", err)
	}
	m.mu.Lock()
	if m.plans[key] != p {
		// Replaced while syncing: the new plan is queued already.
		m.mu.Unlock()
		return true
	}
	prev, had := m.results[key]
	if err == nil && p.Purge {
		m.purged[key] = planHash
	}
	forget := err == nil && p.Forget
	if forget {
		delete(m.plans, key)
		delete(m.purged, key)
		delete(m.wrote, key)
		r.Forgotten = true
	}
	m.results[key] = r
	m.mu.Unlock()
	changed := !had || prev.Synced != r.Synced || prev.Applied != r.Applied || prev.Ready != r.Ready || prev.Err != r.Err || prev.Forgotten != r.Forgotten
	if changed && m.notify != nil {
		m.notify(key)
	}
	switch {
	case forget:
		m.queue.Forget(key)
	case err != nil:
		m.queue.AddRateLimited(key)
	default:
		m.queue.Forget(key)
		m.queue.AddWithOpts(priorityqueue.AddOpts{After: m.resyncAfter(), Priority: ptr.To(resyncPriority)}, key)
	}
	return true
}

// sync applies p's objects to the member and, when p says so, deletes the policy's
// objects that p leaves out. Objects without the policy's UID label are never
// changed or deleted.
func (m *memberSyncer) sync(ctx context.Context, key types.NamespacedName, p *plan) (result, string, error) {
	r := result{}
	var errs []string
	if len(p.Objects) > 0 {
		if err := m.ensureNamespace(ctx, p.Namespace); err != nil {
			return r, "", err
		}
	}
	want := map[string]bool{}
	for _, obj := range p.Objects {
		want[objKey(obj.GroupVersionKind(), obj.GetName())] = true
		ready, err := m.apply(ctx, key, p.UID, obj)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		r.Applied++
		r.Ready += ready
	}
	planHash := planKeys(want)
	m.mu.Lock()
	done := m.purged[key] == planHash
	m.mu.Unlock()
	if p.Purge && (!done || p.Forget) {
		if err := m.purge(ctx, p, want); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		// The namespace may be what went missing: look again next time.
		m.mu.Lock()
		delete(m.namespaces, p.Namespace)
		m.mu.Unlock()
		return r, planHash, errors.New(kit.FirstN(errs, 3))
	}
	r.Synced = true
	return r, planHash, nil
}

func planKeys(want map[string]bool) string {
	return strings.Join(slices.Sorted(maps.Keys(want)), ",")
}

func objKey(gvk schema.GroupVersionKind, name string) string {
	return gvk.GroupKind().String() + "/" + name
}

func (m *memberSyncer) ensureNamespace(ctx context.Context, ns string) error {
	m.mu.Lock()
	known := m.namespaces[ns]
	m.mu.Unlock()
	if known {
		return nil
	}
	var got corev1.Namespace
	err := m.client.Get(ctx, client.ObjectKey{Name: ns}, &got)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		created := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{labels.ManagedBy: labels.ManagedByValue}}}
		if err := m.client.Create(ctx, created); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	m.mu.Lock()
	m.namespaces[ns] = true
	m.mu.Unlock()
	return nil
}

// applied is what one apply of a copy wrote.
type applied struct {
	// resourceVersion of the copy after the apply.
	resourceVersion string
	// object is a hash of the object applied; fields one of Orderly's managed
	// fields entry after it.
	object, fields uint64
}

// apply writes obj with server-side apply under the placement field manager, unless
// an object of that name exists there that is not the policy's. It returns how many
// of a workload's replicas are ready on the member (readyOf). Where the watches show
// the policy's copy with Orderly's fields as its last apply of the same object left
// them, nothing is sent: a resync or a readiness change costs no request.
func (m *memberSyncer) apply(ctx context.Context, key types.NamespacedName, uid types.UID, obj *unstructured.Unstructured) (int32, error) {
	name := objKey(obj.GroupVersionKind(), obj.GetName())
	sum := hashObject(obj)
	watched := m.watchedCopy(ctx, obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName())
	if watched != nil && watched.GetLabels()[fleetv1alpha1.PolicyUIDLabel] == string(uid) {
		m.mu.Lock()
		last := m.wrote[key][name]
		m.mu.Unlock()
		if last.object == sum && last.fields == hashString(orderlyFields(watched)) && watched.GetDeletionTimestamp() == nil {
			return readyOf(watched), nil
		}
	} else {
		// Not among the watched copies: absent, or someone else's.
		existing := &metav1.PartialObjectMetadata{}
		existing.SetGroupVersionKind(obj.GroupVersionKind())
		err := m.client.Get(ctx, client.ObjectKeyFromObject(obj), existing)
		switch {
		case err == nil:
			if existing.GetLabels()[fleetv1alpha1.PolicyUIDLabel] != string(uid) {
				return 0, fmt.Errorf("%s %s exists on the member and is not this policy's: left alone", obj.GetKind(), obj.GetName())
			}
		case !apierrors.IsNotFound(err):
			return 0, fmt.Errorf("reading %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	out := obj.DeepCopy()
	if err := m.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(out), client.FieldOwner(fleetv1alpha1.FieldManager), client.ForceOwnership); err != nil {
		return 0, fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	m.mu.Lock()
	if m.wrote[key] == nil {
		m.wrote[key] = map[string]applied{}
	}
	m.wrote[key][name] = applied{resourceVersion: out.GetResourceVersion(), object: sum, fields: hashString(orderlyFields(out))}
	m.mu.Unlock()
	return readyOf(out), nil
}

// purge deletes the policy's objects in its namespace on the member that want does
// not name.
func (m *memberSyncer) purge(ctx context.Context, p *plan, want map[string]bool) error {
	for _, gvk := range placedKinds {
		items, err := m.listCopies(ctx, gvk, p.Namespace, p.UID)
		if err != nil {
			return fmt.Errorf("listing %ss: %w", gvk.Kind, err)
		}
		for _, item := range items {
			if want[objKey(gvk, item.Name)] || item.Labels[fleetv1alpha1.PolicyUIDLabel] != string(p.UID) {
				continue
			}
			item.SetGroupVersionKind(gvk)
			// The precondition keeps a delete from hitting an object replaced since the list.
			if err := m.client.Delete(ctx, item, client.Preconditions{UID: &item.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return fmt.Errorf("deleting %s %s: %w", gvk.Kind, item.Name, err)
			}
		}
	}
	return nil
}

// admits says whether policies of namespace ns may place on the member.
func (m *memberSyncer) admits(ns string) bool {
	return slices.Contains(m.allowed, ns) || slices.Contains(m.allowed, "*")
}

// registry holds one memberSyncer per ClusterProfile Orderly has credentials for,
// by the profile's namespace and name: a profile named like another in a different
// namespace never reaches, replaces or removes the other's connection.
type registry struct {
	ctx     context.Context
	clock   clock.PassiveClock
	timings timings
	notify  func(types.NamespacedName)

	mu      sync.Mutex
	members map[types.NamespacedName]*memberSyncer
}

func newRegistry(ctx context.Context, clk clock.PassiveClock, t timings, notify func(types.NamespacedName)) *registry {
	return &registry{ctx: ctx, clock: clk, timings: t, notify: notify, members: map[types.NamespacedName]*memberSyncer{}}
}

// ensure returns the member's syncer, made anew when its credentials changed.
func (g *registry) ensure(key types.NamespacedName, hash string, allowed []string, cfg *rest.Config, newClient func(*rest.Config) (client.Client, error)) (*memberSyncer, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m, ok := g.members[key]; ok && m.hash == hash {
		return m, nil
	}
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	m := newMemberSyncer(key, hash, cfg, c, g.clock, g.timings, g.notify)
	m.allowed = allowed
	if old, ok := g.members[key]; ok {
		old.stop()
		old.mu.Lock()
		m.plans, m.results, m.purged = old.plans, old.results, old.purged
		old.mu.Unlock()
		for k := range m.plans {
			m.queue.Add(k)
		}
	}
	g.members[key] = m
	ctx, cancel := context.WithCancel(g.ctx)
	m.cancel = cancel
	go m.run(ctx, MemberWorkers)
	return m, nil
}

func (g *registry) get(key types.NamespacedName) *memberSyncer {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.members[key]
}

// remove stops and forgets a member whose credentials went away.
func (g *registry) remove(key types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m, ok := g.members[key]; ok {
		m.stop()
		delete(g.members, key)
	}
}

func (g *registry) all() []*memberSyncer {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Collect(maps.Values(g.members))
}

// setIfChanged is set, unless the member holds an equal plan already.
func (m *memberSyncer) setIfChanged(key types.NamespacedName, p *plan) {
	m.mu.Lock()
	cur := m.plans[key]
	m.mu.Unlock()
	if cur != nil && equality.Semantic.DeepEqual(cur, p) {
		return
	}
	m.set(key, p)
}
