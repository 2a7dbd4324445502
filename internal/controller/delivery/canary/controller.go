// Package canary implements the Canary controller: it runs a Deployment's pod template
// in a primary and, for a new template, a canary; shifts traffic to the canary step by
// step through Gateway API HTTPRoutes or Istio VirtualServices; judges each step
// against the primary on Prometheus metrics (package judge); and promotes or rolls
// back by itself, with a record of each decision in the status.
package canary

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// Name is the controller's name, as given to --controllers.
const Name = "canary"

// finalizer keeps a Canary until the target Deployment has its replicas back.
const finalizer = "delivery.orderly.dev/restore-target"

// targetIndex indexes Canaries by "<namespace>/<target name>", so that an event on a
// user's Deployment reaches the Canary that delivers it.
const targetIndex = "spec.targetRef.name"

// releaseWait bounds how long a deleted Canary waits for the target Deployment to be
// ready again before it lets go (the primary keeps serving until then).
const releaseWait = 5 * time.Minute

// busyRetry is how soon an analysis that found its Prometheus busy with other
// Canaries' analyses tries again.
const busyRetry = 200 * time.Millisecond

// queryRecheck is how soon queries that could not be checked, Prometheus not
// answering, are checked again.
const queryRecheck = 30 * time.Second

// gateCooldown is how long an unreachable Prometheus is not asked again.
const gateCooldown = 5 * time.Second

// Reconciler reconciles Canaries.
type Reconciler struct {
	client.Client
	// APIReader reads straight from the API server: Deployments (the shared cache may
	// hold them trimmed for another controller), routes (their kinds may not be
	// installed), the provider's Secret (Secrets are never cached), and the latest
	// Canary after a write lost its optimistic lock.
	APIReader client.Reader
	Recorder  kit.Recorder
	// Clock is the time steps are timed with; the wall clock when nil.
	Clock clock.PassiveClock
	// ManagerNamespace is the manager's own namespace, where no Canary acts.
	ManagerNamespace string

	kinds *kit.KindDetector
	// watches watches the route kinds from the first Canary that uses one (watch.go);
	// nil in unit tests.
	watches *kit.KindWatches
	// claimsWatched: HostnameClaims are watched (hostnames.go); false in unit tests.
	claimsWatched bool
	prom          *prometheusClients
	gate          *gate
}

// Controller is the Canary controller as the manager runs it.
var Controller = kit.Controller{Name: Name, Cache: Cache, Setup: Setup, Workers: Workers}

// Workers is how many Canaries are reconciled at once by default. A reconcile mostly
// waits (on the API server, on Prometheus), and the analyses of many Canaries fall
// due together at each step: with 4, the benchmark's 200 Canaries saw a p99 lag of
// 29 s behind schedule.
const Workers = 16

// Setup builds the reconciler and registers it with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
	return NewReconciler(mgr, deps).SetupWithManager(ctx, mgr, deps.Options)
}

// NewReconciler is the reconciler Setup registers.
func NewReconciler(mgr ctrl.Manager, deps kit.Deps) *Reconciler {
	clk := deps.ClockOrReal()
	workers := max(deps.Options.MaxConcurrentReconciles, 1)
	return &Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: kit.EventsFor(mgr, "orderly-canary"),
		Clock:    clk, ManagerNamespace: deps.Namespace,
		kinds: kit.NewKindDetector(mgr.GetRESTMapper(), clk, nil),
		prom:  newPrometheusClients(),
		// Half the workers at most wait on one Prometheus: the others go on with
		// Canaries of other servers, and with everything that is not an analysis.
		gate: newGate(max(workers/2, 1), gateCooldown),
	}
}

// The manager writes the Deployments and Services it creates, scales the user's
// Deployment (patch), and sets weights in routes (update; routes are watched by
// metadata, and CRDs by name, to notice a route or its CRD appearing). A route it
// creates carries only hostnames claimed for the Canary's namespace: it watches
// HostnameClaims (all Orderly's, and cached whole for ServiceDomain anyway) and reads
// the ServiceDomain a claim names (get). It reads
// Secrets one by one, by name, in a Canary's own namespace (get only: never listed,
// watched or cached). Nothing is deleted by Orderly: what it creates carries an owner
// reference and goes with the Canary.
//
// +kubebuilder:rbac:groups=delivery.orderly.dev,resources=canaries,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=delivery.orderly.dev,resources=canaries/status,verbs=get;patch
// +kubebuilder:rbac:groups=delivery.orderly.dev,resources=canaries/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=networking.istio.io,resources=virtualservices,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=network.orderly.dev,resources=hostnameclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=network.orderly.dev,resources=servicedomains,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Cache narrows the manager's cache to what this controller needs: of Services, only
// those Orderly manages. Deployments are watched by metadata only (see
// SetupWithManager) and read from the API server.
func Cache() kit.CacheRules {
	managed := cache.ByObject{Label: k8slabels.SelectorFromSet(k8slabels.Set{labels.ManagedBy: labels.ManagedByValue})}
	return kit.CacheRules{
		&corev1.Service{}: managed,
	}
}

func (r *Reconciler) clock() clock.PassiveClock {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}

// SetupWithManager registers the controller with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &deliveryv1alpha1.Canary{}, targetIndex, func(o client.Object) []string {
		c := o.(*deliveryv1alpha1.Canary)
		return []string{c.Namespace + "/" + c.Spec.TargetRef.Name}
	}); err != nil {
		return fmt.Errorf("indexing Canaries by target: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &deliveryv1alpha1.Canary{}, routeIndex, indexRoutes); err != nil {
		return fmt.Errorf("indexing Canaries by route: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &deliveryv1alpha1.Canary{}, claimIndex, indexClaims); err != nil {
		return fmt.Errorf("indexing Canaries by the hostnames of their created routes: %w", err)
	}
	watches, err := kit.NewKindWatches(mgr, kit.KindWatchOptions{Clock: r.clock(), Kinds: r.kinds, Views: []kit.View{{Name: routesView}}})
	if err != nil {
		return err
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		WithOptions(opts).
		// Annotations carry `orderly canary promote` and `abort`.
		For(&deliveryv1alpha1.Canary{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&corev1.Service{}).
		// Deployments by metadata only: the target (a new template bumps its
		// generation) and the primary and canary (their rollouts). What the cache
		// holds of them is never read: Deployments are read from the API server.
		Watches(&appsv1.Deployment{}, handler.EnqueueRequestsFromMapFunc(r.canariesForDeployment), builder.OnlyMetadata).
		// A hostname claimed or released decides what a created route may carry.
		Watches(&networkv1alpha1.HostnameClaim{}, handler.EnqueueRequestsFromMapFunc(r.canariesForClaim)).
		Build(r)
	if err != nil {
		return err
	}
	r.watches, r.claimsWatched = watches, true
	return watches.Bind(c)
}

// canariesForDeployment maps a Deployment to the Canary that created it (by label) or
// that delivers it (by index).
func (r *Reconciler) canariesForDeployment(ctx context.Context, o client.Object) []reconcile.Request {
	if name := o.GetLabels()[deliveryv1alpha1.CanaryLabel]; name != "" && o.GetLabels()[labels.ManagedBy] == labels.ManagedByValue {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
	}
	var list deliveryv1alpha1.CanaryList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{targetIndex: o.GetNamespace() + "/" + o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "Listing Canaries for Deployment", "deployment", o.GetName())
		return nil
	}
	return kit.Requests(list.Items)
}

// Reconcile moves one Canary's delivery on.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// Read from the API server, not the cache: the analysis goes on from the status,
	// and the cache may not have this controller's own last status write yet (the
	// write's own consequences, such as the primary's rollout, trigger the next
	// reconcile at once). A plan made from a stale status would act on a past state.
	var c deliveryv1alpha1.Canary
	if err := r.APIReader.Get(ctx, req.NamespacedName, &c); err != nil {
		if apierrors.IsNotFound(err) {
			series.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !c.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &c)
	}
	if reason, msg := r.refused(&c); reason != "" {
		// Nothing is touched in a namespace Orderly leaves alone.
		return ctrl.Result{}, r.writeStatus(ctx, &c, nil, &blockage{reason: reason, message: msg})
	}
	if err := kit.AddFinalizer(ctx, r.Client, r.APIReader, &c, finalizer); err != nil {
		if errors.Is(err, kit.ErrDeleting) {
			return r.finalize(ctx, &c)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return r.deliver(ctx, &c)
}

// refused says why the Canary must not act at all: the manager's own namespace and
// kube-* namespaces are left alone.
func (r *Reconciler) refused(c *deliveryv1alpha1.Canary) (reason, message string) {
	if kit.ProtectedNamespace(c.Namespace, r.ManagerNamespace) {
		return "NamespaceNotAllowed", fmt.Sprintf("Orderly does not deliver in namespace %s (kube-* namespaces and Orderly's own are left alone)", c.Namespace)
	}
	return "", ""
}

// blockage is why a Canary cannot go on before plan runs (its target is missing or
// held by another Canary, or what it would create exists and is not its own).
type blockage struct {
	reason, message string
}

// deliver observes, plans and converges one Canary.
func (r *Reconciler) deliver(ctx context.Context, c *deliveryv1alpha1.Canary) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	now := r.clock().Now()

	target, err := r.getDeployment(ctx, c.Namespace, c.Spec.TargetRef.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if target == nil {
		return ctrl.Result{}, r.writeStatus(ctx, c, nil, &blockage{reason: "TargetNotFound",
			message: fmt.Sprintf("Deployment %s does not exist in namespace %s", c.Spec.TargetRef.Name, c.Namespace)})
	}
	if holder := target.Annotations[deliveryv1alpha1.TargetAnnotation]; holder != "" && holder != c.Name {
		return ctrl.Result{}, r.writeStatus(ctx, c, nil, &blockage{reason: "TargetHeld",
			message: fmt.Sprintf("Deployment %s is delivered by Canary %s", target.Name, holder)})
	}
	primary, err := r.getDeployment(ctx, c.Namespace, variantName(c, deliveryv1alpha1.VariantPrimary))
	if err != nil {
		return ctrl.Result{}, err
	}
	canary, err := r.getDeployment(ctx, c.Namespace, variantName(c, deliveryv1alpha1.VariantCanary))
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, d := range []*appsv1.Deployment{primary, canary} {
		if d != nil && !metav1.IsControlledBy(d, c) {
			nerr := &errNotOurs{kind: "Deployment", name: d.Name}
			return ctrl.Result{}, r.writeStatus(ctx, c, nil, &blockage{reason: "Conflict", message: nerr.Error()})
		}
	}
	for _, v := range []string{deliveryv1alpha1.VariantPrimary, deliveryv1alpha1.VariantCanary} {
		if err := r.ensureService(ctx, c, v); err != nil {
			var nerr *errNotOurs
			if errors.As(err, &nerr) {
				return ctrl.Result{}, r.writeStatus(ctx, c, nil, &blockage{reason: "Conflict", message: nerr.Error()})
			}
			return r.reportRefused(ctx, c, err)
		}
	}

	obs := &observation{
		now:            now,
		targetRevision: revisionOf(&target.Spec.Template),
		replicas:       replicasOf(target),
		primary:        variantStateOf(primary),
		canary:         variantStateOf(canary),
		trafficReady:   true,
		queriesValid:   true,
	}
	routes := make([]routerObservation, 0, 2)
	for _, rt := range routersOf(c) {
		o, err := r.observeRouter(ctx, c, rt)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !o.ready() {
			obs.trafficReady = false
		}
		obs.weight = max(obs.weight, o.weight)
		routes = append(routes, o)
	}
	st := &c.Status
	obs.promote = c.Annotations[deliveryv1alpha1.PromoteAnnotation] == PromoteValue(st.Revision, st.CurrentStep) && st.Revision != ""
	obs.abort = c.Annotations[deliveryv1alpha1.AbortAnnotation] == st.Revision && st.Revision != ""

	// Queries are checked by Prometheus once per generation, before they are needed.
	queries := r.checkQueries(ctx, c, obs)

	var out *outcome
	if due(c, obs) {
		scheduled := nextAnalysis(c)
		out, err = r.analyse(ctx, c, now)
		var qe *QueryError
		switch {
		case errors.As(err, &qe):
			obs.queriesValid = false
			queries = &queryCheck{status: metav1.ConditionFalse, reason: "InvalidQuery", message: qe.Error()}
			out = nil
		case errors.Is(err, errBusy):
			// Other Canaries are waiting on the same Prometheus: come back shortly.
			return ctrl.Result{RequeueAfter: busyRetry}, nil
		case err != nil:
			return ctrl.Result{}, err
		}
		if out != nil && st.HoldingSince == nil {
			analysisLag.Observe(max(now.Sub(scheduled), 0).Seconds())
		}
		if out != nil && out.providerErr != nil {
			queries.provider = out.providerErr
		} else if out != nil {
			queries.contacted = true
		}
	}

	res := plan(c, obs, out)

	// Traffic first: a weight that goes down (rollback, a new revision, a canary that
	// is not ready) is written before the canary changes; a weight that goes up is
	// only planned for a ready canary.
	if obs.trafficReady {
		for i := range routes {
			// Writes only what differs: nothing when the route is as wanted.
			if err := r.writeWeight(ctx, c, &routes[i], res.desired.weight); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if err := r.converge(ctx, c, target, primary, canary, obs, &res); err != nil {
		var nerr *errNotOurs
		if errors.As(err, &nerr) {
			return ctrl.Result{}, r.writeStatus(ctx, c, nil, &blockage{reason: "Conflict", message: nerr.Error()})
		}
		return r.reportRefused(ctx, c, err)
	}
	for i := range routes {
		routes[i].status.CanaryWeight = &routes[i].weight
	}
	if err := r.writeStatus(ctx, c, &statusInput{res: &res, routes: routes, queries: queries}, nil); err != nil {
		if errors.Is(err, errStaleStatus) {
			// Planned from a status that another write replaced: plan again.
			return ctrl.Result{RequeueAfter: requeueSlack}, nil
		}
		return ctrl.Result{}, err
	}
	res.requeueAfter = trafficRequeue(&res, obs, routes)
	// Queries not checked yet are checked again without waiting for an event: soon
	// when Prometheus was busy with other Canaries, later when it did not answer.
	recheck := time.Duration(0)
	switch {
	case queries.reason == "NotChecked":
		recheck = busyRetry
	case queries.status == metav1.ConditionUnknown:
		recheck = queryRecheck
	}
	if recheck > 0 && (res.requeueAfter == 0 || res.requeueAfter > recheck) {
		res.requeueAfter = recheck
	}
	logger.V(1).Info("Reconciled Canary", "phase", res.status.Phase, "step", res.status.CurrentStep, "weight", res.status.CanaryWeight)
	return ctrl.Result{RequeueAfter: res.requeueAfter}, nil
}

// reportRefused reports a write the API server refused for a reason a person must
// act on (a ResourceQuota, an admission policy, a full Service IP range) as Ready=False
// with the API server's message, and tries again after refusedRetry: nothing this
// controller watches changes when the cause is removed, and the controller's error
// backoff would grow to minutes. Other errors (a lost race, the API server
// unreachable) are returned for the usual backoff.
func (r *Reconciler) reportRefused(ctx context.Context, c *deliveryv1alpha1.Canary, err error) (ctrl.Result, error) {
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) && !apierrors.IsInternalError(err) && !apierrors.IsBadRequest(err) {
		return ctrl.Result{}, err
	}
	log.FromContext(ctx).Info("The API server refused a write for Canary", "error", err.Error())
	if serr := r.writeStatus(ctx, c, nil, &blockage{reason: "WriteRefused", message: "the API server refused a write: " + err.Error()}); serr != nil {
		return ctrl.Result{}, errors.Join(err, serr)
	}
	return ctrl.Result{RequeueAfter: refusedRetry}, nil
}

// refusedRetry is how soon a write the API server refused is tried again.
const refusedRetry = 5 * time.Second

// converge writes the Deployments plan asked for, in order: the primary (created,
// or given the canary's template at promotion), the canary (the revision under
// analysis, or scaled to zero), then the target held at zero once the primary
// serves.
func (r *Reconciler) converge(ctx context.Context, c *deliveryv1alpha1.Canary, target, primary, canary *appsv1.Deployment, obs *observation, res *result) error {
	d := res.desired
	var primaryWant *appsv1.Deployment
	switch {
	case d.primaryTemplate == fromTarget:
		primaryWant = buildVariant(c, target, deliveryv1alpha1.VariantPrimary, &target.Spec.Template, obs.targetRevision, obs.replicas)
	case d.primaryTemplate == fromCanary && canary != nil:
		primaryWant = buildVariant(c, target, deliveryv1alpha1.VariantPrimary, &canary.Spec.Template, canary.Annotations[deliveryv1alpha1.RevisionAnnotation], obs.replicas)
	case primary != nil:
		// Keep its template; follow the replica count.
		primaryWant = buildVariant(c, target, deliveryv1alpha1.VariantPrimary, &primary.Spec.Template, primary.Annotations[deliveryv1alpha1.RevisionAnnotation], obs.replicas)
	}
	if primaryWant != nil {
		if err := r.ensureDeployment(ctx, c, primary, primaryWant); err != nil {
			return err
		}
	}
	if primary == nil {
		// The canary and the target wait until the primary exists.
		return nil
	}
	var canaryWant *appsv1.Deployment
	switch {
	case d.canaryRuns:
		canaryWant = buildVariant(c, target, deliveryv1alpha1.VariantCanary, &target.Spec.Template, obs.targetRevision, obs.replicas)
	case canary != nil:
		canaryWant = buildVariant(c, target, deliveryv1alpha1.VariantCanary, &canary.Spec.Template, canary.Annotations[deliveryv1alpha1.RevisionAnnotation], 0)
	default:
		// The canary exists from the start, at zero replicas, with the primary's
		// template: its Service and pods' labels are in place for the first revision.
		canaryWant = buildVariant(c, target, deliveryv1alpha1.VariantCanary, &primary.Spec.Template, primary.Annotations[deliveryv1alpha1.RevisionAnnotation], 0)
	}
	if err := r.ensureDeployment(ctx, c, canary, canaryWant); err != nil {
		return err
	}
	if d.scaleTargetDown {
		if scaled, err := r.holdTarget(ctx, c, target, obs.replicas); err != nil {
			return err
		} else if scaled {
			r.Recorder.Eventf(c, target, corev1.EventTypeNormal, "TargetScaledDown", "Scale",
				"Deployment %s scaled to zero while the primary serves (%d replicas restored when the Canary is deleted)", target.Name, obs.replicas)
		}
	}
	return nil
}

// finalize gives the target its replicas back, and lets the Canary go once the
// target is ready (or after releaseWait): until then the primary, which goes with
// the Canary, keeps serving.
func (r *Reconciler) finalize(ctx context.Context, c *deliveryv1alpha1.Canary) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(c, finalizer) {
		return ctrl.Result{}, nil
	}
	released, err := r.releaseTarget(ctx, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	if released != nil {
		r.Recorder.Eventf(c, released, corev1.EventTypeNormal, "TargetRestored", "Restore",
			"Deployment %s restored to %d replicas", released.Name, *released.Spec.Replicas)
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	target, err := r.getDeployment(ctx, c.Namespace, c.Spec.TargetRef.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	waited := r.clock().Since(c.DeletionTimestamp.Time)
	ready := target == nil
	if target != nil {
		ready, _ = kit.RolledOut(target, kit.RolloutComplete)
	}
	if !ready && waited < releaseWait {
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	if !ready {
		r.Recorder.Eventf(c, target, corev1.EventTypeWarning, "TargetNotReady", "Delete",
			"Deployment %s is not ready %s after the Canary's deletion; the primary goes anyway", target.Name, releaseWait)
	}
	if err := kit.RemoveFinalizer(ctx, r.Client, r.APIReader, c, finalizer); err != nil {
		return ctrl.Result{}, err
	}
	series.Forget(client.ObjectKeyFromObject(c))
	return ctrl.Result{}, nil
}
