package canary

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// specHashAnnotation is, on what Orderly creates, a hash of what Orderly last wrote:
// an object whose hash matches needs no write.
const specHashAnnotation = "delivery.orderly.dev/spec-hash"

// maxReplicas bounds the replica count read back from the target's annotation,
// which anyone who may edit the Deployment can write.
const maxReplicas = 10000

// ownerScheme is the scheme owner references are resolved with.
type ownerScheme = *runtime.Scheme

// revisionOf is the revision of a pod template: a short hash of it, without the
// labels Orderly adds.
func revisionOf(t *corev1.PodTemplateSpec) string {
	clean := t.DeepCopy()
	delete(clean.Labels, deliveryv1alpha1.CanaryLabel)
	delete(clean.Labels, deliveryv1alpha1.VariantLabel)
	if len(clean.Labels) == 0 {
		clean.Labels = nil
	}
	b, _ := json.Marshal(clean)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:10]
}

func hashOf(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// variantName is the name of the primary's or canary's Deployment and Service.
func variantName(c *deliveryv1alpha1.Canary, variant string) string {
	return c.Spec.TargetRef.Name + "-" + variant
}

func variantSelector(c *deliveryv1alpha1.Canary, variant string) map[string]string {
	return map[string]string{deliveryv1alpha1.CanaryLabel: c.Name, deliveryv1alpha1.VariantLabel: variant}
}

// replicasOf is how many replicas the primary runs: the target's own count while it
// still runs (the user changed it, or Orderly has not scaled it down yet), else the
// count recorded on it when it was scaled down; 1 when neither says.
func replicasOf(target *appsv1.Deployment) int32 {
	if target.Spec.Replicas != nil && *target.Spec.Replicas > 0 {
		return *target.Spec.Replicas
	}
	if v, err := strconv.Atoi(target.Annotations[deliveryv1alpha1.ReplicasAnnotation]); err == nil && v >= 0 && v <= maxReplicas {
		return int32(v)
	}
	if target.Spec.Replicas != nil && target.Annotations[deliveryv1alpha1.TargetAnnotation] == "" {
		return *target.Spec.Replicas
	}
	return 1
}

// buildVariant is the primary's or canary's Deployment: the given pod template (the
// target's, or the canary's at promotion) with the variant's labels, selected by
// those labels only, so that it never adopts the target's pods nor the target its.
func buildVariant(c *deliveryv1alpha1.Canary, target *appsv1.Deployment, variant string, template *corev1.PodTemplateSpec, revision string, replicas int32) *appsv1.Deployment {
	sel := variantSelector(c, variant)
	tpl := template.DeepCopy()
	if tpl.Labels == nil {
		tpl.Labels = map[string]string{}
	}
	maps.Copy(tpl.Labels, sel)
	// The target's own labels too (cost centre, team, ...): a label policy that admits
	// the user's Deployment then admits its primary and canary, and the variants are
	// counted where the target was. Orderly's labels win.
	meta := map[string]string{}
	maps.Copy(meta, target.Labels)
	maps.Copy(meta, map[string]string{
		labels.ManagedBy: labels.ManagedByValue, deliveryv1alpha1.CanaryLabel: c.Name, deliveryv1alpha1.VariantLabel: variant,
	})
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   c.Namespace,
			Name:        variantName(c, variant),
			Labels:      meta,
			Annotations: map[string]string{deliveryv1alpha1.RevisionAnnotation: revision},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas:                ptr.To(replicas),
			Selector:                &metav1.LabelSelector{MatchLabels: sel},
			Template:                *tpl,
			Strategy:                target.Spec.Strategy,
			MinReadySeconds:         target.Spec.MinReadySeconds,
			RevisionHistoryLimit:    target.Spec.RevisionHistoryLimit,
			ProgressDeadlineSeconds: target.Spec.ProgressDeadlineSeconds,
		},
	}
	d.Annotations[specHashAnnotation] = hashOf(d.Spec)
	return d
}

// buildService is the primary's or canary's Service.
func buildService(c *deliveryv1alpha1.Canary, variant string) *corev1.Service {
	targetPort := c.Spec.Service.Port
	if c.Spec.Service.TargetPort != nil {
		targetPort = *c.Spec.Service.TargetPort
	}
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: c.Namespace,
			Name:      variantName(c, variant),
			Labels: map[string]string{
				labels.ManagedBy: labels.ManagedByValue, deliveryv1alpha1.CanaryLabel: c.Name, deliveryv1alpha1.VariantLabel: variant,
			},
			Annotations: map[string]string{},
		},
		Spec: corev1.ServiceSpec{
			Selector: variantSelector(c, variant),
			Ports: []corev1.ServicePort{{
				Name: "http", Port: c.Spec.Service.Port, TargetPort: intstr.FromInt32(targetPort), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
	s.Annotations[specHashAnnotation] = hashOf(s.Spec)
	return s
}

// variantStateOf is what the primary's or canary's Deployment says. Ready is
// kit.RolloutComplete: every wanted replica updated and available, no pod of an older
// template left.
func variantStateOf(d *appsv1.Deployment) variantState {
	if d == nil {
		return variantState{}
	}
	ready, _ := kit.RolledOut(d, kit.RolloutComplete)
	return variantState{exists: true, revision: d.Annotations[deliveryv1alpha1.RevisionAnnotation], replicas: ptr.Deref(d.Spec.Replicas, 1), ready: ready}
}

// errNotOurs says that an object Orderly would create exists and is not this
// Canary's: it is never taken over.
type errNotOurs struct{ kind, name string }

func (e *errNotOurs) Error() string {
	return fmt.Sprintf("%s %s exists and was not created by this Canary: Orderly does not take it over; rename or remove it", e.kind, e.name)
}

func setOwner(c *deliveryv1alpha1.Canary, obj metav1.Object, scheme ownerScheme) error {
	return controllerutil.SetControllerReference(c, obj, scheme)
}

// getDeployment reads a Deployment straight from the API server: the shared cache
// may hold Deployments trimmed by another controller. nil when it does not exist.
func (r *Reconciler) getDeployment(ctx context.Context, namespace, name string) (*appsv1.Deployment, error) {
	var d appsv1.Deployment
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &d); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading Deployment %s: %w", name, err)
	}
	return &d, nil
}

// ensureDeployment creates want, or applies it over the existing one of this Canary
// when what Orderly last wrote differs; have is the existing one (nil: none).
func (r *Reconciler) ensureDeployment(ctx context.Context, c *deliveryv1alpha1.Canary, have, want *appsv1.Deployment) error {
	if err := setOwner(c, want, r.Scheme()); err != nil {
		return err
	}
	if have == nil {
		if err := r.Create(ctx, want, client.FieldOwner(labels.FieldManager)); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return &errNotOurs{kind: "Deployment", name: want.Name}
			}
			return fmt.Errorf("creating Deployment %s: %w", want.Name, err)
		}
		return nil
	}
	if !metav1.IsControlledBy(have, c) {
		return &errNotOurs{kind: "Deployment", name: want.Name}
	}
	if have.Annotations[specHashAnnotation] == want.Annotations[specHashAnnotation] &&
		ptr.Deref(have.Spec.Replicas, 1) == ptr.Deref(want.Spec.Replicas, 1) &&
		have.Annotations[deliveryv1alpha1.RevisionAnnotation] == want.Annotations[deliveryv1alpha1.RevisionAnnotation] {
		return nil
	}
	return kit.Apply(ctx, r.Client, want)
}

// ensureService creates the variant's Service, or applies it when what Orderly last
// wrote differs.
func (r *Reconciler) ensureService(ctx context.Context, c *deliveryv1alpha1.Canary, variant string) error {
	want := buildService(c, variant)
	if err := setOwner(c, want, r.Scheme()); err != nil {
		return err
	}
	var have corev1.Service
	err := r.Get(ctx, client.ObjectKeyFromObject(want), &have)
	switch {
	case apierrors.IsNotFound(err):
		// Not in the cache, which holds only Orderly's Services: a Service of that name
		// that someone else made shows as AlreadyExists.
		if err := r.Create(ctx, want, client.FieldOwner(labels.FieldManager)); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return &errNotOurs{kind: "Service", name: want.Name}
			}
			return fmt.Errorf("creating Service %s: %w", want.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading Service %s: %w", want.Name, err)
	}
	if !metav1.IsControlledBy(&have, c) {
		return &errNotOurs{kind: "Service", name: want.Name}
	}
	if have.Annotations[specHashAnnotation] == want.Annotations[specHashAnnotation] {
		return nil
	}
	return kit.Apply(ctx, r.Client, want)
}

// holdTarget scales the user's Deployment to zero, recording the replica count to
// restore and which Canary holds it. Written as a merge patch guarded by the
// resourceVersion: a user's change in between is seen next time, not overwritten.
func (r *Reconciler) holdTarget(ctx context.Context, c *deliveryv1alpha1.Canary, target *appsv1.Deployment, replicas int32) (bool, error) {
	if ptr.Deref(target.Spec.Replicas, 1) == 0 &&
		target.Annotations[deliveryv1alpha1.ReplicasAnnotation] == strconv.Itoa(int(replicas)) &&
		target.Annotations[deliveryv1alpha1.TargetAnnotation] == c.Name {
		return false, nil
	}
	before := target.DeepCopy()
	if target.Annotations == nil {
		target.Annotations = map[string]string{}
	}
	target.Annotations[deliveryv1alpha1.ReplicasAnnotation] = strconv.Itoa(int(replicas))
	target.Annotations[deliveryv1alpha1.TargetAnnotation] = c.Name
	target.Spec.Replicas = ptr.To[int32](0)
	if err := r.Patch(ctx, target, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}), client.FieldOwner(labels.FieldManager)); err != nil {
		return false, fmt.Errorf("scaling Deployment %s to zero: %w", target.Name, err)
	}
	return true, nil
}

// releaseTarget gives the user's Deployment its replica count back and removes
// Orderly's annotations. It returns whether the target is released (it is, too,
// when it is gone or another Canary holds it).
func (r *Reconciler) releaseTarget(ctx context.Context, c *deliveryv1alpha1.Canary) (target *appsv1.Deployment, err error) {
	target, err = r.getDeployment(ctx, c.Namespace, c.Spec.TargetRef.Name)
	if err != nil || target == nil || target.Annotations[deliveryv1alpha1.TargetAnnotation] != c.Name {
		return nil, err
	}
	replicas := replicasOf(target)
	before := target.DeepCopy()
	delete(target.Annotations, deliveryv1alpha1.ReplicasAnnotation)
	delete(target.Annotations, deliveryv1alpha1.TargetAnnotation)
	target.Spec.Replicas = ptr.To(replicas)
	if err := r.Patch(ctx, target, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}), client.FieldOwner(labels.FieldManager)); err != nil {
		return nil, fmt.Errorf("restoring Deployment %s to %d replicas: %w", target.Name, replicas, err)
	}
	return target, nil
}
