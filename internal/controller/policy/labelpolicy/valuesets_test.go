package labelpolicy

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

func TestComputeValueSetStatus(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }
	for _, tc := range []struct {
		name                    string
		values                  []policyv1alpha1.LabelValue
		wantActive, wantRetired int32
		wantReady               metav1.ConditionStatus
		wantReason              string
		wantNextExpiry          *metav1.Time
	}{
		{"active, retired, expired and expiring", []policyv1alpha1.LabelValue{
			{Value: "a"}, {Value: "b", Active: ptr.To(false)}, {Value: "c", Expires: at(-time.Hour)}, {Value: "d", Expires: at(2 * time.Hour)}, {Value: "e", Expires: at(time.Hour)},
		}, 3, 2, metav1.ConditionTrue, ReasonValuesAllowed, at(time.Hour)},
		{"every value retired or expired", []policyv1alpha1.LabelValue{
			{Value: "b", Active: ptr.To(false)}, {Value: "c", Expires: at(0)},
		}, 0, 2, metav1.ConditionFalse, ReasonNoActiveValue, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &policyv1alpha1.LabelValueSet{ObjectMeta: metav1.ObjectMeta{Name: "set", Generation: 4}, Spec: policyv1alpha1.LabelValueSetSpec{Values: tc.values}}
			computeValueSetStatus(s, now)
			if s.Status.Active != tc.wantActive || s.Status.Retired != tc.wantRetired {
				t.Errorf("active %d, retired %d; want %d, %d", s.Status.Active, s.Status.Retired, tc.wantActive, tc.wantRetired)
			}
			c := findReady(s.Status.Conditions)
			if c == nil || c.Status != tc.wantReady || c.Reason != tc.wantReason || c.ObservedGeneration != 4 {
				t.Errorf("Ready = %+v, want %s/%s at generation 4", c, tc.wantReady, tc.wantReason)
			}
			if (s.Status.NextExpiry == nil) != (tc.wantNextExpiry == nil) || (s.Status.NextExpiry != nil && !s.Status.NextExpiry.Equal(tc.wantNextExpiry)) {
				t.Errorf("nextExpiry %v, want %v", s.Status.NextExpiry, tc.wantNextExpiry)
			}
			if s.Status.ObservedGeneration != 4 {
				t.Errorf("observedGeneration %d", s.Status.ObservedGeneration)
			}
		})
	}
}
