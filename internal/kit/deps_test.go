package kit

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/controller"
)

func TestDepsForGivesEachControllerItsWorkers(t *testing.T) {
	tests := []struct {
		name        string
		flag        int
		controller  Controller
		wantWorkers int
	}{
		{"the controller's own default", 0, Controller{Name: "a", Workers: 8}, 8},
		{"the kit's default for a controller that sets none", 0, Controller{Name: "b"}, DefaultWorkers},
		{"the manager's setting wins", 2, Controller{Name: "a", Workers: 8}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Deps{Options: controller.Options{MaxConcurrentReconciles: tt.flag}, Namespace: "ns"}
			got := d.For(tt.controller)
			if got.Options.MaxConcurrentReconciles != tt.wantWorkers {
				t.Errorf("workers = %d, want %d", got.Options.MaxConcurrentReconciles, tt.wantWorkers)
			}
			if got.Namespace != "ns" || d.Options.MaxConcurrentReconciles != tt.flag {
				t.Errorf("For changed more than the workers: %+v (from %+v)", got, d)
			}
		})
	}
}
