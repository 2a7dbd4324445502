package canary

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
)

func targetDeployment(replicas *int32, ann map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Annotations: ann},
		Spec: appsv1.DeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}}},
			},
		},
	}
}

func TestRevisionIgnoresOrderlysLabels(t *testing.T) {
	d := targetDeployment(nil, nil)
	rev := revisionOf(&d.Spec.Template)
	c := newCanary(weightStep(10, 0))
	v := buildVariant(c, d, deliveryv1alpha1.VariantCanary, &d.Spec.Template, rev, 2)
	if got := revisionOf(&v.Spec.Template); got != rev {
		t.Fatalf("the canary's template has revision %s, the target's %s", got, rev)
	}
	d.Spec.Template.Spec.Containers[0].Image = "web:2"
	if revisionOf(&d.Spec.Template) == rev {
		t.Fatal("a new image is not a new revision")
	}
}

func TestVariantSelectsOnlyItsOwnPods(t *testing.T) {
	d := targetDeployment(ptr.To[int32](3), nil)
	c := newCanary(weightStep(10, 0))
	v := buildVariant(c, d, deliveryv1alpha1.VariantPrimary, &d.Spec.Template, "r1", 3)
	if v.Name != "web-primary" || v.Spec.Selector.MatchLabels[deliveryv1alpha1.VariantLabel] != "primary" || len(v.Spec.Selector.MatchLabels) != 2 {
		t.Fatalf("selector %v", v.Spec.Selector.MatchLabels)
	}
	if v.Spec.Template.Labels["app"] != "web" || v.Spec.Template.Labels[deliveryv1alpha1.CanaryLabel] != "web" {
		t.Fatalf("template labels %v", v.Spec.Template.Labels)
	}
	if d.Spec.Template.Labels[deliveryv1alpha1.VariantLabel] != "" {
		t.Fatal("building the variant changed the target's template")
	}
}

func TestReplicasOf(t *testing.T) {
	for _, tt := range []struct {
		name     string
		replicas *int32
		ann      map[string]string
		want     int32
	}{
		{"running target: its count", ptr.To[int32](4), nil, 4},
		{"no count: Kubernetes' default", nil, nil, 1},
		{"held at zero: the recorded count", ptr.To[int32](0), map[string]string{deliveryv1alpha1.ReplicasAnnotation: "5", deliveryv1alpha1.TargetAnnotation: "web"}, 5},
		{"the user scaled it while held: the new count", ptr.To[int32](7), map[string]string{deliveryv1alpha1.ReplicasAnnotation: "5"}, 7},
		{"a forged count out of bounds is not used", ptr.To[int32](0), map[string]string{deliveryv1alpha1.ReplicasAnnotation: "99999999", deliveryv1alpha1.TargetAnnotation: "web"}, 1},
		{"a target at zero before any Canary", ptr.To[int32](0), nil, 0},
	} {
		if got := replicasOf(targetDeployment(tt.replicas, tt.ann)); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestVariantReady(t *testing.T) {
	d := targetDeployment(ptr.To[int32](2), nil)
	d.Generation = 3
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	if !variantStateOf(d).ready {
		t.Fatal("ready Deployment not ready")
	}
	d.Status.ObservedGeneration = 2
	if variantStateOf(d).ready {
		t.Fatal("a spec not yet seen by the Deployment controller counts as ready")
	}
	d.Status.ObservedGeneration, d.Status.Replicas = 3, 3
	if variantStateOf(d).ready {
		t.Fatal("an old pod still running counts as ready")
	}
}

// Regression: a canary whose replica count is lowered during its analysis (the user
// scales the target down) still runs the revision on every pod, all available, while
// its surplus pods go. It used to count as not ready until they were gone (the old
// rule wanted status.replicas == spec.replicas): its traffic went back to the primary
// and the step's analysis window started again.
func TestCanaryScaledDownKeepsItsTrafficAndStep(t *testing.T) {
	w := newWorld(t, newCanary(weightStep(10, time.Minute), weightStep(50, time.Minute)))
	w.step(nil)
	w.step(nil)
	w.target = "r2"
	w.at(time.Second).step(nil)
	w.at(2 * time.Second).step(nil)
	w.expect(deliveryv1alpha1.PhaseProgressing, 0, 10)
	started := w.c.Status.StepStartedAt

	scalingDown := targetDeployment(ptr.To[int32](2), nil)
	scalingDown.Annotations = map[string]string{deliveryv1alpha1.RevisionAnnotation: "r2"}
	scalingDown.Generation = 4
	scalingDown.Status = appsv1.DeploymentStatus{ObservedGeneration: 4, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}
	w.canary = variantStateOf(scalingDown)
	w.at(10 * time.Second).step(nil)
	w.expect(deliveryv1alpha1.PhaseProgressing, 0, 10)
	if w.c.Status.StepStartedAt == nil || !w.c.Status.StepStartedAt.Equal(started) {
		t.Fatalf("the step's window moved from %v to %v (%s)", started, w.c.Status.StepStartedAt, w.last.message)
	}
}

// A label policy that admits the user's Deployment must admit its variants: they carry
// the target's labels, and Orderly's own labels cannot be overridden by them.
func TestVariantCarriesTheTargetsLabels(t *testing.T) {
	d := targetDeployment(nil, nil)
	d.Labels = map[string]string{"cost-center": "cc-1042", deliveryv1alpha1.VariantLabel: "forged"}
	c := newCanary(weightStep(10, 0))
	v := buildVariant(c, d, deliveryv1alpha1.VariantCanary, &d.Spec.Template, "r1", 1)
	if v.Labels["cost-center"] != "cc-1042" {
		t.Errorf("labels %v: the target's cost-center is missing", v.Labels)
	}
	if v.Labels[deliveryv1alpha1.VariantLabel] != deliveryv1alpha1.VariantCanary || v.Labels[deliveryv1alpha1.CanaryLabel] != c.Name {
		t.Errorf("labels %v: Orderly's labels must win", v.Labels)
	}
	if d.Labels[deliveryv1alpha1.VariantLabel] != "forged" {
		t.Error("building the variant changed the target's labels")
	}
}
