package labelpolicy

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

// The admission gauge follows the AdmissionReady condition: 1 only when it is True.
func TestRecordAdmission(t *testing.T) {
	key := client.ObjectKey{Name: "metrics-test"}
	defer series.Forget(key)
	value := func() float64 {
		var m dto.Metric
		if err := admissionReady.WithLabelValues(series.Values(key)...).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetGauge().GetValue()
	}
	for _, tc := range []struct {
		conds []metav1.Condition
		want  float64
	}{
		{[]metav1.Condition{{Type: policyv1alpha1.ConditionAdmissionReady, Status: metav1.ConditionTrue}}, 1},
		{[]metav1.Condition{{Type: policyv1alpha1.ConditionAdmissionReady, Status: metav1.ConditionFalse}}, 0},
		{nil, 0},
	} {
		recordAdmission(key, tc.conds)
		if got := value(); got != tc.want {
			t.Errorf("conditions %v: gauge %v, want %v", tc.conds, got, tc.want)
		}
	}
}
