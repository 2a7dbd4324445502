package sleepschedule

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

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
	// actFinishSleep scales down an object of a kind with a scale subresource whose
	// record was written but whose scale write failed (two requests: the record on
	// the object, then its scale).
	actFinishSleep
)

// workload is a Deployment, StatefulSet, CronJob or object of a kind of
// targets.kinds, seen through what sleeping needs.
type workload struct {
	// kind is the kind (Kind.group for the kinds of targets.kinds).
	kind string
	// extra is the kind of targets.kinds the object is of; nil for the built-in kinds.
	extra *extraKind
	name  string        // "Kind namespace/name", set by id()
	obj   client.Object // from the cache: never modified
	// value is the replica count, or for a CronJob 1 when suspended and 0 otherwise.
	value int32
	// running is how many replicas an object of a kind with a scale subresource runs
	// by its own status (read only while this schedule holds it asleep), and
	// stillRunning why its sleep has not taken effect ("" when it has: effect.go).
	running      int32
	stillRunning string
	// halfWoken: a kind with a scale subresource whose replicas were restored but
	// whose record was not removed (two requests); it is released without an Event.
	halfWoken bool
	// gitOps is the GitOps tool that manages the workload, "" when none.
	gitOps powerv1alpha1.GitOpsTool
	// podRequests is the CPU and memory one pod requests.
	podRequests corev1.ResourceList
	ready       bool
	hpa         *autoscalingv2.HorizontalPodAutoscaler

	asleepBy  string
	record    *sleepRecord
	leftAlone bool
	// badRecord is why a workload this schedule holds asleep has no record that can
	// be restored (none, unreadable, invalid, or refused by the API server): it is
	// released without being restored.
	badRecord error

	// skip is why a workload the schedule would otherwise sleep is left awake (another
	// operator controls it, or it is a ScaledObject that could not be restored), and
	// skipReason the reason reported; "" when it is not skipped.
	skip, skipReason string
	// kedaTarget is the target of a ScaledObject its user paused at its current
	// count: its replicas are recorded when the ScaledObject sleeps.
	kedaTarget *workload

	targeted bool // in a managed namespace, kind enabled, not excluded, not skipped
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
	if w.record == nil {
		return false
	}
	if w.extra != nil {
		switch w.extra.mode {
		case modePatch:
			u, ok := w.obj.(*unstructured.Unstructured)
			return !ok || fieldsChanged(u.Object, w.record.Fields)
		case modeKEDA:
			if w.record.Waking {
				return false // restored by Orderly; its target is not yet
			}
			p := kedaPaused(w.obj)
			return p == nil || *p != kedaSleepValue
		}
	}
	return w.value != w.sleepValue()
}

// kedaSleepValue is the paused-replicas annotation of a sleeping ScaledObject.
const kedaSleepValue = "0"

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
		// Our label without a record that can be restored: let go at once, so that
		// neither a wake nor the schedule's deletion waits on it. While asleep, the
		// next reconcile puts it to sleep again with a new record.
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

// podRequests is what one pod of spec requests. The cache holds the sum of the
// containers' requests as one container (trimTemplate), which is returned as it is,
// not to be modified.
func podRequests(spec *corev1.PodSpec) corev1.ResourceList {
	if len(spec.Containers) == 1 {
		return spec.Containers[0].Resources.Requests
	}
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

type hpaKey struct{ namespace, kind, name string }

// hpaKind is the kind an HPA's scaleTargetRef names the workload by.
func (w *workload) hpaKind() string {
	if w.extra != nil {
		return w.extra.gk.Kind
	}
	return w.kind
}

// observeWorkloads lists the workloads of the managed namespaces and those this
// schedule holds asleep anywhere, and decides what to do with each.
func (r *Reconciler) observeWorkloads(ctx context.Context, s *powerv1alpha1.SleepSchedule, obs *observation) error {
	// What this schedule holds asleep, anywhere: by an index of the label, not a
	// label selector, which the cache would match against every workload it holds.
	mine := client.MatchingFields{asleepIndex: s.Name}
	type key struct{ kind, namespace, name string }
	seen := map[key]bool{}
	var all []*workload
	add := func(w *workload) {
		if k := (key{w.kind, w.obj.GetNamespace(), w.obj.GetName()}); !seen[k] {
			seen[k] = true
			all = append(all, w)
		}
	}
	hpas := map[hpaKey]*autoscalingv2.HorizontalPodAutoscaler{}
	listFrom := func(opts ...client.ListOption) error {
		return r.listWorkloads(ctx, s, obs, hpas, add, opts...)
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
	obs.kedaTargets = map[hpaKey]bool{}
	r.observeKinds(ctx, s, obs, add)

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
	asked := askedKinds(s)
	// The Deployments and StatefulSets a user-paused ScaledObject may name.
	byTarget := map[hpaKey]*workload{}
	for _, w := range all {
		if w.extra == nil && w.kind != powerv1alpha1.KindCronJob {
			byTarget[hpaKey{w.obj.GetNamespace(), w.kind, w.obj.GetName()}] = w
		}
	}
	for _, w := range all {
		o := w.obj
		w.asleepBy = o.GetLabels()[powerv1alpha1.AsleepLabel]
		if w.asleepBy == s.Name {
			recordKind := w.kind
			if w.extra != nil {
				recordKind = w.extra.recordKind()
			}
			if w.record, w.badRecord = readRecord(o, recordKind); w.badRecord != nil {
				w.record = nil
			}
			w.leftAlone = o.GetAnnotations()[powerv1alpha1.LeftAloneAnnotation] == "true"
		}
		w.hpa = hpas[hpaKey{o.GetNamespace(), w.hpaKind(), o.GetName()}]
		// A workload a KEDA ScaledObject of the schedule's kinds scales is left to
		// KEDA, which the ScaledObject's pause annotation scales down: scaling it too
		// would fight KEDA's HPA.
		leftToKEDA := obs.kedaTargets[hpaKey{o.GetNamespace(), w.hpaKind(), o.GetName()}]
		inScope := !obs.deleting && managed[o.GetNamespace()] && (w.extra != nil || enabled[w.kind]) &&
			!excluded(s, w, excludeSel) && (w.hpa == nil || hpaEnabled) && !leftToKEDA
		if inScope {
			if w.skip = ownerSkip(o, asked); w.skip != "" {
				w.skipReason = ReasonOwnedByOperator
			} else if tool := gitOpsTool(o); tool != "" && s.Spec.GitOpsManaged == powerv1alpha1.GitOpsSkip {
				w.skip, w.skipReason = fmt.Sprintf("managed by %s; spec.gitOpsManaged is Skip", tool), ReasonGitOpsManaged
			} else if w.extra != nil && w.extra.mode == modeKEDA && kedaUserPaused(o) {
				if u, ok := o.(*unstructured.Unstructured); ok {
					if w.kedaTarget, w.skip = kedaRestorable(u, byTarget); w.skip != "" {
						w.skipReason = ReasonCannotRestore
					}
				}
			}
		}
		w.targeted = inScope && w.skip == ""
		w.want = asleep && w.targeted
		w.act = decide(w, s.Name)
		finishBegun(w, s.Name)
		if w.targeted {
			w.gitOps = gitOpsTool(o)
		}
	}
	// By kind, namespace and name, without building the names.
	slices.SortFunc(all, func(a, b *workload) int {
		return cmp.Or(strings.Compare(a.kind, b.kind), strings.Compare(a.obj.GetNamespace(), b.obj.GetNamespace()), strings.Compare(a.obj.GetName(), b.obj.GetName()))
	})
	obs.workloads = all
	obs.sleepReplicas = t.SleepReplicas
	return nil
}

// finishBegun corrects what decide chose for a workload whose sleep or wake was begun
// and not finished: a record written and its effect not yet, or the other way round.
func finishBegun(w *workload, schedule string) {
	if w.extra != nil && w.extra.mode == modeKEDA && w.record != nil && w.record.Waking && w.asleepBy == schedule && !w.leftAlone {
		// A wake that restored the ScaledObject and not yet its target: finish it,
		// even if the schedule sleeps again (the next reconcile puts it back to
		// sleep, recording the target's count as it then is).
		w.act = actWake
	}
	if w.extra != nil && w.extra.mode == modeScale && w.record != nil && w.record.Replicas != nil &&
		w.value == *w.record.Replicas && w.value != w.sleepValue() && !w.leftAlone {
		// The record was written and the scale not (yet) changed, or the scale
		// restored and the record not (yet) removed: finish what was begun, and do
		// not take it for a change by the owner.
		switch w.act {
		case actLeftAlone:
			w.act = actFinishSleep
		case actRelease:
			w.halfWoken = true
		}
	}
}

// listWorkloads lists with opts the HorizontalPodAutoscalers (into hpas, and those s
// pins into obs) and the Deployments, StatefulSets and CronJobs (through add).
func (r *Reconciler) listWorkloads(ctx context.Context, s *powerv1alpha1.SleepSchedule, obs *observation,
	hpas map[hpaKey]*autoscalingv2.HorizontalPodAutoscaler, add func(*workload), opts ...client.ListOption) error {
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
			ready:       rolledOut(d)})
	}
	var sl appsv1.StatefulSetList
	if err := r.List(ctx, &sl, opts...); err != nil {
		return fmt.Errorf("listing StatefulSets: %w", err)
	}
	for i := range sl.Items {
		st := &sl.Items[i]
		add(&workload{kind: powerv1alpha1.KindStatefulSet, obj: st, value: replicasOf(st.Spec.Replicas),
			podRequests: podRequests(&st.Spec.Template.Spec),
			ready:       rolledOut(st)})
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

func excluded(s *powerv1alpha1.SleepSchedule, w *workload, sel k8slabels.Selector) bool {
	o := w.obj
	if o.GetAnnotations()[powerv1alpha1.ExcludeAnnotation] == "true" || sel.Matches(k8slabels.Set(o.GetLabels())) {
		return true
	}
	kind := w.kind
	if w.extra != nil {
		kind = w.extra.gk.Kind
	}
	for _, ref := range s.Spec.Exclude.Workloads {
		if ref.Kind == kind && ref.Name == o.GetName() && (ref.Namespace == "" || ref.Namespace == o.GetNamespace()) {
			return true
		}
	}
	return false
}

// asleepNow reports whether, after this reconcile's writes, the schedule holds the
// workload asleep (its owner has not taken it back).
func (w *workload) asleepNow(schedule string) bool {
	switch w.act {
	case actSleep:
		return w.err == nil
	case actFinishSleep:
		return true // asleep by record; a failed scale write is retried
	case actWake, actRelease:
		return w.err != nil // a failed or conflicting wake leaves it asleep
	case actLeftAlone:
		return false
	}
	return w.asleepBy == schedule && w.record != nil && !w.leftAlone
}

// savedPods is how many of the workload's pods do not run because it sleeps.
func (w *workload) savedPods(sleepReplicas int32) int64 {
	if w.kind == powerv1alpha1.KindCronJob || w.extra != nil {
		return 0
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
	return int64(max(orig-slept, 0))
}

// savedRequests is what the pods a sleeping workload does not run would request.
func (w *workload) savedRequests(sleepReplicas int32) corev1.ResourceList {
	var sum requestSum
	sum.add(w.podRequests, w.savedPods(sleepReplicas))
	return sum.list()
}

// requestSum adds up CPU and memory requests in integers (millicores and bytes):
// Quantity arithmetic, done for every workload at every reconcile, costs a
// transition over thousands of workloads seconds of CPU.
type requestSum struct {
	milliCPU, memory     int64
	hasCPU, hasMemory    bool
	cpuFormat, memFormat resource.Format
}

// add adds what pods pods requesting req each would request.
func (s *requestSum) add(req corev1.ResourceList, pods int64) {
	if pods <= 0 {
		return
	}
	if q, ok := req[corev1.ResourceCPU]; ok {
		s.milliCPU += q.MilliValue() * pods
		s.hasCPU, s.cpuFormat = true, q.Format
	}
	if q, ok := req[corev1.ResourceMemory]; ok {
		s.memory += q.Value() * pods
		s.hasMemory, s.memFormat = true, q.Format
	}
}

// list is the sum as a ResourceList; nil when nothing was added.
func (s *requestSum) list() corev1.ResourceList {
	if !s.hasCPU && !s.hasMemory {
		return nil
	}
	out := corev1.ResourceList{}
	if s.hasCPU {
		out[corev1.ResourceCPU] = *resource.NewMilliQuantity(s.milliCPU, s.cpuFormat)
	}
	if s.hasMemory {
		out[corev1.ResourceMemory] = *resource.NewQuantity(s.memory, s.memFormat)
	}
	return out
}

func isConflict(err error) bool { return apierrors.IsConflict(err) || apierrors.IsNotFound(err) }

// rolledOut says whether a woken workload serves again: at least its declared
// replicas ready (kit.RolloutReadyAtCount).
func rolledOut(o client.Object) bool {
	ok, _ := kit.RolledOut(o, kit.RolloutReadyAtCount)
	return ok
}
