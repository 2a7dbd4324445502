package placement

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// Each member's copies are watched, so that an edit or a deletion there is repaired
// at once and a workload's readiness reaches the policy's status at once; the
// resync (Resync) is only a safety net. The watches are a cache of the member's own,
// started and stopped with its syncer, over the placed kinds in the namespaces the
// member admits, selected by Orderly's labels, keeping only what the handlers read:
// metadata (ConfigMaps, Secrets, Services, ServiceAccounts as metadata only, so no
// Secret data is ever held) and a workload's ready replicas.

// refusalMemory is how long a member's refusal (403) of a list or watch counts, on
// the injected clock (tests with a fake clock move it to let a refusal wear off). The
// reflector retries a failed list at least every minute, so a refusal that lasts
// stays fresh and one that was lifted (RBAC fixed on the member) wears off.
const refusalMemory = 2 * time.Minute

// copySelector selects the objects Orderly placed: managed by Orderly and carrying a
// policy's UID.
func copySelector() k8slabels.Selector {
	managed, _ := k8slabels.NewRequirement(labels.ManagedBy, selection.Equals, []string{labels.ManagedByValue})
	owned, _ := k8slabels.NewRequirement(fleetv1alpha1.PolicyUIDLabel, selection.Exists, nil)
	return k8slabels.NewSelector().Add(*managed, *owned)
}

// watchedObject is the object a kind is watched as: typed for workloads (their
// status is read), metadata only for the others.
func watchedObject(gvk schema.GroupVersionKind) client.Object {
	switch gvk.Kind {
	case "Deployment":
		return &appsv1.Deployment{}
	case "StatefulSet":
		return &appsv1.StatefulSet{}
	}
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(gvk)
	return o
}

// watchedList is the list type of watchedObject(gvk).
func watchedList(gvk schema.GroupVersionKind) client.ObjectList {
	switch gvk.Kind {
	case "Deployment":
		return &appsv1.DeploymentList{}
	case "StatefulSet":
		return &appsv1.StatefulSetList{}
	}
	return metadataList(gvk)
}

func metadataList(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return l
}

// placedKindsMapper maps the placed kinds without asking the member (discovery would
// block on a member that is down).
func placedKindsMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range placedKinds {
		m.Add(gvk, meta.RESTScopeNamespace)
		// A cache over several namespaces asks the mapper about the list's kind.
		m.Add(gvk.GroupVersion().WithKind(gvk.Kind+"List"), meta.RESTScopeNamespace)
	}
	return m
}

// startWatch starts the member's watches; they stop when ctx ends. No namespace
// admitted means nothing can be placed there, so nothing is watched.
func (m *memberSyncer) startWatch(ctx context.Context) error {
	if len(m.allowed) == 0 {
		return nil
	}
	var namespaces map[string]cache.Config
	if !slices.Contains(m.allowed, "*") {
		namespaces = map[string]cache.Config{}
		for _, ns := range m.allowed {
			namespaces[ns] = cache.Config{}
		}
	}
	cfg := rest.CopyConfig(m.cfg)
	// The request timeout would cut every watch after a few seconds.
	cfg.Timeout = 0
	c, err := cache.New(cfg, cache.Options{
		Scheme: m.client.Scheme(), Mapper: placedKindsMapper(),
		DefaultNamespaces: namespaces, DefaultLabelSelector: copySelector(), DefaultTransform: slimCopy,
		DefaultWatchErrorHandler: m.watchFailed,
	})
	if err != nil {
		return fmt.Errorf("building the watches on member %s: %w", m.key, err)
	}
	var informers []cache.Informer
	for _, gvk := range placedKinds {
		inf, err := c.GetInformer(ctx, watchedObject(gvk), cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("watching %ss on member %s: %w", gvk.Kind, m.key, err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			UpdateFunc: func(old, cur any) { m.copyUpdated(gvk, old, cur) },
			DeleteFunc: func(obj any) { m.copyDeleted(gvk, obj) },
		}); err != nil {
			return fmt.Errorf("watching %ss on member %s: %w", gvk.Kind, m.key, err)
		}
		informers = append(informers, inf)
	}
	m.watchMu.Lock()
	m.informers, m.copies = informers, c
	m.watchMu.Unlock()
	go func() {
		if err := c.Start(ctx); err != nil {
			logf.FromContext(ctx).Error(err, "Watching Orderly's copies on a member", "member", m.key.String())
		}
	}()
	return nil
}

// watchFailed is the reflectors' error handler. A refusal (403) is logged once per
// resource and switches the member to the short resync (FallbackResync); anything
// else (the member down, a dropped connection) is retried by the reflector and left
// to the health probe to report.
func (m *memberSyncer) watchFailed(ctx context.Context, r *toolscache.Reflector, err error) {
	if !apierrors.IsForbidden(err) {
		logf.FromContext(ctx).V(1).Info("Watching Orderly's copies on a member failed; retrying", "member", m.key.String(), "error", err.Error())
		return
	}
	resource := ""
	if s := apiStatus(err); s != nil && s.Details != nil {
		resource = schema.GroupResource{Group: s.Details.Group, Resource: s.Details.Kind}.String()
	}
	if resource == "" && r != nil {
		resource = r.TypeDescription()
	}
	now := m.clock.Now()
	m.watchMu.Lock()
	wasFallback := m.fallbackLocked(now)
	m.refused[resource] = now
	first := !m.refusalLogged[resource]
	m.refusalLogged[resource] = true
	m.watchMu.Unlock()
	if first {
		logf.FromContext(ctx).Info("A member refuses to let Orderly watch its copies there: changes on it are noticed by the resync every "+m.timings.FallbackResync.String()+"; grant the kubeconfig's identity list and watch on the placed kinds",
			"member", m.key.String(), "resource", resource)
	}
	if !wasFallback {
		// Policies waiting for the long resync come back within the short one.
		m.mu.Lock()
		keys := slices.Collect(maps.Keys(m.plans))
		m.mu.Unlock()
		for _, k := range keys {
			m.queue.AddWithOpts(priorityqueue.AddOpts{After: m.timings.FallbackResync, Priority: ptr.To(resyncPriority)}, k)
		}
	}
}

func apiStatus(err error) *metav1.Status {
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		st := s.Status()
		return &st
	}
	return nil
}

// fallbackLocked says whether a refusal is recent enough to count; watchMu held.
func (m *memberSyncer) fallbackLocked(now time.Time) bool {
	for _, t := range m.refused {
		if now.Sub(t) < refusalMemory {
			return true
		}
	}
	return false
}

// resyncAfter is when a synced policy is applied again: jittered so that policies
// synced together do not come back together, and short while the member refuses
// the watches.
func (m *memberSyncer) resyncAfter() time.Duration {
	m.watchMu.Lock()
	fallback := m.fallbackLocked(m.clock.Now())
	m.watchMu.Unlock()
	if fallback {
		return m.timings.FallbackResync
	}
	return wait.Jitter(m.timings.Resync, 0.5)
}

// watchState says whether the member's copies are watched: refused names the
// resources the member refused lately, synced is true once every watch has listed.
func (m *memberSyncer) watchState() (refused []string, synced bool) {
	m.watchMu.Lock()
	defer m.watchMu.Unlock()
	now := m.clock.Now()
	for r, t := range m.refused {
		if now.Sub(t) < refusalMemory {
			refused = append(refused, r)
		}
	}
	slices.Sort(refused)
	synced = len(m.informers) > 0
	for _, inf := range m.informers {
		synced = synced && inf.HasSynced()
	}
	return refused, synced
}

// copyUpdated queues the copy's policy when someone else changed what Orderly set
// (a field taken from Orderly's field manager), the copy is being deleted, or a
// workload's readiness changed. Orderly's own writes are skipped.
func (m *memberSyncer) copyUpdated(gvk schema.GroupVersionKind, old, cur any) {
	o, ok1 := old.(client.Object)
	n, ok2 := cur.(client.Object)
	if !ok1 || !ok2 {
		return
	}
	changed := orderlyFields(o) != orderlyFields(n) || n.GetDeletionTimestamp() != nil || readyOf(o) != readyOf(n)
	if !changed {
		return
	}
	if key, ok := m.wantedCopy(gvk, n); ok {
		m.queue.Add(key)
	}
}

// copyDeleted queues the copy's policy when the plan still wants the object there.
func (m *memberSyncer) copyDeleted(gvk schema.GroupVersionKind, obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	if key, ok := m.wantedCopy(gvk, o); ok {
		m.queue.Add(key)
	}
}

// wantedCopy returns the policy of a copy whose plan on this member places it and
// is active, unless the copy's version is the one Orderly's last apply wrote.
// The labels only point at a policy: the plan's UID must match.
func (m *memberSyncer) wantedCopy(gvk schema.GroupVersionKind, o client.Object) (types.NamespacedName, bool) {
	l := o.GetLabels()
	key := types.NamespacedName{Namespace: l[fleetv1alpha1.PolicyNamespaceLabel], Name: l[fleetv1alpha1.PolicyNameLabel]}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.plans[key]
	if p == nil || p.Paused || string(p.UID) != l[fleetv1alpha1.PolicyUIDLabel] || p.Namespace != o.GetNamespace() {
		return key, false
	}
	name := objKey(gvk, o.GetName())
	if rv := m.wrote[key][name].resourceVersion; rv != "" && rv == o.GetResourceVersion() {
		return key, false
	}
	for _, w := range p.Objects {
		if w.GetName() == o.GetName() && w.GroupVersionKind().GroupKind() == gvk.GroupKind() {
			return key, true
		}
	}
	return key, false
}

// orderlyFields is the set of fields Orderly's field manager owns on the object's
// main resource, as the API server serialises it. A write by anyone that changes one
// of them takes it from Orderly, so this changes; Orderly's own applies of the same
// fields, status writes and other managers' fields leave it alone.
func orderlyFields(o client.Object) string {
	for _, e := range o.GetManagedFields() {
		if e.Manager == fleetv1alpha1.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" && e.FieldsV1 != nil {
			return e.FieldsV1.GetRawString()
		}
	}
	return ""
}

// readyOf is how many of a copy's replicas count as ready: those the member reports
// ready and running the spec Orderly applied (kit.RolloutReadyAtCount: none while the
// member's controller has not seen it), at most its declared count; 0 for a kind
// without replicas.
func readyOf(o client.Object) int32 {
	r := kit.RolloutOf(o, kit.RolloutReadyAtCount)
	return min(r.Ready, r.Want)
}

// slimCopy is the watches' transform: it keeps the copy's identity, version,
// Orderly's labels, Orderly's managed fields entry (without its time) and what a
// workload's readiness is read from (readyOf: its replicas and the status counts
// beside them), and drops everything else. Idempotent; a tombstone
// passes as it is (its object was transformed when stored).
func slimCopy(in any) (any, error) {
	o, ok := in.(client.Object)
	if !ok {
		return in, nil
	}
	kept := map[string]string{}
	for _, k := range []string{labels.ManagedBy, fleetv1alpha1.PolicyNamespaceLabel, fleetv1alpha1.PolicyNameLabel, fleetv1alpha1.PolicyUIDLabel} {
		if v, ok := o.GetLabels()[k]; ok {
			kept[k] = v
		}
	}
	om := metav1.ObjectMeta{
		Name: o.GetName(), Namespace: o.GetNamespace(), UID: o.GetUID(), ResourceVersion: o.GetResourceVersion(),
		Generation: o.GetGeneration(), DeletionTimestamp: o.GetDeletionTimestamp(), Labels: kept,
	}
	if f := orderlyFields(o); f != "" {
		om.ManagedFields = []metav1.ManagedFieldsEntry{{
			Manager: fleetv1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(f),
		}}
	}
	switch w := o.(type) {
	case *appsv1.Deployment:
		return &appsv1.Deployment{TypeMeta: w.TypeMeta, ObjectMeta: om, Spec: appsv1.DeploymentSpec{Replicas: w.Spec.Replicas},
			Status: appsv1.DeploymentStatus{ObservedGeneration: w.Status.ObservedGeneration, UpdatedReplicas: w.Status.UpdatedReplicas, ReadyReplicas: w.Status.ReadyReplicas}}, nil
	case *appsv1.StatefulSet:
		return &appsv1.StatefulSet{TypeMeta: w.TypeMeta, ObjectMeta: om, Spec: appsv1.StatefulSetSpec{Replicas: w.Spec.Replicas},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: w.Status.ObservedGeneration, ReadyReplicas: w.Status.ReadyReplicas}}, nil
	case *metav1.PartialObjectMetadata:
		return &metav1.PartialObjectMetadata{TypeMeta: w.TypeMeta, ObjectMeta: om}, nil
	}
	return in, nil
}

// watching says whether the watch of gvk can stand in for a read of the member:
// it has listed, and the member refused no watch lately.
func (m *memberSyncer) watching(gvk schema.GroupVersionKind) (client.Reader, bool) {
	i := slices.Index(placedKinds, gvk)
	m.watchMu.Lock()
	defer m.watchMu.Unlock()
	if m.copies == nil || i < 0 || i >= len(m.informers) || !m.informers[i].HasSynced() || m.fallbackLocked(m.clock.Now()) {
		return nil, false
	}
	return m.copies, true
}

// watchedCopy is the copy of gvk/name the watches hold (Orderly's copies only), or
// nil when they hold none or cannot be trusted.
func (m *memberSyncer) watchedCopy(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) client.Object {
	c, ok := m.watching(gvk)
	if !ok {
		return nil
	}
	o := watchedObject(gvk)
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o); err != nil {
		return nil
	}
	return o
}

// listCopies lists the policy's copies of gvk in ns: from the watches when they can
// be trusted, from the member otherwise.
func (m *memberSyncer) listCopies(ctx context.Context, gvk schema.GroupVersionKind, ns string, uid types.UID) ([]*metav1.PartialObjectMetadata, error) {
	var list client.ObjectList = metadataList(gvk)
	var reader client.Reader = m.client
	if c, ok := m.watching(gvk); ok {
		list, reader = watchedList(gvk), c
	}
	if err := reader.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{fleetv1alpha1.PolicyUIDLabel: string(uid)}); err != nil {
		return nil, err
	}
	var out []*metav1.PartialObjectMetadata
	err := meta.EachListItem(list, func(o runtime.Object) error {
		a, err := meta.Accessor(o)
		if err != nil {
			return err
		}
		out = append(out, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name: a.GetName(), Namespace: a.GetNamespace(), UID: a.GetUID(), Labels: a.GetLabels()}})
		return nil
	})
	return out, err
}

// hashObject is a hash of what an apply sends (JSON encodes map keys in order).
func hashObject(u *unstructured.Unstructured) uint64 {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64()
}

func hashString(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}
