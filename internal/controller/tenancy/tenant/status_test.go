package tenant

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

func TestComputeStatus(t *testing.T) {
	ready := namespaceResult{name: "a", state: tenancyv1alpha1.NamespaceReady}
	tests := []struct {
		name            string
		results         []namespaceResult
		wantReady       metav1.ConditionStatus
		wantReason      string
		wantConflict    metav1.ConditionStatus
		wantResources   metav1.ConditionStatus
		wantReadyCount  int32
		wantMsgContains string
	}{
		{"all ready", []namespaceResult{ready, {name: "b", state: tenancyv1alpha1.NamespaceReady}},
			metav1.ConditionTrue, ReasonReady, metav1.ConditionFalse, metav1.ConditionTrue, 2, "All 2"},
		{"conflict wins", []namespaceResult{ready, {name: "b", state: tenancyv1alpha1.NamespaceConflict, message: "belongs to tenant x"}},
			metav1.ConditionFalse, ReasonNamespaceConflict, metav1.ConditionTrue, metav1.ConditionTrue, 1, "in conflict: b"},
		{"failure", []namespaceResult{ready, {name: "b", state: tenancyv1alpha1.NamespaceFailed, message: "boom", err: errors.New("boom")}},
			metav1.ConditionFalse, ReasonApplyFailed, metav1.ConditionFalse, metav1.ConditionFalse, 1, "failing: b"},
		{"pending", []namespaceResult{{name: "a", state: tenancyv1alpha1.NamespacePending}},
			metav1.ConditionFalse, ReasonNamespacePending, metav1.ConditionFalse, metav1.ConditionTrue, 0, "waiting for: a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tn := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "t", Generation: 3}}
			st := computeStatus(tn, tt.results, nil)
			if st.ObservedGeneration != 3 {
				t.Errorf("observedGeneration = %d, want 3", st.ObservedGeneration)
			}
			if st.ReadyNamespaces != tt.wantReadyCount || st.NamespaceCount != int32(len(tt.results)) {
				t.Errorf("ready %d of %d, want %d of %d", st.ReadyNamespaces, st.NamespaceCount, tt.wantReadyCount, len(tt.results))
			}
			r := meta.FindStatusCondition(st.Conditions, tenancyv1alpha1.ConditionReady)
			if r.Status != tt.wantReady || r.Reason != tt.wantReason || !strings.Contains(r.Message, tt.wantMsgContains) {
				t.Errorf("Ready = %s/%s %q, want %s/%s containing %q", r.Status, r.Reason, r.Message, tt.wantReady, tt.wantReason, tt.wantMsgContains)
			}
			if c := meta.FindStatusCondition(st.Conditions, tenancyv1alpha1.ConditionNamespaceConflict); c.Status != tt.wantConflict {
				t.Errorf("NamespaceConflict = %s, want %s", c.Status, tt.wantConflict)
			}
			if c := meta.FindStatusCondition(st.Conditions, tenancyv1alpha1.ConditionResourcesReady); c.Status != tt.wantResources {
				t.Errorf("ResourcesReady = %s, want %s", c.Status, tt.wantResources)
			}
		})
	}
}

func TestComputeStatusKeepsTransitionTime(t *testing.T) {
	tn := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "t", Generation: 1}}
	results := []namespaceResult{{name: "a", state: tenancyv1alpha1.NamespaceReady}}
	first := computeStatus(tn, results, nil)
	tn.Status = first
	tn.Generation = 2
	second := computeStatus(tn, results, nil)
	a := meta.FindStatusCondition(first.Conditions, tenancyv1alpha1.ConditionReady)
	b := meta.FindStatusCondition(second.Conditions, tenancyv1alpha1.ConditionReady)
	if !a.LastTransitionTime.Equal(&b.LastTransitionTime) {
		t.Errorf("transition time moved without a transition: %v -> %v", a.LastTransitionTime, b.LastTransitionTime)
	}
}
