// Package placement is the PlacementPolicy controller: it places workloads of a
// namespace on member clusters chosen from the ClusterProfile inventory, with
// server-side apply under its own field manager, one work queue and one watch on
// its copies per member, health probes written back to the ClusterProfiles,
// failover after a hysteresis and a paced return.
package placement

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clusterinventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// Name is the controller's name for --controllers.
const Name = "placement"

// finalizer holds a PlacementPolicy until its copies are removed from the members.
const finalizer = "fleet.orderly.dev/placement"

// +kubebuilder:rbac:groups=fleet.orderly.dev,resources=placementpolicies,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=fleet.orderly.dev,resources=placementpolicies/status,verbs=get;patch
// +kubebuilder:rbac:groups=fleet.orderly.dev,resources=placementpolicies/finalizers,verbs=update
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=clusterprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=clusterprofiles/status,verbs=get;patch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=placementdecisions,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps;services;serviceaccounts,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Controller is the PlacementPolicy controller as the manager runs it.
var Controller = kit.Controller{Name: Name, Cache: Cache, Setup: Setup, Workers: Workers}

// Workers is how many policies are reconciled at once by default: a reconcile
// mostly waits for one read and a status write on the hub (the members are written
// by their own queues).
const Workers = 16

// timings are the controller's intervals and timeouts. They reach the reconcilers
// and the members' syncers through the registration: Setup uses defaultTimings,
// and the integration tests register the controller with shorter ones.
type timings struct {
	// MaxRequeue is the longest a policy waiting for a time (unhealthyFor, a return
	// step) waits before it looks again.
	MaxRequeue time.Duration
	// RequestTimeout bounds every request to a member.
	RequestTimeout time.Duration
	// SyncTimeout bounds one policy's sync on one member.
	SyncTimeout time.Duration
	// Resync is how often each policy's objects are applied to each member again
	// (jittered up to half as much again): a safety net, since the member's copies
	// are watched (watch.go).
	Resync time.Duration
	// FallbackResync replaces Resync on a member that refuses the watches (403):
	// there it is the only way drift and readiness are noticed.
	FallbackResync time.Duration
	// ProbeInterval is how often each member's /readyz is probed.
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe: a member slower than this counts as unhealthy
	// for that probe (failover waits failover.unhealthyFor on top).
	ProbeTimeout time.Duration
}

// defaultTimings are the timings the manager runs with.
func defaultTimings() timings {
	return timings{
		MaxRequeue:     time.Minute,
		RequestTimeout: 10 * time.Second,
		SyncTimeout:    30 * time.Second,
		Resync:         5 * time.Minute,
		FallbackResync: 30 * time.Second,
		ProbeInterval:  10 * time.Second,
		ProbeTimeout:   5 * time.Second,
	}
}

// Reconciler reconciles PlacementPolicies.
type Reconciler struct {
	client.Client
	APIReader client.Reader
	Recorder  kit.Recorder
	Clock     clock.PassiveClock
	// Namespace is the manager's: nothing is placed from it.
	Namespace string
	members   *registry
	timings   timings
}

// Setup builds the health prober and the placement reconciler and registers them.
func Setup(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
	return setup(ctx, mgr, deps, defaultTimings())
}

// setup is Setup with the given timings.
func setup(ctx context.Context, mgr ctrl.Manager, deps kit.Deps, t timings) error {
	events := make(chan event.GenericEvent, 4096)
	notify := func(key types.NamespacedName) {
		pp := &fleetv1alpha1.PlacementPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		select {
		case events <- event.GenericEvent{Object: pp}:
		default: // full (4096 waiting): the status catches up at the policy's next reconcile
		}
	}
	if _, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: clusterinventoryv1alpha1.Group, Kind: clusterinventoryv1alpha1.ClusterProfileKind}); err != nil {
		if meta.IsNoMatchError(err) {
			// Without the inventory API there is nothing to place on; the other
			// controllers run on.
			logf.FromContext(ctx).Error(err, "The ClusterProfile CRD (multicluster.x-k8s.io) is not installed: the placement controller is off until it is and the manager restarts; apply config/crd/external")
			return nil
		}
		return fmt.Errorf("looking up ClusterProfiles: %w", err)
	}
	clk := deps.ClockOrReal()
	reg := newRegistry(ctx, clk, t, notify)
	h := &HealthReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Clock: clk, Namespace: deps.Namespace, members: reg, timings: t}
	if err := h.SetupWithManager(mgr, deps.Options); err != nil {
		return err
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: kit.EventsFor(mgr, "orderly-placement"), Clock: clk, Namespace: deps.Namespace, members: reg, timings: t}
	return r.SetupWithManager(ctx, mgr, deps.Options, events)
}

// Cache keeps PlacementPolicies and ClusterProfiles without their managed fields.
// The objects a policy places are read from the API server when it is reconciled
// (the shared cache holds Secrets narrowed for other controllers); Deployments and
// ConfigMaps are watched as metadata to notice changes quickly.
func Cache() kit.CacheRules {
	return kit.CacheRules{
		&fleetv1alpha1.PlacementPolicy{}:           {Transform: cache.TransformStripManagedFields()},
		&clusterinventoryv1alpha1.ClusterProfile{}: {Transform: cache.TransformStripManagedFields()},
	}
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options, events <-chan event.GenericEvent) error {
	hub, err := newHubCache(mgr)
	if err != nil {
		return err
	}
	if err := indexPolicies(ctx, mgr); err != nil {
		return err
	}
	workloadChanged := builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		WithOptions(opts).
		For(&fleetv1alpha1.PlacementPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&clusterinventoryv1alpha1.ClusterProfile{}, handler.EnqueueRequestsFromMapFunc(r.allPolicies)).
		// The placeable kinds on the hub, by metadata: a change reaches the members at
		// once (hubwatch.go). Services and Secrets come from a cache of their own.
		Watches(&appsv1.Deployment{}, r.selecting("Deployment"), builder.OnlyMetadata, workloadChanged).
		Watches(&appsv1.StatefulSet{}, r.selecting("StatefulSet"), builder.OnlyMetadata, workloadChanged).
		Watches(&corev1.ConfigMap{}, r.selecting("ConfigMap"), builder.OnlyMetadata).
		Watches(&corev1.ServiceAccount{}, r.selecting("ServiceAccount"), builder.OnlyMetadata).
		WatchesRawSource(source.Kind(hub, client.Object(hubObject("Service")), r.selecting("Service"))).
		WatchesRawSource(source.Kind(hub, client.Object(hubObject("Secret")), r.selecting("Secret"))).
		WatchesRawSource(source.Channel(events, memberResults())).
		Complete(r)
}

func (r *Reconciler) allPolicies(ctx context.Context, _ client.Object) []reconcile.Request {
	var list fleetv1alpha1.PlacementPolicyList
	if err := r.List(ctx, &list); err != nil {
		return nil
	}
	return kit.Requests(list.Items)
}

// observation is what one reconcile saw and decided; the status is computed from it.
type observation struct {
	selectErr  error
	resources  int32
	chosen     int32
	clusters   []fleetv1alpha1.ClusterStatus
	unplaced   int32
	planErrors []string
	decisionOK bool
	// refused are selected clusters whose allow-list does not admit the namespace.
	refused  []string
	decision string
}

// Reconcile places one policy's objects.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pp fleetv1alpha1.PlacementPolicy
	if err := r.Get(ctx, req.NamespacedName, &pp); err != nil {
		if apierrors.IsNotFound(err) {
			series.Forget(req.NamespacedName)
			// Gone (its finalizer ran, or was removed by hand): stop applying its
			// objects; what is left on the members stays.
			for _, m := range r.members.all() {
				m.drop(req.NamespacedName)
			}
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !pp.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &pp)
	}
	if err := kit.AddFinalizer(ctx, r.Client, r.APIReader, &pp, finalizer); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if kit.ProtectedNamespace(pp.Namespace, r.Namespace) {
		return ctrl.Result{}, kit.PatchStatus(ctx, r.Client, r.APIReader, &pp, func(o *fleetv1alpha1.PlacementPolicy) {
			o.Status.ObservedGeneration = o.Generation
			c := kit.ConditionsOf(&o.Status.Conditions, o.Generation)
			c.False(ConditionScheduled, ReasonProtectedNamespace, "Orderly places nothing from kube-* namespaces or its own namespace.")
			c.False(ConditionReady, ReasonNotScheduled, "Not scheduled: see the Scheduled condition.")
		})
	}
	began := time.Now()
	obs, wake, err := r.place(ctx, &pp)
	placementLatency.WithLabelValues(series.Values(req.NamespacedName)...).Observe(time.Since(began).Seconds())
	prev, perr := kit.PatchStatusReplacing(ctx, r.Client, r.APIReader, &pp, func(o *fleetv1alpha1.PlacementPolicy) { computeStatus(o, obs) })
	if perr != nil {
		return ctrl.Result{}, perr
	}
	if prev != nil {
		r.recordTransitions(prev, &pp)
	}
	recordMetrics(&pp)
	if err != nil {
		return ctrl.Result{}, err
	}
	res := ctrl.Result{}
	if !wake.IsZero() {
		res.RequeueAfter = min(max(wake.Sub(r.Clock.Now()), time.Second), r.timings.MaxRequeue)
	}
	return res, nil
}

func (r *Reconciler) profile(ctx context.Context, key types.NamespacedName) *clusterinventoryv1alpha1.ClusterProfile {
	var cp clusterinventoryv1alpha1.ClusterProfile
	if err := r.Get(ctx, key, &cp); err != nil {
		return nil
	}
	return &cp
}

// clusterKey is the ClusterProfile a status entry is about.
func clusterKey(c fleetv1alpha1.ClusterStatus) types.NamespacedName {
	return types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
}

func fillResult(cs *fleetv1alpha1.ClusterStatus, m *memberSyncer, key types.NamespacedName) {
	res, ok := m.result(key)
	if !ok {
		return
	}
	cs.Applied, cs.ReadyReplicas = res.Applied, res.Ready
	if res.Synced {
		t := metav1.NewTime(res.LastSync.Truncate(time.Second))
		cs.LastSync = &t
	}
	cs.Error = kit.Truncate(res.Err, 1024)
}

func toInt32(v any) int32 {
	switch n := v.(type) {
	case int64:
		return int32(n)
	case float64:
		return int32(n)
	case int32:
		return n
	case int:
		return int32(n)
	}
	return 0
}

// writeDecision publishes the chosen clusters as the standard PlacementDecision of
// the same name, owned by the policy. One that exists and is not the policy's is
// left alone and reported.
func (r *Reconciler) writeDecision(ctx context.Context, pp *fleetv1alpha1.PlacementPolicy, members []member) error {
	var existing clusterinventoryv1alpha1.PlacementDecision
	err := r.Get(ctx, client.ObjectKeyFromObject(pp), &existing)
	switch {
	case err == nil:
		if !metav1.IsControlledBy(&existing, pp) {
			return fmt.Errorf("PlacementDecision %s exists and is not this policy's: left alone", pp.Name)
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading PlacementDecision %s: %w", pp.Name, err)
	}
	d := &clusterinventoryv1alpha1.PlacementDecision{
		ObjectMeta: metav1.ObjectMeta{Name: pp.Name, Namespace: pp.Namespace, Labels: map[string]string{
			clusterinventoryv1alpha1.PlacementKeyLabel:  pp.Name,
			clusterinventoryv1alpha1.DecisionIndexLabel: "0",
			"app.kubernetes.io/managed-by":              "orderly",
			fleetv1alpha1.PolicyNameLabel:               pp.Name,
		}},
		SchedulerName: "orderly-placement",
		Decisions:     []clusterinventoryv1alpha1.ClusterDecision{},
	}
	d.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(pp, fleetv1alpha1.GroupVersion.WithKind("PlacementPolicy"))}
	for _, m := range members {
		if m.Phase == fleetv1alpha1.ClusterFailed || m.Phase == fleetv1alpha1.ClusterUnreachable {
			continue
		}
		// The namespace is always set: left empty it would mean the decision's own.
		d.Decisions = append(d.Decisions, clusterinventoryv1alpha1.ClusterDecision{
			ClusterProfileRef: clusterinventoryv1alpha1.ClusterProfileReference{Namespace: m.Key.Namespace, Name: m.Key.Name},
			Reason:            string(m.Phase),
		})
	}
	if err == nil && decisionUpToDate(&existing, d) {
		// Most reconciles change no decision: no write.
		return nil
	}
	return kit.Apply(ctx, r.Client, d)
}

// decisionUpToDate says whether the existing decision already says what want says.
func decisionUpToDate(existing, want *clusterinventoryv1alpha1.PlacementDecision) bool {
	for k, v := range want.Labels {
		if existing.Labels[k] != v {
			return false
		}
	}
	return existing.SchedulerName == want.SchedulerName && equality.Semantic.DeepEqual(existing.Decisions, want.Decisions)
}

// finalize removes the policy's copies from every member (deletionPolicy Delete)
// or leaves them (Orphan), then lets the policy go.
func (r *Reconciler) finalize(ctx context.Context, pp *fleetv1alpha1.PlacementPolicy) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(pp)
	if pp.Spec.DeletionPolicy == fleetv1alpha1.DeletionOrphan {
		for _, m := range r.members.all() {
			m.drop(key)
		}
		return ctrl.Result{}, kit.RemoveFinalizer(ctx, r.Client, r.APIReader, pp, finalizer)
	}
	var pending []string
	for _, c := range pp.Status.Clusters {
		m := r.members.get(clusterKey(c))
		if m == nil {
			// No credentials any more: nothing can be removed there.
			r.Recorder.Eventf(pp, nil, corev1.EventTypeWarning, "CopiesLeft", "Delete",
				"Orderly has no credentials for cluster %s: its copies stay there", clusterKey(c))
			continue
		}
		if res, ok := m.result(key); ok && res.Forgotten {
			continue
		}
		m.setIfChanged(key, &plan{UID: pp.UID, Namespace: pp.Namespace, Purge: true, Forget: true})
		pending = append(pending, clusterKey(c).String())
	}
	if len(pending) > 0 {
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	for _, m := range r.members.all() {
		m.drop(key)
	}
	return ctrl.Result{}, kit.RemoveFinalizer(ctx, r.Client, r.APIReader, pp, finalizer)
}
