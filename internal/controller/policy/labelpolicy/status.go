package labelpolicy

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/kit"
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
	// ReasonRemediatedGitOpsManaged is the Warning Event of an audit that labelled
	// workloads a GitOps tool manages: the label is in the cluster, not in Git.
	ReasonRemediatedGitOpsManaged = "RemediatedGitOpsManaged"
	ReasonRemediationFailed       = "RemediationFailed"
	// ReasonValueSetNotFound: the LabelValueSet of allowedValuesFrom does not exist,
	// so every matched workload is refused.
	ReasonValueSetNotFound = "ValueSetNotFound"
	// ReasonTenantCostCenterDrift is the Event of an audit that found namespaces whose
	// cost-center label is missing or differs from their Tenant's costCenter.
	ReasonTenantCostCenterDrift = "TenantCostCenterDrift"
	// ReasonExceptionExpired is the Event of an exception that ended: its workloads
	// are enforced again.
	ReasonExceptionExpired = "ExceptionExpired"
)

// observation is what one reconcile saw.
type observation struct {
	// mode is how a policy that needs mutating is enforced (AdmissionMode*).
	mode string
	// managerNamespace is the manager's namespace, out of every policy's reach.
	managerNamespace string
	// now is when the reconcile started: which exceptions are active.
	now         time.Time
	invalidSpec string
	// valueSetMissing names the LabelValueSet of allowedValuesFrom when it does not
	// exist.
	valueSetMissing string
	// tenantDefaults is how many Tenants' cost centers were compiled in
	// (defaultFromTenant), out of tenantDefaultsTotal with a costCenter.
	tenantDefaults      int
	tenantDefaultsTotal int
	admissionErr        error
	// audit is nil when no audit ran in this reconcile.
	audit     *auditResult
	auditTime time.Time
	auditErr  error
}

// computeStatus derives the status from what this reconcile observed. Pure.
func computeStatus(p *policyv1alpha1.LabelPolicy, obs observation) policyv1alpha1.LabelPolicyStatus {
	st := *p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation
	st.ProtectedNamespaces = kit.ProtectedNamespaces(obs.managerNamespace)
	conds := kit.ConditionsOf(&st.Conditions, p.Generation).At(obs.now)
	if obs.invalidSpec != "" {
		conds.False(policyv1alpha1.ConditionAdmissionReady, ReasonInvalidSpec, obs.invalidSpec)
		conds.False(policyv1alpha1.ConditionReady, ReasonInvalidSpec, obs.invalidSpec)
		return st
	}

	// A policy that fills nothing in is enforced natively whatever the mode.
	st.AdmissionMode = policyv1alpha1.AdmissionModeNative
	if needsMutation(p) {
		st.AdmissionMode = obs.mode
	}
	switch {
	case !needsMutation(p):
		conds.True(policyv1alpha1.ConditionDefaultingAvailable, ReasonNotNeeded,
			fmt.Sprintf("Action %s fills nothing in", p.Spec.Action))
	case obs.mode == policyv1alpha1.AdmissionModeNative:
		conds.True(policyv1alpha1.ConditionDefaultingAvailable, ReasonMutatingPolicyServed,
			"Labels are filled in by a MutatingAdmissionPolicy"+tenantDefaultsNote(p, obs))
	case obs.mode == policyv1alpha1.AdmissionModeWebhook:
		msg := "Labels are filled in by Orderly's mutating webhook (MutatingWebhookConfiguration " + objectName(p) + "), because MutatingAdmissionPolicy is not in use; while the webhook is unreachable, missing labels are rejected by the validating policy"
		conds.True(policyv1alpha1.ConditionDefaultingAvailable, ReasonWebhook, msg)
	default:
		conds.False(policyv1alpha1.ConditionDefaultingAvailable, ReasonMutationUnavailable,
			"Neither a MutatingAdmissionPolicy (not served by the API server, or switched off) nor Orderly's webhook (not configured) can fill labels in: missing labels are rejected instead of filled in, and pod templates are not labelled")
	}
	if obs.admissionErr != nil {
		conds.False(policyv1alpha1.ConditionAdmissionReady, ReasonApplyFailed, obs.admissionErr.Error())
	} else {
		c := Compile(p, obs.mode, &admission.Endpoint{}, obs.managerNamespace)
		what := "The ValidatingAdmissionPolicy"
		switch {
		case c.MAP != nil:
			what += ", MutatingAdmissionPolicy"
		case c.Webhook != nil:
			what += ", MutatingWebhookConfiguration"
		}
		conds.True(policyv1alpha1.ConditionAdmissionReady, ReasonApplied, what+" and bindings "+objectName(p)+
			" are as compiled; they never apply in namespaces "+strings.Join(st.ProtectedNamespaces, ", ")+", whatever spec.match says")
	}

	var exceptedCounts map[string]int32
	if obs.audit != nil {
		exceptedCounts = obs.audit.exceptedByEx
	}
	st.Exceptions = exceptionStatuses(p, obs.now, exceptedCounts, p.Status.Exceptions)
	st.TenantDefaults = int32(obs.tenantDefaults)
	if !p.Spec.DefaultFromTenant {
		st.TenantDrift, st.TenantDriftNamespaces = nil, 0
	}
	if res := obs.audit; res != nil {
		t := metav1.NewTime(obs.auditTime.Truncate(time.Second))
		st.Excepted = res.excepted
		st.Workloads = res.workloads
		st.Namespaces, st.OtherNamespaces = summarize(res.namespaces, nil, summaryTopN)
		tenants, counted := byTenant(res.namespaces, res.tenants)
		st.Tenants, st.OtherTenants = summarize(tenants, counted, summaryTopN)
		st.LastAuditTime = &t
		st.Violations = res.violations
		st.Remediated, st.RemediatedGitOpsManaged = res.remediated, res.remediatedGitOps
		st.RecentlyRemediated = recentlyRemediated(res.labelled, t, st.RecentlyRemediated)
		st.TopViolations = res.top
		st.TenantDrift, st.TenantDriftNamespaces = res.drift, res.driftCount
		switch {
		case res.remediationErrors > 0:
			conds.False(policyv1alpha1.ConditionCompliant, ReasonRemediationFailed,
				fmt.Sprintf("%d violating workload(s); %d could not be labelled: %v", res.violations, res.remediationErrors, res.firstRemediationErr))
		case res.violations > 0:
			conds.False(policyv1alpha1.ConditionCompliant, ReasonViolationsFound,
				fmt.Sprintf("%d workload(s) lack an allowed %s label, e.g. %s", res.violations, p.Spec.Label, describe(res.top)))
		case res.remediated > 0:
			conds.True(policyv1alpha1.ConditionCompliant, ReasonRemediated,
				fmt.Sprintf("Labelled %d workload(s); none left without an allowed %s label", res.remediated, p.Spec.Label))
		default:
			conds.True(policyv1alpha1.ConditionCompliant, ReasonNoViolations,
				fmt.Sprintf("Every matched workload carries an allowed %s label", p.Spec.Label))
		}
	} else if obs.auditErr != nil {
		conds.Unknown(policyv1alpha1.ConditionCompliant, ReasonAuditFailed, obs.auditErr.Error())
	} else if meta.FindStatusCondition(st.Conditions, policyv1alpha1.ConditionCompliant) == nil {
		conds.Unknown(policyv1alpha1.ConditionCompliant, ReasonAuditPending, "No audit has run yet")
	}

	switch {
	case obs.admissionErr != nil:
		conds.False(policyv1alpha1.ConditionReady, ReasonApplyFailed, obs.admissionErr.Error())
	case obs.auditErr != nil:
		conds.False(policyv1alpha1.ConditionReady, ReasonAuditFailed, obs.auditErr.Error())
	case obs.valueSetMissing != "":
		conds.False(policyv1alpha1.ConditionReady, ReasonValueSetNotFound,
			fmt.Sprintf("LabelValueSet %s (spec.allowedValuesFrom) does not exist: every matched workload is refused until it does; create it or change allowedValuesFrom", obs.valueSetMissing))
	default:
		conds.True(policyv1alpha1.ConditionReady, ReasonReady,
			fmt.Sprintf("Enforced at admission (%s, %s); %d violating workload(s) at the last audit", st.AdmissionMode, p.Spec.Action, st.Violations))
	}
	return st
}

// recentlyRemediated puts the workloads an audit at t labelled before the ones
// earlier audits did, up to maxRecentlyRemediated: the newest are what an auditor
// asks about. Pure.
func recentlyRemediated(labelled []policyv1alpha1.RemediatedWorkload, t metav1.Time, prev []policyv1alpha1.RemediatedWorkload) []policyv1alpha1.RemediatedWorkload {
	if len(labelled) == 0 {
		return prev
	}
	out := make([]policyv1alpha1.RemediatedWorkload, 0, maxRecentlyRemediated)
	for _, w := range labelled {
		w.Time = t
		out = append(out, w)
	}
	for _, w := range prev {
		if len(out) == maxRecentlyRemediated {
			break
		}
		out = append(out, w)
	}
	return out[:min(len(out), maxRecentlyRemediated)]
}

// firstGitOps names the first labelled workload a GitOps tool manages, with the tool;
// "" when none of those listed is (more may be, beyond the list).
func firstGitOps(ws []policyv1alpha1.RemediatedWorkload) string {
	for _, w := range ws {
		if w.GitOps != "" {
			return fmt.Sprintf("%s %s/%s (%s)", w.Kind, w.Namespace, w.Name, w.GitOps)
		}
	}
	return ""
}

// workloadNames names remediated workloads for an Event: "Deployment shop/web".
func workloadNames(ws []policyv1alpha1.RemediatedWorkload) []string {
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		out = append(out, fmt.Sprintf("%s %s/%s", w.Kind, w.Namespace, w.Name))
	}
	return out
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

// updateStatus writes the status when it changed, emits Events when an audit changed
// the picture, and records the metrics.
func (r *Reconciler) updateStatus(ctx context.Context, p *policyv1alpha1.LabelPolicy, obs observation) error {
	if res := obs.audit; res != nil {
		if res.violations > 0 && res.violations != p.Status.Violations {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, ReasonViolationsFound, "Audit", "%d workload(s) lack an allowed %s label, e.g. %s", res.violations, p.Spec.Label, describe(res.top))
		}
		if res.remediated > 0 {
			// The names: an auditor reading Events sees which objects Orderly changed.
			// The count beyond the examples is of all the audit labelled.
			names := workloadNames(res.labelled)
			names = names[:min(len(names), 5)]
			examples := strings.Join(names, ", ")
			if more := int(res.remediated) - len(names); more > 0 {
				examples += fmt.Sprintf(" and %d more", more)
			}
			r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, ReasonRemediated, "Label", "Added label %s to the metadata of %d workload(s): %s; pod templates untouched (status.recentlyRemediated)", p.Spec.Label, res.remediated, examples)
		}
		if res.remediatedGitOps > 0 {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, ReasonRemediatedGitOpsManaged, "Label",
				"%d of the workload(s) labelled %s are managed by Argo CD or Flux, e.g. %s: the label is in the cluster and not in Git; add it to their manifests (status.recentlyRemediated[].gitOps)",
				res.remediatedGitOps, p.Spec.Label, firstGitOps(res.labelled))
		}
	}
	if res := obs.audit; res != nil && res.driftCount > 0 && res.driftCount != p.Status.TenantDriftNamespaces {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, ReasonTenantCostCenterDrift, "Audit",
			"%d namespace(s) have no or another cost-center label than their Tenant's costCenter, e.g. %s; their workloads get the Tenant's value (status.tenantDrift)", res.driftCount, describeDrift(res.drift))
	}
	if expired := newlyExpired(p.Status.Exceptions, exceptionStatuses(p, obs.now, nil, nil)); len(expired) > 0 {
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, ReasonExceptionExpired, "Enforce", "Exception(s) %s expired: their workloads must carry an allowed %s label again", kit.FirstN(expired, 3), p.Spec.Label)
	}
	if obs.admissionErr != nil {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, ReasonApplyFailed, "Apply", "%v", obs.admissionErr)
	}
	// p may be a cached copy older than the status the last audit wrote: computed from
	// the latest version again when the write loses the optimistic lock, an older
	// status never overwrites it.
	return kit.PatchStatus(ctx, r.Client, r.APIReader, p, func(o *policyv1alpha1.LabelPolicy) {
		o.Status = computeStatus(o, obs)
		recordAdmission(client.ObjectKeyFromObject(o), o.Status.Conditions)
	})
}

// tenantDefaultsNote says, for a Default policy with defaultFromTenant, how many
// Tenants' cost centers the mutating policy carries, and when some were left out.
func tenantDefaultsNote(p *policyv1alpha1.LabelPolicy, obs observation) string {
	if p.Spec.Action != policyv1alpha1.ActionDefault || !p.Spec.DefaultFromTenant {
		return ""
	}
	note := fmt.Sprintf(", from the costCenter of %d Tenant(s) first", obs.tenantDefaults)
	if obs.tenantDefaultsTotal > obs.tenantDefaults {
		note += fmt.Sprintf(" (%d of %d Tenants with a costCenter: the rest, last by name, fall back to their namespaces' label)", obs.tenantDefaults, obs.tenantDefaultsTotal)
	}
	return note
}
