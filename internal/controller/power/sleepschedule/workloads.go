package sleepschedule

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

// sleepRecord is what SleepStateAnnotation holds: the values before sleep, and the
// value Orderly set, by which a change made by someone else is recognised.
type sleepRecord struct {
	Replicas      *int32 `json:"replicas,omitempty"`
	SleepReplicas *int32 `json:"sleepReplicas,omitempty"`
	Suspend       *bool  `json:"suspend,omitempty"`
	MinReplicas   *int32 `json:"minReplicas,omitempty"`
	MaxReplicas   int32  `json:"maxReplicas,omitempty"`
}

// action is what one reconcile does to one workload.
type action int

const (
	actNone action = iota
	// actSleep records the workload's state and scales it down or suspends it.
	actSleep
	// actWake restores what was recorded and removes the record.
	actWake
	// actRelease removes the record without touching the workload, whose owner
	// changed it while asleep.
	actRelease
	// actLeftAlone marks a workload whose owner changed it while asleep.
	actLeftAlone
)

// workload is a Deployment, StatefulSet or CronJob seen through what sleeping needs.
type workload struct {
	kind string
	name string        // "Kind namespace/name", set by id()
	obj  client.Object // from the cache: never modified
	// value is the replica count, or for a CronJob 1 when suspended and 0 otherwise.
	value int32
	// podRequests is the CPU and memory one pod requests.
	podRequests corev1.ResourceList
	ready       bool
	hpa         *autoscalingv2.HorizontalPodAutoscaler

	asleepBy  string
	record    *sleepRecord
	leftAlone bool

	targeted bool // in a managed namespace, kind enabled, not excluded
	want     bool // should be asleep now
	act      action
	err      error // of this reconcile's write
}

func (w *workload) id() string {
	if w.name == "" {
		w.name = w.kind + " " + w.obj.GetNamespace() + "/" + w.obj.GetName()
	}
	return w.name
}

// sleepValue is what Orderly set when it put the workload to sleep.
func (w *workload) sleepValue() int32 {
	switch {
	case w.record == nil:
		return -1
	case w.kind == powerv1alpha1.KindCronJob:
		return 1
	case w.record.SleepReplicas != nil:
		return *w.record.SleepReplicas
	}
	return 0
}

// changedByOwner reports whether someone else changed the workload while asleep.
func (w *workload) changedByOwner() bool {
	return w.record != nil && w.value != w.sleepValue()
}

// decide is the whole sleep/wake policy for one workload, from observation alone.
func decide(w *workload, schedule string) action {
	switch {
	case w.asleepBy != "" && w.asleepBy != schedule:
		return actNone // another schedule's: never touched
	case w.asleepBy == "":
		if w.want {
			return actSleep
		}
		return actNone
	case w.record == nil:
		// Our label without a readable record: nothing to restore, so only let go.
		if w.want {
			return actNone
		}
		return actRelease
	case w.want:
		if w.changedByOwner() && !w.leftAlone {
			return actLeftAlone
		}
		return actNone
	case w.leftAlone || w.changedByOwner():
		return actRelease
	default:
		return actWake
	}
}

// replicasOf reads spec.replicas, which defaults to 1.
func replicasOf(p *int32) int32 { return ptr.Deref(p, 1) }

func podRequests(spec *corev1.PodSpec) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, c := range spec.Containers {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := c.Resources.Requests[name]; ok {
				sum := out[name]
				sum.Add(q)
				out[name] = sum
			}
		}
	}
	return out
}

// readRecord reads SleepStateAnnotation; nil when absent or unreadable.
func readRecord(o client.Object) *sleepRecord {
	raw, ok := o.GetAnnotations()[powerv1alpha1.SleepStateAnnotation]
	if !ok {
		return nil
	}
	var rec sleepRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return nil
	}
	return &rec
}

type hpaKey struct{ namespace, kind, name string }

// observeWorkloads lists the workloads of the managed namespaces and those this
// schedule holds asleep anywhere, and decides what to do with each.
func (r *Reconciler) observeWorkloads(ctx context.Context, s *powerv1alpha1.SleepSchedule, obs *observation) error {
	mine := client.MatchingLabels{powerv1alpha1.AsleepLabel: s.Name}
	seen := map[string]bool{}
	var all []*workload
	add := func(w *workload) {
		if key := w.id(); !seen[key] {
			seen[key] = true
			all = append(all, w)
		}
	}
	hpas := map[hpaKey]*autoscalingv2.HorizontalPodAutoscaler{}
	listFrom := func(opts ...client.ListOption) error {
		opts = append(opts, client.UnsafeDisableDeepCopy)
		var hl autoscalingv2.HorizontalPodAutoscalerList
		if err := r.List(ctx, &hl, opts...); err != nil {
			return fmt.Errorf("listing HorizontalPodAutoscalers: %w", err)
		}
		for i := range hl.Items {
			h := &hl.Items[i]
			hpas[hpaKey{h.Namespace, h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name}] = h
			if h.Labels[powerv1alpha1.AsleepLabel] == s.Name {
				obs.pinnedHPAs = append(obs.pinnedHPAs, h)
			}
		}
		var dl appsv1.DeploymentList
		if err := r.List(ctx, &dl, opts...); err != nil {
			return fmt.Errorf("listing Deployments: %w", err)
		}
		for i := range dl.Items {
			d := &dl.Items[i]
			add(&workload{kind: powerv1alpha1.KindDeployment, obj: d, value: replicasOf(d.Spec.Replicas),
				podRequests: podRequests(&d.Spec.Template.Spec),
				ready:       deploymentReady(d)})
		}
		var sl appsv1.StatefulSetList
		if err := r.List(ctx, &sl, opts...); err != nil {
			return fmt.Errorf("listing StatefulSets: %w", err)
		}
		for i := range sl.Items {
			st := &sl.Items[i]
			add(&workload{kind: powerv1alpha1.KindStatefulSet, obj: st, value: replicasOf(st.Spec.Replicas),
				podRequests: podRequests(&st.Spec.Template.Spec),
				ready:       statefulSetReady(st)})
		}
		var cl batchv1.CronJobList
		if err := r.List(ctx, &cl, opts...); err != nil {
			return fmt.Errorf("listing CronJobs: %w", err)
		}
		for i := range cl.Items {
			c := &cl.Items[i]
			v := int32(0)
			if ptr.Deref(c.Spec.Suspend, false) {
				v = 1
			}
			add(&workload{kind: powerv1alpha1.KindCronJob, obj: c, value: v, ready: true})
		}
		return nil
	}
	managed := map[string]bool{}
	for _, ns := range obs.namespaces {
		managed[ns] = true
		if err := listFrom(client.InNamespace(ns)); err != nil {
			return err
		}
	}
	if err := listFrom(mine); err != nil {
		return err
	}

	excludeSel := k8slabels.Nothing()
	// When deleting nothing is targeted: a selector that cannot be read must not keep
	// the schedule from waking what it holds asleep.
	if s.Spec.Exclude.Selector != nil && !obs.deleting {
		sel, err := metav1.LabelSelectorAsSelector(s.Spec.Exclude.Selector)
		if err != nil {
			return fmt.Errorf("exclude.selector: %w", err)
		}
		excludeSel = sel
	}
	t := s.Spec.Targets
	enabled := map[string]bool{
		powerv1alpha1.KindDeployment:  ptr.Deref(t.Deployments, true),
		powerv1alpha1.KindStatefulSet: ptr.Deref(t.StatefulSets, true),
		powerv1alpha1.KindCronJob:     ptr.Deref(t.CronJobs, true),
	}
	hpaEnabled := ptr.Deref(t.HorizontalPodAutoscalers, true)
	asleep := obs.state == powerv1alpha1.StateAsleep
	for _, w := range all {
		o := w.obj
		w.asleepBy = o.GetLabels()[powerv1alpha1.AsleepLabel]
		if w.asleepBy == s.Name {
			w.record = readRecord(o)
			w.leftAlone = o.GetAnnotations()[powerv1alpha1.LeftAloneAnnotation] == "true"
		}
		w.hpa = hpas[hpaKey{o.GetNamespace(), w.kind, o.GetName()}]
		w.targeted = !obs.deleting && managed[o.GetNamespace()] && enabled[w.kind] &&
			!excluded(s, w, excludeSel) && (w.hpa == nil || hpaEnabled)
		w.want = asleep && w.targeted
		w.act = decide(w, s.Name)
	}
	slices.SortFunc(all, func(a, b *workload) int { return strings.Compare(a.id(), b.id()) })
	obs.workloads = all
	obs.sleepReplicas = t.SleepReplicas
	return nil
}

func excluded(s *powerv1alpha1.SleepSchedule, w *workload, sel k8slabels.Selector) bool {
	o := w.obj
	if o.GetAnnotations()[powerv1alpha1.ExcludeAnnotation] == "true" || sel.Matches(k8slabels.Set(o.GetLabels())) {
		return true
	}
	for _, ref := range s.Spec.Exclude.Workloads {
		if ref.Kind == w.kind && ref.Name == o.GetName() && (ref.Namespace == "" || ref.Namespace == o.GetNamespace()) {
			return true
		}
	}
	return false
}

// apply carries out the decided actions, several writes at once, and records the
// outcome in obs.
func (r *Reconciler) apply(ctx context.Context, s *powerv1alpha1.SleepSchedule, obs *observation) {
	var todo []*workload
	for _, w := range obs.workloads {
		if w.act != actNone {
			todo = append(todo, w)
		}
	}
	writers := r.Writers
	if writers <= 0 {
		writers = 16
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan *workload)
	for range min(writers, len(todo)) {
		wg.Go(func() {
			for w := range next {
				err := r.write(ctx, s, w, obs.sleepReplicas)
				mu.Lock()
				obs.recordWrite(w, err)
				mu.Unlock()
			}
		})
	}
	for _, w := range todo {
		next <- w
	}
	close(next)
	wg.Wait()
	r.reconcileHPAs(ctx, s, obs)
}

// write makes one workload's change, with optimistic locking: the decision was made
// on the cached version, and a change by someone else since must not be overwritten.
func (r *Reconciler) write(ctx context.Context, s *powerv1alpha1.SleepSchedule, w *workload, sleepReplicas int32) error {
	obj := w.obj.DeepCopyObject().(client.Object)
	patch := client.MergeFromWithOptions(w.obj, client.MergeFromWithOptimisticLock{})
	lbls, ann := obj.GetLabels(), obj.GetAnnotations()
	if lbls == nil {
		lbls = map[string]string{}
	}
	if ann == nil {
		ann = map[string]string{}
	}
	switch w.act {
	case actSleep:
		rec := sleepRecord{}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			rec.Replicas, rec.SleepReplicas = ptr.To(replicasOf(o.Spec.Replicas)), ptr.To(sleepReplicas)
			o.Spec.Replicas = ptr.To(sleepReplicas)
		case *appsv1.StatefulSet:
			rec.Replicas, rec.SleepReplicas = ptr.To(replicasOf(o.Spec.Replicas)), ptr.To(sleepReplicas)
			o.Spec.Replicas = ptr.To(sleepReplicas)
		case *batchv1.CronJob:
			rec.Suspend = ptr.To(ptr.Deref(o.Spec.Suspend, false))
			o.Spec.Suspend = ptr.To(true)
		}
		raw, _ := json.Marshal(rec)
		lbls[powerv1alpha1.AsleepLabel] = s.Name
		ann[powerv1alpha1.SleepStateAnnotation] = string(raw)
		delete(ann, powerv1alpha1.LeftAloneAnnotation)
	case actWake:
		switch o := obj.(type) {
		case *appsv1.Deployment:
			o.Spec.Replicas = w.record.Replicas
		case *appsv1.StatefulSet:
			o.Spec.Replicas = w.record.Replicas
		case *batchv1.CronJob:
			o.Spec.Suspend = ptr.To(ptr.Deref(w.record.Suspend, false))
		}
		delete(lbls, powerv1alpha1.AsleepLabel)
		delete(ann, powerv1alpha1.SleepStateAnnotation)
		delete(ann, powerv1alpha1.LeftAloneAnnotation)
	case actRelease:
		delete(lbls, powerv1alpha1.AsleepLabel)
		delete(ann, powerv1alpha1.SleepStateAnnotation)
		delete(ann, powerv1alpha1.LeftAloneAnnotation)
	case actLeftAlone:
		ann[powerv1alpha1.LeftAloneAnnotation] = "true"
	}
	obj.SetLabels(lbls)
	obj.SetAnnotations(ann)
	return r.Patch(ctx, obj, patch, client.FieldOwner(labels.FieldManager))
}

// reconcileHPAs pins the HPA of each workload held asleep at sleepReplicas (when above
// zero: at zero the HPA stops scaling by itself) and restores every other HPA this
// schedule pinned.
func (r *Reconciler) reconcileHPAs(ctx context.Context, s *powerv1alpha1.SleepSchedule, obs *observation) {
	want := map[client.ObjectKey]*autoscalingv2.HorizontalPodAutoscaler{}
	if obs.sleepReplicas > 0 {
		for _, w := range obs.workloads {
			if w.hpa != nil && w.want && w.asleepNow(s.Name) {
				want[client.ObjectKeyFromObject(w.hpa)] = w.hpa
			}
		}
	}
	pinned := map[client.ObjectKey]bool{}
	for _, h := range obs.pinnedHPAs {
		key := client.ObjectKeyFromObject(h)
		if pinned[key] {
			continue // listed twice: in a managed namespace and by label
		}
		pinned[key] = true
		if want[key] != nil {
			continue
		}
		rec := readRecord(h)
		obj := h.DeepCopy()
		patch := client.MergeFromWithOptions(h, client.MergeFromWithOptimisticLock{})
		if rec != nil && rec.MaxReplicas > 0 {
			obj.Spec.MinReplicas, obj.Spec.MaxReplicas = rec.MinReplicas, rec.MaxReplicas
		}
		delete(obj.Labels, powerv1alpha1.AsleepLabel)
		delete(obj.Annotations, powerv1alpha1.SleepStateAnnotation)
		obs.recordHPAWrite(r.Patch(ctx, obj, patch, client.FieldOwner(labels.FieldManager)))
	}
	for key, h := range want {
		if pinned[key] {
			continue
		}
		obj := h.DeepCopy()
		patch := client.MergeFromWithOptions(h, client.MergeFromWithOptimisticLock{})
		raw, _ := json.Marshal(sleepRecord{MinReplicas: h.Spec.MinReplicas, MaxReplicas: h.Spec.MaxReplicas})
		if obj.Labels == nil {
			obj.Labels = map[string]string{}
		}
		if obj.Annotations == nil {
			obj.Annotations = map[string]string{}
		}
		obj.Labels[powerv1alpha1.AsleepLabel] = s.Name
		obj.Annotations[powerv1alpha1.SleepStateAnnotation] = string(raw)
		obj.Spec.MinReplicas, obj.Spec.MaxReplicas = ptr.To(obs.sleepReplicas), obs.sleepReplicas
		obs.recordHPAWrite(r.Patch(ctx, obj, patch, client.FieldOwner(labels.FieldManager)))
	}
}

// asleepNow reports whether, after this reconcile's writes, the schedule holds the
// workload asleep (its owner has not taken it back).
func (w *workload) asleepNow(schedule string) bool {
	switch w.act {
	case actSleep:
		return w.err == nil
	case actWake, actRelease:
		return w.err != nil // a failed or conflicting wake leaves it asleep
	case actLeftAlone:
		return false
	}
	return w.asleepBy == schedule && w.record != nil && !w.leftAlone
}

// savedRequests is what the pods a sleeping workload does not run would request.
func (w *workload) savedRequests(sleepReplicas int32) corev1.ResourceList {
	if w.kind == powerv1alpha1.KindCronJob {
		return nil
	}
	orig, slept := int32(0), sleepReplicas
	switch {
	case w.act == actSleep:
		orig = w.value
	case w.record != nil && w.record.Replicas != nil:
		orig = *w.record.Replicas
		if w.record.SleepReplicas != nil {
			slept = *w.record.SleepReplicas
		}
	}
	if orig <= slept {
		return nil
	}
	out := corev1.ResourceList{}
	for name, q := range w.podRequests {
		total := q.DeepCopy()
		total.Mul(int64(orig - slept))
		out[name] = total
	}
	return out
}

func addResources(into corev1.ResourceList, more corev1.ResourceList) {
	for name, q := range more {
		sum, ok := into[name]
		if !ok {
			sum = resource.Quantity{}
		}
		sum.Add(q)
		into[name] = sum
	}
}

func isConflict(err error) bool { return apierrors.IsConflict(err) || apierrors.IsNotFound(err) }

// deploymentReady reports whether a Deployment runs its declared replicas, all updated and ready.
func deploymentReady(d *appsv1.Deployment) bool {
	want := replicasOf(d.Spec.Replicas)
	return d.Status.ObservedGeneration >= d.Generation && d.Status.ReadyReplicas >= want && d.Status.UpdatedReplicas >= want
}

// statefulSetReady reports whether a StatefulSet runs its declared replicas, all ready.
func statefulSetReady(st *appsv1.StatefulSet) bool {
	return st.Status.ObservedGeneration >= st.Generation && st.Status.ReadyReplicas >= replicasOf(st.Spec.Replicas)
}
