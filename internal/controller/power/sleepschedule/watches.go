package sleepschedule

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

// eventDelay is how long a workload's or a namespace's event waits before it
// reconciles the schedules it concerns. Events come in bursts: a transition writes
// thousands of workloads, and the controllers that run them then update each one's
// status several times. Every schedule concerned is reconciled once per burst and
// delay rather than once per event, which would keep the controller observing the
// same schedule again and again, and take CPU from the API server, while the cluster
// settles. A new workload in a sleeping namespace still sleeps within seconds.
const eventDelay = time.Second

// readinessDelay is eventDelay for a workload event that changed only whether the
// workload is ready. That changes nothing but the status's count of ready workloads,
// and while a woken cluster settles (a minute or more) every workload's readiness
// changes: with a schedule per namespace and as many workers as schedules, a delay of
// a second made each schedule write its status again for nearly every workload that
// became ready.
const readinessDelay = 5 * time.Second

// delayed enqueues the requests of fn eventDelay (or readinessDelay) after each event.
// The queue keeps the earliest time a request is due, so the events of a burst share
// one reconcile.
type delayed struct{ fn handler.MapFunc }

func (d delayed) add(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], after time.Duration) {
	for _, req := range d.fn(ctx, o) {
		q.AddAfter(req, after)
	}
}

func (d delayed) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	d.add(ctx, e.Object, q, eventDelay)
}

// Update maps the old object and the new: a namespace that stops matching a selector,
// a workload whose label changed, concern the schedules of both.
func (d delayed) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	after := eventDelay
	if sameSpecAndMetadata(e.ObjectOld, e.ObjectNew) {
		after = readinessDelay
	}
	d.add(ctx, e.ObjectOld, q, after)
	d.add(ctx, e.ObjectNew, q, after)
}

func (d delayed) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	d.add(ctx, e.Object, q, eventDelay)
}

func (d delayed) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	d.add(ctx, e.Object, q, eventDelay)
}

// Cache indexes. An event maps to the schedules it concerns through them, and a
// reconcile finds what it holds asleep and who else selects its namespaces, without
// scanning every workload or every schedule: with a schedule per namespace, mapping
// each workload event to every schedule made a transition reconcile every schedule
// once per workload write.
const (
	// namespaceIndex indexes SleepSchedules by the namespaces they name, and under
	// bySelector those that select namespaces by label.
	namespaceIndex = "power.orderly.dev/namespace"
	bySelector     = "\x00selector"
	// asleepIndex indexes workloads by the schedule that holds them asleep (the value
	// of AsleepLabel).
	asleepIndex = "power.orderly.dev/asleep"
)

func indexNamespaces(o client.Object) []string {
	s := o.(*powerv1alpha1.SleepSchedule)
	keys := slices.Clone(s.Spec.Namespaces)
	if s.Spec.NamespaceSelector != nil {
		keys = append(keys, bySelector)
	}
	return keys
}

func indexAsleep(o client.Object) []string {
	if name := o.GetLabels()[powerv1alpha1.AsleepLabel]; name != "" {
		return []string{name}
	}
	return nil
}

// indexes registers the cache indexes the controller reads through.
func indexes(ctx context.Context, mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &powerv1alpha1.SleepSchedule{}, namespaceIndex, indexNamespaces); err != nil {
		return fmt.Errorf("indexing SleepSchedules by namespace: %w", err)
	}
	for _, obj := range []client.Object{&appsv1.Deployment{}, &appsv1.StatefulSet{}, &batchv1.CronJob{}, &autoscalingv2.HorizontalPodAutoscaler{}} {
		if err := idx.IndexField(ctx, obj, asleepIndex, indexAsleep); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", obj, powerv1alpha1.AsleepLabel, err)
		}
	}
	return nil
}

// schedulesSelecting returns the SleepSchedules that select the namespace ns, whose
// labels are nsLabels, by name or by selector; from the cache, not to be modified.
func (r *Reconciler) schedulesSelecting(ctx context.Context, ns string, nsLabels map[string]string) ([]*powerv1alpha1.SleepSchedule, error) {
	bySel, err := r.selectorSchedules(ctx)
	if err != nil {
		return nil, err
	}
	return r.selecting(ctx, bySel, ns, nsLabels)
}

// selectorSchedule is a schedule that selects namespaces by label, with its selector.
type selectorSchedule struct {
	s   *powerv1alpha1.SleepSchedule
	sel k8slabels.Selector
}

// selectorSchedules returns the schedules that select namespaces by label. A
// selector that cannot be used selects nothing; its own reconcile says so.
func (r *Reconciler) selectorSchedules(ctx context.Context) ([]selectorSchedule, error) {
	var list powerv1alpha1.SleepScheduleList
	if err := r.List(ctx, &list, client.MatchingFields{namespaceIndex: bySelector}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing SleepSchedules: %w", err)
	}
	out := make([]selectorSchedule, 0, len(list.Items))
	for i := range list.Items {
		if sel, err := selectorOf(&list.Items[i]); err == nil {
			out = append(out, selectorSchedule{&list.Items[i], sel})
		}
	}
	return out, nil
}

// selecting returns the schedules that name ns, and those of bySel whose selector
// matches nsLabels.
func (r *Reconciler) selecting(ctx context.Context, bySel []selectorSchedule, ns string, nsLabels map[string]string) ([]*powerv1alpha1.SleepSchedule, error) {
	var byName powerv1alpha1.SleepScheduleList
	if err := r.List(ctx, &byName, client.MatchingFields{namespaceIndex: ns}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing SleepSchedules: %w", err)
	}
	out := make([]*powerv1alpha1.SleepSchedule, 0, len(byName.Items)+len(bySel))
	seen := map[string]bool{}
	for i := range byName.Items {
		seen[byName.Items[i].Name] = true
		out = append(out, &byName.Items[i])
	}
	for _, o := range bySel {
		if !seen[o.s.Name] && o.sel.Matches(k8slabels.Set(nsLabels)) {
			out = append(out, o.s)
		}
	}
	return out, nil
}

// requests turns schedules into reconcile requests, without duplicates.
func requests(names map[string]bool) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(names))
	for _, name := range slices.Sorted(maps.Keys(names)) {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
	}
	return out
}

// namespaceLabels reads the labels of the namespace ns from the cache; nil when it
// is not there (being created or gone): then only schedules that name it match.
func (r *Reconciler) namespaceLabels(ctx context.Context, ns string) (map[string]string, error) {
	var n corev1.Namespace
	if err := r.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return n.Labels, nil
}

// forWorkload maps a workload's event to the schedules it concerns: those that select
// its namespace, and the one holding it asleep.
func (r *Reconciler) forWorkload(ctx context.Context, o client.Object) []reconcile.Request {
	names := map[string]bool{}
	if holder := o.GetLabels()[powerv1alpha1.AsleepLabel]; holder != "" {
		names[holder] = true
	}
	nsLabels, err := r.namespaceLabels(ctx, o.GetNamespace())
	if err == nil {
		var selecting []*powerv1alpha1.SleepSchedule
		if selecting, err = r.schedulesSelecting(ctx, o.GetNamespace(), nsLabels); err == nil {
			for _, s := range selecting {
				names[s.Name] = true
			}
		}
	}
	if err != nil {
		log.FromContext(ctx).Error(err, "Mapping a workload to its SleepSchedules", "namespace", o.GetNamespace(), "name", o.GetName())
	}
	return requests(names)
}

// forNamespace maps a namespace's event to the schedules that select it. An update
// is mapped with the old labels and with the new ones, so a schedule that stops
// selecting the namespace hears of it too.
func (r *Reconciler) forNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	selecting, err := r.schedulesSelecting(ctx, o.GetName(), o.GetLabels())
	if err != nil {
		log.FromContext(ctx).Error(err, "Mapping a Namespace to its SleepSchedules", "namespace", o.GetName())
		return nil
	}
	names := map[string]bool{}
	for _, s := range selecting {
		names[s.Name] = true
	}
	return requests(names)
}

// forOtherSchedules maps a schedule's event to the other schedules that select one
// of its namespaces: which of them owns a shared namespace depends on it.
func (r *Reconciler) forOtherSchedules(ctx context.Context, o client.Object) []reconcile.Request {
	s, ok := o.(*powerv1alpha1.SleepSchedule)
	if !ok {
		return nil
	}
	names := map[string]bool{}
	err := func() error {
		sel, err := selectorOf(s)
		if err != nil {
			sel = nil // selects by name only; its own reconcile reports the selector
		}
		var namespaces corev1.NamespaceList
		if err := r.List(ctx, &namespaces, client.UnsafeDisableDeepCopy); err != nil {
			return fmt.Errorf("listing namespaces: %w", err)
		}
		bySel, err := r.selectorSchedules(ctx)
		if err != nil {
			return err
		}
		for i := range namespaces.Items {
			ns := &namespaces.Items[i]
			if !selects(s, sel, ns) {
				continue
			}
			selecting, err := r.selecting(ctx, bySel, ns.Name, ns.Labels)
			if err != nil {
				return err
			}
			for _, other := range selecting {
				names[other.Name] = true
			}
		}
		return nil
	}()
	if err != nil {
		log.FromContext(ctx).Error(err, "Mapping a SleepSchedule to the others on its namespaces", "schedule", s.Name)
	}
	delete(names, s.Name)
	return requests(names)
}

// selectionChanged passes what can change who owns a namespace: a schedule created
// or deleted, a new selection, or the start of a deletion (a schedule being deleted
// owns nothing).
func selectionChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*powerv1alpha1.SleepSchedule)
			n, ok2 := e.ObjectNew.(*powerv1alpha1.SleepSchedule)
			if !ok1 || !ok2 {
				return false
			}
			return !slices.Equal(o.Spec.Namespaces, n.Spec.Namespaces) ||
				!apiequality.Semantic.DeepEqual(o.Spec.NamespaceSelector, n.Spec.NamespaceSelector) ||
				o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// workloadChanged passes creates, deletes, and the updates a schedule acts on: a new
// spec (generation), changed labels or annotations, or a workload becoming ready or
// unready. A Deployment's status changes with every pod it starts or stops; reacting
// to each of those would rescan every workload thousands of times during a transition.
// (The cache holds only Orderly's annotations, see trimWorkload, so a change of any
// other annotation is not seen either.)
func workloadChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return !sameSpecAndMetadata(o, n) || workloadReady(o) != workloadReady(n)
	}}
}

// sameSpecAndMetadata: the update changed neither the spec (generation) nor a label
// or annotation; for a workload that passed workloadChanged, only its readiness.
func sameSpecAndMetadata(o, n client.Object) bool {
	return o.GetGeneration() == n.GetGeneration() && maps.Equal(o.GetLabels(), n.GetLabels()) && maps.Equal(o.GetAnnotations(), n.GetAnnotations())
}

func workloadReady(obj client.Object) bool {
	switch obj.(type) {
	case *appsv1.Deployment, *appsv1.StatefulSet:
		return rolledOut(obj)
	}
	return true
}
