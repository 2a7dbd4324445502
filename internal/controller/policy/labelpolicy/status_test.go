package labelpolicy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

func TestComputeStatus(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name          string
		p             *policyv1alpha1.LabelPolicy
		obs           observation
		wantMode      string
		wantReady     metav1.ConditionStatus
		wantReason    string
		wantDefault   metav1.ConditionStatus
		wantDefReason string
		wantCompliant string
	}{
		{"native default", testPolicy(policyv1alpha1.ActionDefault), observation{mode: policyv1alpha1.AdmissionModeNative, audit: &auditResult{}, auditTime: now},
			policyv1alpha1.AdmissionModeNative, metav1.ConditionTrue, ReasonReady, metav1.ConditionTrue, ReasonMutatingPolicyServed, ReasonNoViolations},
		{"default without any mutation is reported honestly", testPolicy(policyv1alpha1.ActionDefault), observation{mode: policyv1alpha1.AdmissionModeValidationOnly, audit: &auditResult{}, auditTime: now},
			policyv1alpha1.AdmissionModeValidationOnly, metav1.ConditionTrue, ReasonReady, metav1.ConditionFalse, ReasonMutationUnavailable, ReasonNoViolations},
		{"default by webhook", testPolicy(policyv1alpha1.ActionDefault), observation{mode: policyv1alpha1.AdmissionModeWebhook, audit: &auditResult{}, auditTime: now},
			policyv1alpha1.AdmissionModeWebhook, metav1.ConditionTrue, ReasonReady, metav1.ConditionTrue, ReasonWebhook, ReasonNoViolations},
		{"deny needs no mutation, so is native in any mode", testPolicy(policyv1alpha1.ActionDeny), observation{mode: policyv1alpha1.AdmissionModeValidationOnly, audit: &auditResult{}, auditTime: now},
			policyv1alpha1.AdmissionModeNative, metav1.ConditionTrue, ReasonReady, metav1.ConditionTrue, ReasonNotNeeded, ReasonNoViolations},
		{"violations", testPolicy(policyv1alpha1.ActionAudit), observation{mode: policyv1alpha1.AdmissionModeNative, audit: &auditResult{violations: 3}, auditTime: now},
			policyv1alpha1.AdmissionModeNative, metav1.ConditionTrue, ReasonReady, metav1.ConditionTrue, ReasonNotNeeded, ReasonViolationsFound},
		{"apply failed", testPolicy(policyv1alpha1.ActionDeny), observation{mode: policyv1alpha1.AdmissionModeNative, admissionErr: errors.New("forbidden")},
			policyv1alpha1.AdmissionModeNative, metav1.ConditionFalse, ReasonApplyFailed, metav1.ConditionTrue, ReasonNotNeeded, ReasonAuditPending},
		{"audit failed", testPolicy(policyv1alpha1.ActionDeny), observation{mode: policyv1alpha1.AdmissionModeNative, auditErr: errors.New("forbidden")},
			policyv1alpha1.AdmissionModeNative, metav1.ConditionFalse, ReasonAuditFailed, metav1.ConditionTrue, ReasonNotNeeded, ReasonAuditFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.Generation = 4
			st := computeStatus(tc.p, tc.obs)
			if st.ObservedGeneration != 4 || st.AdmissionMode != tc.wantMode {
				t.Errorf("observedGeneration %d, mode %q", st.ObservedGeneration, st.AdmissionMode)
			}
			check := func(typ string, status metav1.ConditionStatus, reason string) {
				c := meta.FindStatusCondition(st.Conditions, typ)
				if c == nil || c.Status != status || c.Reason != reason {
					t.Errorf("%s = %+v, want %s/%s", typ, c, status, reason)
				}
			}
			check(policyv1alpha1.ConditionReady, tc.wantReady, tc.wantReason)
			check(policyv1alpha1.ConditionDefaultingAvailable, tc.wantDefault, tc.wantDefReason)
			c := meta.FindStatusCondition(st.Conditions, policyv1alpha1.ConditionCompliant)
			if c == nil || c.Reason != tc.wantCompliant {
				t.Errorf("Compliant = %+v, want reason %s", c, tc.wantCompliant)
			}
			if tc.obs.audit != nil && (st.LastAuditTime == nil || !st.LastAuditTime.Time.Equal(now)) {
				t.Errorf("lastAuditTime = %v", st.LastAuditTime)
			}
		})
	}
}

func TestComputeStatusInvalidSpec(t *testing.T) {
	st := computeStatus(testPolicy(policyv1alpha1.ActionDeny), observation{invalidSpec: "allowedPattern is not valid"})
	c := meta.FindStatusCondition(st.Conditions, policyv1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonInvalidSpec {
		t.Errorf("Ready = %+v", c)
	}
}

// Status says which namespaces the policy never applies to, whatever its match says.
func TestComputeStatusReportsProtectedNamespaces(t *testing.T) {
	for managerNS, want := range map[string][]string{"orderly-system": {"kube-*", "orderly-system"}, "": {"kube-*"}, "kube-orderly": {"kube-*"}} {
		st := computeStatus(testPolicy(policyv1alpha1.ActionDeny), observation{mode: policyv1alpha1.AdmissionModeNative, managerNamespace: managerNS})
		if !slices.Equal(st.ProtectedNamespaces, want) {
			t.Errorf("manager in %q: protectedNamespaces = %v, want %v", managerNS, st.ProtectedNamespaces, want)
		}
		c := meta.FindStatusCondition(st.Conditions, policyv1alpha1.ConditionAdmissionReady)
		if c == nil || !strings.Contains(c.Message, "never apply in namespaces "+strings.Join(want, ", ")) {
			t.Errorf("manager in %q: AdmissionReady = %+v", managerNS, c)
		}
	}
}

// The newest labelled workloads come first, with their audit's time, and the list stays
// within its bound however many audits label how many workloads.
func TestRecentlyRemediated(t *testing.T) {
	w := func(name string) policyv1alpha1.RemediatedWorkload {
		return policyv1alpha1.RemediatedWorkload{Kind: "Deployment", Namespace: "shop", Name: name, Value: "cc-1"}
	}
	t1 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t2 := metav1.NewTime(t1.Add(time.Hour))
	first := recentlyRemediated([]policyv1alpha1.RemediatedWorkload{w("a"), w("b")}, t1, nil)
	if len(first) != 2 || !first[0].Time.Equal(&t1) {
		t.Fatalf("first = %+v", first)
	}
	var many []policyv1alpha1.RemediatedWorkload
	for i := range 19 {
		many = append(many, w(fmt.Sprintf("n%d", i)))
	}
	second := recentlyRemediated(many, t2, first)
	if len(second) != maxRecentlyRemediated || second[0].Name != "n0" || !second[0].Time.Equal(&t2) || second[19].Name != "a" || !second[19].Time.Equal(&t1) {
		t.Errorf("second = %+v", second)
	}
	if got := recentlyRemediated(nil, t2, first); len(got) != 2 {
		t.Errorf("an audit that labelled nothing dropped the earlier names: %+v", got)
	}
}
