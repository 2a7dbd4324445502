package secretrotation

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
)

func TestReferencesSecret(t *testing.T) {
	const name = "db"
	tests := []struct {
		name string
		spec corev1.PodSpec
		want bool
	}{
		{"env secretKeyRef", corev1.PodSpec{Containers: []corev1.Container{{Env: []corev1.EnvVar{{Name: "P", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "password"}}}}}}}, true},
		{"envFrom in an init container", corev1.PodSpec{InitContainers: []corev1.Container{{EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}}}}, true},
		{"secret volume", corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}}}}, true},
		{"projected volume", corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}, {Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}}}}}}, true},
		{"a ConfigMap of the same name", corev1.PodSpec{Containers: []corev1.Container{{EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}}}}, false},
		{"another Secret", corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db2"}}}}}, false},
		{"nothing", corev1.PodSpec{}, false},
	}
	for _, tt := range tests {
		if got := referencesSecret(&tt.spec, name); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func deployment(name string, spec corev1.PodSpec) workload {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: spec}}}
	w := asWorkload(d)
	return w
}

func TestSelectConsumers(t *testing.T) {
	uses := corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}}}}
	all := []workload{deployment("web", uses), deployment("api", uses), deployment("batch", corev1.PodSpec{}), deployment("legacy", uses)}
	ref := func(n string) secretsv1alpha1.ConsumerRef {
		return secretsv1alpha1.ConsumerRef{Kind: secretsv1alpha1.KindDeployment, Name: n}
	}
	chosen, missing := selectConsumers(all, "db", secretsv1alpha1.Consumers{
		Targets: []secretsv1alpha1.ConsumerRef{ref("batch"), ref("ghost")}, Exclude: []secretsv1alpha1.ConsumerRef{ref("legacy")}})
	var names []string
	for _, w := range chosen {
		names = append(names, w.ref.Name)
	}
	if want := []string{"api", "batch", "web"}; !equalStrings(names, want) {
		t.Errorf("chosen %v, want %v (sorted, discovered + targets - excluded)", names, want)
	}
	if len(missing) != 1 || missing[0].Name != "ghost" {
		t.Errorf("missing %v, want ghost", missing)
	}
	chosen, _ = selectConsumers(all, "db", secretsv1alpha1.Consumers{Discover: ptr.To(false), Targets: []secretsv1alpha1.ConsumerRef{ref("web")}})
	if len(chosen) != 1 || chosen[0].ref.Name != "web" {
		t.Errorf("discover off: chosen %v, want only the target web", chosen)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
