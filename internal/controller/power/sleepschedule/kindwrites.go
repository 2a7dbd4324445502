package sleepschedule

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

// writeKind makes one change to an object of a kind of targets.kinds.
func (r *Reconciler) writeKind(ctx context.Context, s *powerv1alpha1.SleepSchedule, w *workload, sleepReplicas int32) error {
	switch w.extra.mode {
	case modeScale:
		return r.writeScaled(ctx, s, w, sleepReplicas)
	case modeKEDA:
		return r.writeKEDA(ctx, s, w)
	}
	return r.writePatched(ctx, s, w)
}

// writeKEDA pauses a ScaledObject with KEDA's own annotation, which makes KEDA scale
// its target to zero and stop autoscaling it; waking puts back the annotation the
// owner had (or removes it), and KEDA takes over again. One merge patch, record
// included.
//
// A ScaledObject its user paused at its target's current count (paused "true")
// stays paused after the wake, and KEDA then keeps the target at zero: its sleep
// record holds the target's count, and the wake scales the target back once the
// ScaledObject's annotations are restored (so that KEDA, obeying paused-replicas,
// does not scale it down again). Three requests, each recorded on the ScaledObject
// before the next: the annotations restored with the record marked waking, the
// target's replicas, then the record removed.
func (r *Reconciler) writeKEDA(ctx context.Context, s *powerv1alpha1.SleepSchedule, w *workload) error {
	p := newPatch(w.obj)
	switch w.act {
	case actSleep:
		rec := sleepRecord{PausedReplicas: kedaPaused(w.obj)}
		if t := w.kedaTarget; t != nil {
			paused := w.obj.GetAnnotations()[kedaPausedAnnotation]
			rec.Paused, rec.TargetKind, rec.TargetName, rec.TargetReplicas = &paused, t.kind, t.obj.GetName(), ptr.To(t.value)
		}
		raw, _ := json.Marshal(rec)
		p.markAsleep(s.Name)
		p.setAnnotation(powerv1alpha1.SleepStateAnnotation, string(raw))
		p.setAnnotation(powerv1alpha1.KEDAPausedReplicasAnnotation, kedaSleepValue)
		p.removeAnnotation(powerv1alpha1.LeftAloneAnnotation)
	case actWake:
		if w.record.TargetReplicas != nil {
			return r.wakeKEDATarget(ctx, w)
		}
		restorePaused(p, w.record)
		p.release()
	case actRelease:
		p.release()
	case actLeftAlone:
		p.setAnnotation(powerv1alpha1.LeftAloneAnnotation, "true")
	}
	_, err := r.patchKindMetadata(ctx, w, p)
	return err
}

// restorePaused puts back the paused-replicas annotation the ScaledObject had before
// sleep, or removes Orderly's.
func restorePaused(p *workloadPatch, rec *sleepRecord) {
	if prev := rec.PausedReplicas; prev != nil {
		p.setAnnotation(powerv1alpha1.KEDAPausedReplicasAnnotation, *prev)
	} else {
		p.removeAnnotation(powerv1alpha1.KEDAPausedReplicasAnnotation)
	}
}

// wakeKEDATarget wakes a ScaledObject its user paused: its annotations, then its
// target's replicas, then its record (writeKEDA).
func (r *Reconciler) wakeKEDATarget(ctx context.Context, w *workload) error {
	from := w.obj
	if !w.record.Waking {
		waking := *w.record
		waking.Waking = true
		raw, _ := json.Marshal(waking)
		p := newPatch(w.obj)
		restorePaused(p, w.record)
		p.setAnnotation(powerv1alpha1.SleepStateAnnotation, string(raw))
		rv, err := r.patchKindMetadata(ctx, w, p)
		if err != nil {
			return err
		}
		c := w.obj.DeepCopyObject().(client.Object)
		c.SetResourceVersion(rv)
		from = c
	}
	if err := r.scaleKEDATarget(ctx, w); err != nil {
		return err
	}
	p := newPatch(from)
	p.release()
	_, err := r.patchKindMetadata(ctx, w, p)
	return err
}

// scaleKEDATarget sets the recorded replicas on the target of a user-paused
// ScaledObject, at the version the cache holds (optimistic locking); a target that
// is gone has nothing to restore.
func (r *Reconciler) scaleKEDATarget(ctx context.Context, w *workload) error {
	rec := w.record
	var target client.Object = &appsv1.Deployment{}
	if rec.TargetKind == powerv1alpha1.KindStatefulSet {
		target = &appsv1.StatefulSet{}
	}
	if err := r.Get(ctx, client.ObjectKey{Namespace: w.obj.GetNamespace(), Name: rec.TargetName}, target); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading the target %s %s/%s: %w", rec.TargetKind, w.obj.GetNamespace(), rec.TargetName, err)
	}
	p := newPatch(target)
	p.spec["replicas"] = *rec.TargetReplicas
	if err := r.patchMetadata(ctx, target, p); err != nil {
		return fmt.Errorf("scaling the target %s %s/%s back to %d: %w", rec.TargetKind, w.obj.GetNamespace(), rec.TargetName, *rec.TargetReplicas, err)
	}
	return nil
}

// writePatched sets or restores the fields of a kind that sleeps by patch, with its
// record, in one request of the patch's type.
func (r *Reconciler) writePatched(ctx context.Context, s *powerv1alpha1.SleepSchedule, w *workload) error {
	u, ok := w.obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("%s was not read whole", w.id())
	}
	_, hasLabels, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "labels")
	_, hasAnnotations, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "annotations")
	op := &objectPatch{typ: w.extra.spec.Patch.Type, resourceVersion: u.GetResourceVersion(),
		hasLabels: hasLabels, hasAnnotations: hasAnnotations,
		labels: map[string]*string{}, annotations: map[string]*string{}}
	// The same keys as workloadPatch sets and removes; removals only of keys the
	// object has (a JSON patch fails on a missing one).
	p := newPatch(u)
	switch w.act {
	case actSleep:
		fields, err := captureFields(u.Object, w.extra.spec.Patch)
		if err != nil {
			return fmt.Errorf("recording %s: %w", w.id(), err)
		}
		raw, _ := json.Marshal(sleepRecord{Fields: fields})
		p.markAsleep(s.Name)
		p.setAnnotation(powerv1alpha1.SleepStateAnnotation, string(raw))
		p.removeAnnotation(powerv1alpha1.LeftAloneAnnotation)
		for _, f := range fields {
			if err := op.set(p, f.Path, f.Slept, f.Before != nil); err != nil {
				return err
			}
		}
	case actWake:
		for _, f := range w.record.Fields {
			_, exists, err := valueAt(u.Object, f.Path)
			if err != nil {
				return err
			}
			if err := op.set(p, f.Path, f.Before, exists); err != nil {
				return err
			}
		}
		p.release()
	case actRelease:
		p.release()
	case actLeftAlone:
		p.setAnnotation(powerv1alpha1.LeftAloneAnnotation, "true")
	}
	op.labels, op.annotations = p.labels, p.annotations
	typ, body, err := op.build()
	if err != nil {
		return err
	}
	_, err = r.patchKindMetadata(ctx, w, client.RawPatch(typ, body))
	return err
}

// writeScaled scales an object through its scale subresource, as the HPA does. The
// record and the replicas are two requests: the record is written first, so that a
// failure in between leaves a record to finish from (actFinishSleep), never replicas
// at zero with nothing that says what they were. Each request carries the
// resourceVersion the previous one returned (optimistic locking).
func (r *Reconciler) writeScaled(ctx context.Context, s *powerv1alpha1.SleepSchedule, w *workload, sleepReplicas int32) error {
	switch w.act {
	case actSleep:
		sc, err := r.getScale(ctx, w)
		if err != nil {
			return err
		}
		from := w.obj.DeepCopyObject().(client.Object)
		from.SetResourceVersion(sc.resourceVersion)
		raw, _ := json.Marshal(sleepRecord{Replicas: &sc.replicas, SleepReplicas: &sleepReplicas})
		p := newPatch(from)
		p.markAsleep(s.Name)
		p.setAnnotation(powerv1alpha1.SleepStateAnnotation, string(raw))
		p.removeAnnotation(powerv1alpha1.LeftAloneAnnotation)
		rv, err := r.patchKindMetadata(ctx, w, p)
		if err != nil {
			return err
		}
		_, err = r.patchScale(ctx, w, rv, sleepReplicas)
		return err
	case actFinishSleep:
		_, err := r.patchScale(ctx, w, w.obj.GetResourceVersion(), *w.record.SleepReplicas)
		return err
	case actWake:
		rv, err := r.patchScale(ctx, w, w.obj.GetResourceVersion(), *w.record.Replicas)
		if err != nil {
			return err
		}
		from := w.obj.DeepCopyObject().(client.Object)
		from.SetResourceVersion(rv)
		p := newPatch(from)
		p.release()
		_, err = r.patchKindMetadata(ctx, w, p)
		return err
	case actRelease:
		p := newPatch(w.obj)
		p.release()
		_, err := r.patchKindMetadata(ctx, w, p)
		return err
	case actLeftAlone:
		p := newPatch(w.obj)
		p.setAnnotation(powerv1alpha1.LeftAloneAnnotation, "true")
		_, err := r.patchKindMetadata(ctx, w, p)
		return err
	}
	return nil
}

// patchScale sets the object's replicas through its scale subresource, refused when
// the object is no longer at resourceVersion rv; it returns the new resourceVersion.
func (r *Reconciler) patchScale(ctx context.Context, w *workload, rv string, replicas int32) (string, error) {
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": rv},
		"spec":     map[string]any{"replicas": replicas},
	})
	if err != nil {
		return "", err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(w.extra.gvk())
	obj.SetNamespace(w.obj.GetNamespace())
	obj.SetName(w.obj.GetName())
	scale := &unstructured.Unstructured{}
	if err := r.SubResource("scale").Patch(ctx, obj, client.RawPatch(types.MergePatchType, body),
		client.WithSubResourceBody(scale), client.FieldOwner(labels.FieldManager)); err != nil {
		return "", fmt.Errorf("scaling %s through /scale: %w", w.id(), err)
	}
	return scale.GetResourceVersion(), nil
}

// patchKindMetadata sends p for the object of w; it returns the object's new
// resourceVersion.
func (r *Reconciler) patchKindMetadata(ctx context.Context, w *workload, p client.Patch) (string, error) {
	m := &unstructured.Unstructured{}
	m.SetGroupVersionKind(w.extra.gvk())
	m.SetNamespace(w.obj.GetNamespace())
	m.SetName(w.obj.GetName())
	if err := r.Patch(ctx, m, p, client.FieldOwner(labels.FieldManager)); err != nil {
		return "", err
	}
	return m.GetResourceVersion(), nil
}
