package labelpolicy

import (
	"errors"
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
