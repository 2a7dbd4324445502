package labelpolicy

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
)

// Condition reasons.
const (
	ReasonReady                = "Ready"
	ReasonInvalidSpec          = "InvalidSpec"
	ReasonApplied              = "Applied"
	ReasonApplyFailed          = "ApplyFailed"
	ReasonMutatingPolicyServed = "MutatingAdmissionPolicyServed"
	ReasonWebhook              = "Webhook"
	ReasonMutationUnavailable  = "MutationUnavailable"
	ReasonNotNeeded            = "NotNeeded"
	ReasonNoViolations         = "NoViolations"
	ReasonViolationsFound      = "ViolationsFound"
	ReasonAuditPending         = "AuditPending"
	ReasonAuditFailed          = "AuditFailed"
	ReasonRemediated           = "Remediated"
	ReasonRemediationFailed    = "RemediationFailed"
)

// observation is what one reconcile saw.
type observation struct {
	// mode is how a policy that needs mutating is enforced (AdmissionMode*).
	mode         string
	invalidSpec  string
	admissionErr error
	// audit is nil when no audit ran in this reconcile.
	audit     *auditResult
	auditTime time.Time
	auditErr  error
}

// computeStatus derives the status from what this reconcile observed. Pure.
func computeStatus(p *policyv1alpha1.LabelPolicy, obs observation) policyv1alpha1.LabelPolicyStatus {
	st := *p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: truncate(msg, 32768), ObservedGeneration: p.Generation,
		})
	}
	if obs.invalidSpec != "" {
		set(policyv1alpha1.ConditionAdmissionReady, metav1.ConditionFalse, ReasonInvalidSpec, obs.invalidSpec)
		set(policyv1alpha1.ConditionReady, metav1.ConditionFalse, ReasonInvalidSpec, obs.invalidSpec)
		return st
	}

	// A policy that fills nothing in is enforced natively whatever the mode.
	st.AdmissionMode = policyv1alpha1.AdmissionModeNative
	if needsMutation(p) {
		st.AdmissionMode = obs.mode
	}
	switch {
	case !needsMutation(p):
		set(policyv1alpha1.ConditionDefaultingAvailable, metav1.ConditionTrue, ReasonNotNeeded,
			fmt.Sprintf("Action %s fills nothing in", p.Spec.Action))
	case obs.mode == policyv1alpha1.AdmissionModeNative:
		set(policyv1alpha1.ConditionDefaultingAvailable, metav1.ConditionTrue, ReasonMutatingPolicyServed,
			"Labels are filled in by a MutatingAdmissionPolicy")
	case obs.mode == policyv1alpha1.AdmissionModeWebhook:
		set(policyv1alpha1.ConditionDefaultingAvailable, metav1.ConditionTrue, ReasonWebhook,
			"Labels are filled in by Orderly's mutating webhook (MutatingWebhookConfiguration "+objectName(p)+"), because MutatingAdmissionPolicy is not in use; while the webhook is unreachable, missing labels are rejected by the validating policy")
	default:
		set(policyv1alpha1.ConditionDefaultingAvailable, metav1.ConditionFalse, ReasonMutationUnavailable,
			"Neither a MutatingAdmissionPolicy (not served by the API server, or switched off) nor Orderly's webhook (not configured) can fill labels in: missing labels are rejected instead of filled in, and pod templates are not labelled")
	}
	if obs.admissionErr != nil {
		set(policyv1alpha1.ConditionAdmissionReady, metav1.ConditionFalse, ReasonApplyFailed, obs.admissionErr.Error())
	} else {
		c := Compile(p, obs.mode, &admission.Endpoint{})
		what := "The ValidatingAdmissionPolicy"
		switch {
		case c.MAP != nil:
			what += ", MutatingAdmissionPolicy"
		case c.Webhook != nil:
			what += ", MutatingWebhookConfiguration"
		}
		set(policyv1alpha1.ConditionAdmissionReady, metav1.ConditionTrue, ReasonApplied, what+" and bindings "+objectName(p)+" are as compiled")
	}

	if res := obs.audit; res != nil {
		t := metav1.NewTime(obs.auditTime.Truncate(time.Second))
		st.LastAuditTime = &t
		st.Violations = res.violations
		st.Remediated = res.remediated
		st.TopViolations = res.top
		switch {
		case res.remediationErrors > 0:
			set(policyv1alpha1.ConditionCompliant, metav1.ConditionFalse, ReasonRemediationFailed,
				fmt.Sprintf("%d violating workload(s); %d could not be labelled: %v", res.violations, res.remediationErrors, res.firstRemediationErr))
		case res.violations > 0:
			set(policyv1alpha1.ConditionCompliant, metav1.ConditionFalse, ReasonViolationsFound,
				fmt.Sprintf("%d workload(s) lack an allowed %s label, e.g. %s", res.violations, p.Spec.Label, describe(res.top)))
		case res.remediated > 0:
			set(policyv1alpha1.ConditionCompliant, metav1.ConditionTrue, ReasonRemediated,
				fmt.Sprintf("Labelled %d workload(s); none left without an allowed %s label", res.remediated, p.Spec.Label))
		default:
			set(policyv1alpha1.ConditionCompliant, metav1.ConditionTrue, ReasonNoViolations,
				fmt.Sprintf("Every matched workload carries an allowed %s label", p.Spec.Label))
		}
	} else if obs.auditErr != nil {
		set(policyv1alpha1.ConditionCompliant, metav1.ConditionUnknown, ReasonAuditFailed, obs.auditErr.Error())
	} else if meta.FindStatusCondition(st.Conditions, policyv1alpha1.ConditionCompliant) == nil {
		set(policyv1alpha1.ConditionCompliant, metav1.ConditionUnknown, ReasonAuditPending, "No audit has run yet")
	}

	switch {
	case obs.admissionErr != nil:
		set(policyv1alpha1.ConditionReady, metav1.ConditionFalse, ReasonApplyFailed, obs.admissionErr.Error())
	case obs.auditErr != nil:
		set(policyv1alpha1.ConditionReady, metav1.ConditionFalse, ReasonAuditFailed, obs.auditErr.Error())
	default:
		set(policyv1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady,
			fmt.Sprintf("Enforced at admission (%s, %s); %d violating workload(s) at the last audit", st.AdmissionMode, p.Spec.Action, st.Violations))
	}
	return st
}

func describe(top []policyv1alpha1.Violation) string {
	var parts []string
	for i, v := range top {
		if i == 3 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %s/%s (%s)", v.Kind, v.Namespace, v.Name, v.Reason))
	}
	return strings.Join(parts, ", ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// updateStatus writes the status when it changed, emits Events when an audit changed
// the picture, and records the metrics.
func (r *Reconciler) updateStatus(ctx context.Context, p *policyv1alpha1.LabelPolicy, obs observation) error {
	st := computeStatus(p, obs)
	if res := obs.audit; res != nil {
		if res.violations > 0 && res.violations != p.Status.Violations {
			r.eventf(p, corev1.EventTypeWarning, ReasonViolationsFound, "Audit", "%d workload(s) lack an allowed %s label, e.g. %s", res.violations, p.Spec.Label, describe(res.top))
		}
		if res.remediated > 0 {
			r.eventf(p, corev1.EventTypeNormal, ReasonRemediated, "Label", "Added label %s to the metadata of %d workload(s); pod templates untouched", p.Spec.Label, res.remediated)
		}
	}
	if obs.admissionErr != nil {
		r.eventf(p, corev1.EventTypeWarning, ReasonApplyFailed, "Apply", "%v", obs.admissionErr)
	}
	if equality.Semantic.DeepEqual(st, p.Status) {
		return nil
	}
	// Optimistic locking: a status computed from an outdated copy must not win.
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	p.Status = st
	if err := r.Status().Patch(ctx, p, patch); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	return nil
}
