package sleepschedule

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestWorkloadChangedFiltersStatusNoise(t *testing.T) {
	one := int32(1)
	base := func() *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "d", Generation: 2, Labels: map[string]string{"a": "b"}},
			Spec:       appsv1.DeploymentSpec{Replicas: &one},
			Status:     appsv1.DeploymentStatus{ObservedGeneration: 2, ReadyReplicas: 1, UpdatedReplicas: 1, Replicas: 1},
		}
	}
	tests := []struct {
		name   string
		mutate func(d *appsv1.Deployment)
		want   bool
	}{
		{"status change that keeps it ready", func(d *appsv1.Deployment) { d.Status.Replicas = 2 }, false},
		{"becomes unready", func(d *appsv1.Deployment) { d.Status.ReadyReplicas = 0 }, true},
		{"spec change", func(d *appsv1.Deployment) { d.Generation = 3 }, true},
		{"label change", func(d *appsv1.Deployment) { d.Labels["a"] = "c" }, true},
		{"annotation added", func(d *appsv1.Deployment) { d.Annotations = map[string]string{"x": "y"} }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := base()
			tt.mutate(n)
			if got := workloadChanged().Update(event.UpdateEvent{ObjectOld: base(), ObjectNew: n}); got != tt.want {
				t.Errorf("workloadChanged = %v, want %v", got, tt.want)
			}
		})
	}
}
