package sleepschedule

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

// DefaultWriters is how many workload writes the controller makes at once, all its
// reconciles together. A transition is a burst of small PATCHes; 20 at a time keep a
// typical API server busy without crowding out its other clients (API Priority and
// Fairness queues Orderly's requests beyond its share), the same concurrency as
// kube-green's 20 workers.
const DefaultWriters = 20

// writePool bounds the workload writes of every reconcile of the controller together,
// so that many small schedules transition as fast as one big one and no more than
// the pool's size of writes is ever in flight. Waiting reconciles are served in the
// order they came (a channel's blocked senders are queued first in, first out), a
// write each in turn, so that concurrent reconciles share it fairly.
//
// A reconcile's bookkeeping (its status write and Events) waits until no workload
// write is pending (afterWrites): when many schedules change together, every
// workload is written before the API server is asked for anything else.
type writePool struct {
	slots chan struct{}

	mu sync.Mutex
	// pending counts the workload writes queued or in flight; idle is closed while it
	// is zero, and replaced by an open channel when it rises above.
	pending int
	idle    chan struct{}
}

func newWritePool(n int) *writePool {
	idle := make(chan struct{})
	close(idle)
	return &writePool{slots: make(chan struct{}, max(n, 1)), idle: idle}
}

// do runs f holding one slot; it returns ctx's error if ctx ends while waiting.
func (p *writePool) do(ctx context.Context, f func() error) error {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.slots }()
	return f()
}

// add changes the count of pending workload writes by n.
func (p *writePool) add(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	was := p.pending
	p.pending += n
	switch {
	case was == 0 && p.pending > 0:
		p.idle = make(chan struct{})
	case was > 0 && p.pending == 0:
		close(p.idle)
	}
}

// whenIdle is closed once no workload write is pending.
func (p *writePool) whenIdle() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idle
}

// afterWrites runs f, a reconcile's bookkeeping, holding one slot once no workload
// write is pending, or once it has waited maxWait (so that a stream of writes cannot
// hold a status back for long). It returns ctx's error if ctx ends while waiting.
func (p *writePool) afterWrites(ctx context.Context, maxWait time.Duration, f func() error) error {
	t := time.NewTimer(maxWait)
	defer t.Stop()
	select {
	case <-p.whenIdle():
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return p.do(ctx, f)
}

// each runs f(i) for every i in [0, n), each call holding a slot of the pool, and
// returns once all are done. The caller takes the slots one after the other, and
// a goroutine runs each write while it holds its slot: however many reconciles wait
// for the pool, no more goroutines write than it has slots, and the waiting
// reconciles take a slot each in turn. When ctx ends before a slot is free, the
// writes not started are done with ctx's error.
func (p *writePool) each(ctx context.Context, n int, f func(i int) error, done func(i int, err error)) {
	if n == 0 {
		return
	}
	p.add(n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	finish := func(i int, err error) {
		p.add(-1)
		mu.Lock()
		defer mu.Unlock()
		done(i, err)
	}
	for i := range n {
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			for j := i; j < n; j++ {
				finish(j, ctx.Err())
			}
			wg.Wait()
			return
		}
		wg.Go(func() {
			err := f(i)
			<-p.slots
			finish(i, err)
		})
	}
	wg.Wait()
}

// interleave orders workloads so that namespaces take turns: the first workload of
// every namespace, then the second of every namespace, and so on. A transition over
// many namespaces then reaches each of them early, instead of finishing one
// namespace before starting the next. ws is in a stable order (by id), and so is the
// result.
func interleave(ws []*workload) []*workload {
	byNS := map[string][]*workload{}
	var order []string
	for _, w := range ws {
		ns := w.obj.GetNamespace()
		if _, ok := byNS[ns]; !ok {
			order = append(order, ns)
		}
		byNS[ns] = append(byNS[ns], w)
	}
	slices.Sort(order)
	out := make([]*workload, 0, len(ws))
	for round := 0; len(out) < len(ws); round++ {
		for _, ns := range order {
			if list := byNS[ns]; round < len(list) {
				out = append(out, list[round])
			}
		}
	}
	return out
}

// apply carries out the decided actions through the controller's write pool, and
// records the outcome in obs.
func (r *Reconciler) apply(ctx context.Context, s *powerv1alpha1.SleepSchedule, obs *observation) {
	var todo []*workload
	for _, w := range obs.workloads {
		if w.act != actNone {
			todo = append(todo, w)
		}
	}
	todo = interleave(todo)
	r.pool().each(ctx, len(todo), func(i int) error {
		return r.writeOrRelease(ctx, s, todo[i], obs.sleepReplicas)
	}, func(i int, err error) {
		obs.recordWrite(todo[i], err)
	})
	r.reconcileHPAs(ctx, s, obs)
}

// writeOrRelease makes one workload's change. A wake that the API server refuses as
// invalid (a record that passed readRecord's checks but not the API's) would fail at
// every retry and hold the schedule's deletion: the workload is released instead,
// without being restored.
func (r *Reconciler) writeOrRelease(ctx context.Context, s *powerv1alpha1.SleepSchedule, w *workload, sleepReplicas int32) error {
	err := r.write(ctx, s, w, sleepReplicas)
	if w.act != actWake || !apierrors.IsInvalid(err) {
		return err
	}
	w.act, w.badRecord = actRelease, fmt.Errorf("the API server refused to restore the sleep record: %w", err)
	return r.write(ctx, s, w, sleepReplicas)
}

// write makes one workload's change, with optimistic locking: the decision was made
// on the cached version, and a change by someone else since must not be overwritten.
func (r *Reconciler) write(ctx context.Context, s *powerv1alpha1.SleepSchedule, w *workload, sleepReplicas int32) error {
	if w.extra != nil {
		return r.writeKind(ctx, s, w, sleepReplicas)
	}
	p := newPatch(w.obj)
	switch w.act {
	case actSleep:
		rec := sleepRecord{}
		switch o := w.obj.(type) {
		case *appsv1.Deployment:
			rec.Replicas, rec.SleepReplicas = ptr.To(replicasOf(o.Spec.Replicas)), ptr.To(sleepReplicas)
			p.spec["replicas"] = sleepReplicas
		case *appsv1.StatefulSet:
			rec.Replicas, rec.SleepReplicas = ptr.To(replicasOf(o.Spec.Replicas)), ptr.To(sleepReplicas)
			p.spec["replicas"] = sleepReplicas
		case *batchv1.CronJob:
			rec.Suspend = ptr.To(ptr.Deref(o.Spec.Suspend, false))
			p.spec["suspend"] = true
		}
		raw, _ := json.Marshal(rec)
		p.markAsleep(s.Name)
		p.setAnnotation(powerv1alpha1.SleepStateAnnotation, string(raw))
		p.removeAnnotation(powerv1alpha1.LeftAloneAnnotation)
	case actWake:
		switch w.obj.(type) {
		case *appsv1.Deployment, *appsv1.StatefulSet:
			p.spec["replicas"] = *w.record.Replicas
		case *batchv1.CronJob:
			p.spec["suspend"] = ptr.Deref(w.record.Suspend, false)
		}
		p.release()
	case actRelease:
		p.release()
	case actLeftAlone:
		p.setAnnotation(powerv1alpha1.LeftAloneAnnotation, "true")
	}
	return r.patchMetadata(ctx, w.obj, p)
}

// patchMetadata sends p for the object o and asks for only its metadata back: the API
// server then encodes, and Orderly decodes, a fraction of the object at each write.
func (r *Reconciler) patchMetadata(ctx context.Context, o client.Object, p client.Patch) error {
	gvk, err := r.GroupVersionKindFor(o)
	if err != nil {
		return err
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	m.Namespace, m.Name = o.GetNamespace(), o.GetName()
	return r.Patch(ctx, m, p, client.FieldOwner(labels.FieldManager))
}

// workloadPatch is the JSON merge patch of one write. It names each label and
// annotation it sets or removes (null), and never a whole map: the cache holds only
// Orderly's annotations of a workload (trimWorkload), and a diff of the cached copy
// that removed the last of them would send "annotations": null, which wipes every
// annotation of the real object. The spec fields it sets are Orderly's alone
// (replicas, suspend, an HPA's bounds); nothing the cache dropped is ever sent. The
// resourceVersion the decision was made on makes the API server refuse the patch
// when the workload changed since (optimistic locking).
type workloadPatch struct {
	from                client.Object // the cached object the patch was decided on
	labels, annotations map[string]*string
	spec                map[string]any
}

func newPatch(from client.Object) *workloadPatch {
	return &workloadPatch{from: from, labels: map[string]*string{}, annotations: map[string]*string{}, spec: map[string]any{}}
}

// markAsleep sets the label naming the schedule that holds the workload asleep.
func (p *workloadPatch) markAsleep(schedule string) { p.labels[powerv1alpha1.AsleepLabel] = &schedule }
func (p *workloadPatch) setAnnotation(k, v string)  { p.annotations[k] = &v }

// removeLabel and removeAnnotation send null for a key the workload has; nothing for
// one it does not.
func (p *workloadPatch) removeLabel(k string) {
	if _, ok := p.from.GetLabels()[k]; ok {
		p.labels[k] = nil
	}
}

func (p *workloadPatch) removeAnnotation(k string) {
	if _, ok := p.from.GetAnnotations()[k]; ok {
		p.annotations[k] = nil
	}
}

// release removes Orderly's label and annotations.
func (p *workloadPatch) release() {
	p.removeLabel(powerv1alpha1.AsleepLabel)
	p.removeAnnotation(powerv1alpha1.SleepStateAnnotation)
	p.removeAnnotation(powerv1alpha1.LeftAloneAnnotation)
}

func (p *workloadPatch) Type() types.PatchType { return types.MergePatchType }

func (p *workloadPatch) Data(client.Object) ([]byte, error) {
	meta := map[string]any{"resourceVersion": p.from.GetResourceVersion()}
	if len(p.labels) > 0 {
		meta["labels"] = p.labels
	}
	if len(p.annotations) > 0 {
		meta["annotations"] = p.annotations
	}
	body := map[string]any{"metadata": meta}
	if len(p.spec) > 0 {
		body["spec"] = p.spec
	}
	return json.Marshal(body)
}

// hpaWrite is one HorizontalPodAutoscaler change: pin it while its workload sleeps,
// or restore (or, with a record that cannot be restored, only release) it.
type hpaWrite struct {
	hpa *autoscalingv2.HorizontalPodAutoscaler // from the cache: never modified
	pin bool
	rec *sleepRecord // restore these bounds; nil releases without restoring
	// bad is why the recorded bounds are not restored.
	bad error
}

func (h *hpaWrite) id() string { return kindHPA + " " + h.hpa.Namespace + "/" + h.hpa.Name }

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
	var todo []*hpaWrite
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
		rec, bad := readRecord(h, kindHPA)
		todo = append(todo, &hpaWrite{hpa: h, rec: rec, bad: bad})
	}
	for key, h := range want {
		if !pinned[key] {
			todo = append(todo, &hpaWrite{hpa: h, pin: true})
		}
	}
	slices.SortFunc(todo, func(a, b *hpaWrite) int { return cmp.Compare(a.id(), b.id()) })
	r.pool().each(ctx, len(todo), func(i int) error {
		h := todo[i]
		err := r.writeHPA(ctx, s, h, obs.sleepReplicas)
		if !h.pin && h.rec != nil && apierrors.IsInvalid(err) {
			h.rec, h.bad = nil, fmt.Errorf("the API server refused to restore the sleep record: %w", err)
			err = r.writeHPA(ctx, s, h, obs.sleepReplicas)
		}
		return err
	}, func(i int, err error) {
		obs.recordHPAWrite(todo[i], err)
	})
}

func (r *Reconciler) writeHPA(ctx context.Context, s *powerv1alpha1.SleepSchedule, h *hpaWrite, sleepReplicas int32) error {
	p := newPatch(h.hpa)
	if h.pin {
		raw, _ := json.Marshal(sleepRecord{MinReplicas: h.hpa.Spec.MinReplicas, MaxReplicas: h.hpa.Spec.MaxReplicas})
		p.markAsleep(s.Name)
		p.setAnnotation(powerv1alpha1.SleepStateAnnotation, string(raw))
		p.spec["minReplicas"], p.spec["maxReplicas"] = sleepReplicas, sleepReplicas
	} else {
		if h.rec != nil {
			// A recorded minReplicas of nil is sent as null: the API server's default.
			p.spec["minReplicas"], p.spec["maxReplicas"] = h.rec.MinReplicas, h.rec.MaxReplicas
		}
		p.release()
	}
	return r.patchMetadata(ctx, h.hpa, p)
}
