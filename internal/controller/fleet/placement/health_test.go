package placement

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterinventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
)

func TestProbeConditionFollowsTheHealthSource(t *testing.T) {
	profile := func(annotations map[string]string) *clusterinventoryv1alpha1.ClusterProfile {
		return &clusterinventoryv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: annotations}}
	}
	for _, tc := range []struct {
		name     string
		ann      map[string]string
		want     string
		wantNote bool
	}{
		{"no annotation: Orderly writes the standard condition", nil, clusterinventoryv1alpha1.ClusterConditionControlPlaneHealthy, false},
		{"Orderly", map[string]string{fleetv1alpha1.HealthSourceAnnotation: "Orderly"}, clusterinventoryv1alpha1.ClusterConditionControlPlaneHealthy, false},
		{"the fleet manager's", map[string]string{fleetv1alpha1.HealthSourceAnnotation: "FleetManager"}, ConditionReachable, false},
		{"a value Orderly does not know is never taken as its own", map[string]string{fleetv1alpha1.HealthSourceAnnotation: "fleetmanager"}, ConditionReachable, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, note := probeCondition(profile(tc.ann))
			if got != tc.want {
				t.Errorf("condition = %s, want %s", got, tc.want)
			}
			if tc.wantNote != (note != "") || (tc.wantNote && !strings.Contains(note, `"fleetmanager"`)) {
				t.Errorf("note = %q", note)
			}
		})
	}
}
