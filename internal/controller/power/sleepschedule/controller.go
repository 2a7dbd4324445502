// Package sleepschedule implements the SleepSchedule controller: it scales the
// workloads of selected namespaces down outside their awake windows and restores them
// exactly afterwards, deriving the state from the clock at every reconcile.
package sleepschedule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// Name is the controller's name, as given to --controllers.
const Name = "sleepschedule"

// finalizer keeps a SleepSchedule until the workloads it holds asleep are woken.
const finalizer = "power.orderly.dev/wake"

// maxRequeue bounds the wait for the next transition, so that a clock that jumped
// (or a missed timer) is corrected within this time.
const maxRequeue = 15 * time.Minute

// cacheLagRetry is when a reconcile that found its cached copy of the schedule behind
// the schedule on the API server (its own last write, a conflict) looks again.
const cacheLagRetry = 100 * time.Millisecond

// Reconciler reconciles SleepSchedules.
type Reconciler struct {
	client.Client
	// APIReader reads straight from the API server, to retry a status write against
	// the latest version; the cached client when nil.
	APIReader client.Reader
	Recorder  kit.Recorder
	// Clock is the time the schedule is evaluated at; the wall clock when nil.
	Clock clock.PassiveClock
	// ManagerNamespace is the namespace Orderly runs in, which never sleeps (nor do
	// kube-* namespaces), whatever a schedule selects.
	ManagerNamespace string
	// Writers is how many workload writes the controller makes at once, all its
	// reconciles together; DefaultWriters when zero.
	Writers int

	// KindsRecheck is how often a schedule that names targets.kinds is reconciled
	// again while one of them is not watched; DefaultKindsRecheck when zero.
	KindsRecheck time.Duration
	// SleepEffectiveAfter is how long an object of targets.kinds held asleep may
	// still run more replicas than it was scaled to before it is reported;
	// DefaultSleepEffectiveAfter when zero (effect.go).
	SleepEffectiveAfter time.Duration
	running             runningSince

	poolOnce sync.Once
	writes   *writePool
	// written holds the resourceVersion of the controller's last write of each
	// schedule, so that a reconcile does not start from a cached copy older than it.
	written kit.WrittenVersions
	// kinds tells how the kinds of targets.kinds are served.
	kinds *kit.KindDetector
	// watches watches the objects of the kinds of targets.kinds (kindwatch.go); nil
	// in unit tests.
	watches *kit.KindWatches
}

// +kubebuilder:rbac:groups=power.orderly.dev,resources=sleepschedules,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=power.orderly.dev,resources=sleepschedules/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=power.orderly.dev,resources=sleepschedules/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Workers is how many SleepSchedules are reconciled at once unless
// --max-concurrent-reconciles says otherwise. A reconcile spends its time waiting:
// on workload writes, which the controller's write pool (Writers) bounds for all
// reconciles together, then on the pool to have no workload write pending before its
// status write and Events (writePool.afterWrites). Workers cost the API server
// nothing beyond the pool, so there are enough of them for every schedule of a
// transition over many small schedules to queue its writes at once: then every
// workload is written before any schedule's bookkeeping. With 8 workers, 200
// schedules of 10 workloads took 2.5 times as long as one schedule of 2,000; with
// 32, and bookkeeping between the writes, half as long again.
const Workers = 256

// Controller is the SleepSchedule controller as the manager runs it.
var Controller = kit.Controller{Name: Name, Cache: Cache, Setup: Setup, Workers: Workers}

// Setup builds the reconciler and registers it with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
	return newReconciler(mgr, deps).SetupWithManager(ctx, mgr, deps.Options)
}

// newReconciler is the reconciler Setup registers; tests change it before registering.
func newReconciler(mgr ctrl.Manager, deps kit.Deps) *Reconciler {
	var lister kit.ResourceLister
	if dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig()); err == nil {
		lister = dc
	} else {
		lister = brokenDiscovery{err}
	}
	clk := deps.ClockOrReal()
	return &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: kit.EventsFor(mgr, "orderly-sleepschedule"),
		Clock: clk, ManagerNamespace: deps.Namespace, Writers: DefaultWriters,
		kinds: kit.NewKindDetector(mgr.GetRESTMapper(), clk, nil).WithSubresources(lister)}
}

// brokenDiscovery answers every question with the error that kept the discovery
// client from being made: the kinds of targets.kinds report it.
type brokenDiscovery struct{ err error }

func (b brokenDiscovery) ServerResourcesForGroupVersion(string) (*metav1.APIResourceList, error) {
	return nil, b.err
}

func (r *Reconciler) pool() *writePool {
	r.poolOnce.Do(func() {
		n := r.Writers
		if n <= 0 {
			n = DefaultWriters
		}
		r.writes = newWritePool(n)
	})
	return r.writes
}

func (r *Reconciler) apiReader() client.Reader {
	if r.APIReader == nil {
		return r.Client
	}
	return r.APIReader
}

func (r *Reconciler) clock() clock.PassiveClock {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}

// SetupWithManager registers the controller with mgr. Every event is mapped to the
// schedules it concerns (see watches.go), never to all of them.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if err := indexes(ctx, mgr); err != nil {
		return err
	}
	workloads := delayed{r.forWorkload}
	watches, err := kit.NewKindWatches(mgr, kit.KindWatchOptions{Clock: r.clock(), Kinds: r.kinds, Views: []kit.View{{Name: kindsView}}})
	if err != nil {
		return err
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		WithOptions(opts).
		// An annotation change reconciles too: `kubectl annotate` forces a reconcile.
		For(&powerv1alpha1.SleepSchedule{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		// Another schedule's selection decides who owns a shared namespace.
		Watches(&powerv1alpha1.SleepSchedule{}, handler.EnqueueRequestsFromMapFunc(r.forOtherSchedules), builder.WithPredicates(selectionChanged())).
		Watches(&corev1.Namespace{}, delayed{r.forNamespace}, builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&appsv1.Deployment{}, workloads, builder.WithPredicates(workloadChanged())).
		Watches(&appsv1.StatefulSet{}, workloads, builder.WithPredicates(workloadChanged())).
		Watches(&batchv1.CronJob{}, workloads, builder.WithPredicates(workloadChanged())).
		Watches(&autoscalingv2.HorizontalPodAutoscaler{}, workloads, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Build(r)
	if err != nil {
		return err
	}
	r.watches = watches
	return watches.Bind(c)
}

// Reconcile puts the workloads of one SleepSchedule to sleep or wakes them, as the
// clock and the spec say now.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var s powerv1alpha1.SleepSchedule
	if err := r.Get(ctx, req.NamespacedName, &s); err != nil {
		if apierrors.IsNotFound(err) {
			series.Forget(req.NamespacedName)
			r.written.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.written.Behind(&s) {
		// The cache has not yet seen this controller's last write of the schedule (a
		// reconcile that follows its predecessor's status write closely, as a
		// transition's workload events bring): a status computed from this copy would
		// meet a 409 and be read and sent again. The cache catches up in milliseconds.
		return ctrl.Result{RequeueAfter: cacheLagRetry}, nil
	}
	if !s.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, &s)
	}
	cachedVersion := s.ResourceVersion
	if err := kit.AddFinalizer(ctx, r.Client, r.apiReader(), &s, finalizer); err != nil {
		// Deleted or gone since it was read, before anything was put to sleep under
		// the finalizer: there is nothing to wake.
		if errors.Is(err, kit.ErrDeleting) || apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if s.ResourceVersion != cachedVersion {
		r.written.Record(&s)
	}

	now := r.clock().Now()
	sched, err := Parse(&s.Spec)
	if err == nil {
		err = checkSelectors(&s.Spec)
	}
	if err == nil {
		err = checkPatches(&s.Spec)
	}
	if err != nil {
		// The API server refuses most such specs; this guards against what it lets
		// through (a time zone it knows and Orderly does not, a malformed selector).
		// Nothing is changed, and retrying cannot help: the next spec change reconciles.
		return ctrl.Result{}, r.updateStatus(ctx, &s, &observation{now: now, invalid: err})
	}
	obs := &observation{now: now, state: sched.State(now), weekStart: sched.WeekStart(now)}
	obs.next, obs.hasNext = sched.Next(now)

	sel, err := r.selectNamespaces(ctx, &s)
	if err == nil {
		obs.namespaces, obs.conflicts, obs.excluded = sel.owned, sel.conflicts, sel.excluded
		err = r.observeWorkloads(ctx, &s, obs)
	}
	if err != nil {
		// Say so in the status, or it goes on showing the last reconcile that could
		// list as if all were well; the error brings the retry with backoff.
		serr := r.updateStatus(ctx, &s, &observation{now: now, listFailed: err})
		return ctrl.Result{}, errors.Join(err, serr)
	}
	var effectRecheck time.Duration
	if !s.Spec.Suspend && !s.Spec.DryRun {
		r.apply(ctx, &s, obs)
		effectRecheck = r.checkSleepTookEffect(&s, obs)
	}
	if err := r.updateStatus(ctx, &s, obs); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: cacheLagRetry}, nil
		}
		return ctrl.Result{}, err
	}
	if obs.failures > 0 {
		return ctrl.Result{}, fmt.Errorf("%d workload write(s) failed, first: %w", obs.failures, obs.firstErr)
	}
	if obs.conflicted > 0 {
		// A write raced with a cache that was behind; look again shortly.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	wait := maxRequeue
	if obs.hasKinds {
		// A kind of targets.kinds that no watch reports on: look again.
		if recheck := r.kindsRecheck(ctx, &s, obs.kindProblems); recheck > 0 {
			wait = recheck
		}
	}
	if effectRecheck > 0 {
		wait = min(wait, effectRecheck)
	}
	if obs.hasNext {
		// A little past the transition, so that a timer firing early does not find
		// the old state still current.
		wait = min(wait, obs.next.Sub(now)+100*time.Millisecond)
	}
	return ctrl.Result{RequeueAfter: max(wait, 100*time.Millisecond)}, nil
}

// finalize wakes every workload the schedule holds asleep, then lets it go: a
// deleted schedule must not leave anything scaled down.
func (r *Reconciler) finalize(ctx context.Context, s *powerv1alpha1.SleepSchedule) error {
	if !controllerutil.ContainsFinalizer(s, finalizer) {
		return nil
	}
	obs := &observation{now: r.clock().Now(), state: powerv1alpha1.StateAwake, deleting: true}
	if err := r.observeWorkloads(ctx, s, obs); err != nil {
		return err
	}
	r.apply(ctx, s, obs)
	r.emitWriteEvents(s, obs)
	if obs.failures > 0 {
		return fmt.Errorf("waking workloads before deletion: %w", obs.firstErr)
	}
	for _, p := range obs.kindProblems {
		// Objects of a kind that is served but cannot be read may be held asleep:
		// the schedule is kept until they can be woken (a kind that is no longer
		// served has no objects left).
		if p.blocking {
			r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, p.reason, "Wake", "Cannot wake the objects of %s before deletion: %s", p.kind, p.message)
			return fmt.Errorf("waking workloads before deletion: %s", p.message)
		}
	}
	if obs.conflicted > 0 {
		return fmt.Errorf("waking workloads before deletion: %d write(s) conflicted, retrying", obs.conflicted)
	}
	if err := kit.RemoveFinalizer(ctx, r.Client, r.apiReader(), s, finalizer); err != nil {
		return err
	}
	series.Forget(client.ObjectKeyFromObject(s))
	r.running.forget(client.ObjectKeyFromObject(s))
	return nil
}
