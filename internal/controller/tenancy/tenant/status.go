package tenant

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// Condition reasons.
const (
	ReasonReady             = "Ready"
	ReasonNamespaceConflict = "NamespaceConflict"
	ReasonNoConflict        = "NoConflict"
	ReasonNamespacePending  = "NamespacePending"
	ReasonApplyFailed       = "ApplyFailed"
	ReasonResourcesApplied  = "ResourcesApplied"
	ReasonRoleNotAllowed    = "RoleNotAllowed"
	ReasonRolesAllowed      = "RolesAllowed"
)

// namespaceMessageLimit is the longest message of one namespace in status (the API's
// MaxLength).
const namespaceMessageLimit = 1024

// computeStatus derives the Tenant's status from what this reconcile observed: the
// result of each namespace, and the additionalRoleBindings refused. Pure: conditions
// keep their transition times when their status does not change.
func computeStatus(t *tenancyv1alpha1.Tenant, results []namespaceResult, refused []refusal) tenancyv1alpha1.TenantStatus {
	st := *t.Status.DeepCopy()
	st.ObservedGeneration = t.Generation
	st.NamespaceCount = int32(len(results))
	st.ReadyNamespaces = 0
	st.SelfServiceNamespaces = 0
	st.Namespaces = make([]tenancyv1alpha1.TenantNamespaceStatus, 0, len(results))

	var conflicts, pending, failedNames []string
	var firstConflict, firstFailure string
	for _, res := range results {
		st.Namespaces = append(st.Namespaces, tenancyv1alpha1.TenantNamespaceStatus{Name: res.name, State: res.state, SelfService: res.selfService, Message: kit.Truncate(res.message, namespaceMessageLimit)})
		if res.selfService {
			st.SelfServiceNamespaces++
		}
		switch res.state {
		case tenancyv1alpha1.NamespaceReady:
			st.ReadyNamespaces++
		case tenancyv1alpha1.NamespaceConflict:
			conflicts = append(conflicts, res.name)
			if firstConflict == "" {
				firstConflict = res.message
			}
		case tenancyv1alpha1.NamespacePending:
			pending = append(pending, res.name)
		case tenancyv1alpha1.NamespaceFailed:
			failedNames = append(failedNames, res.name)
			if firstFailure == "" {
				firstFailure = res.message
			}
		}
	}

	conds := kit.ConditionsOf(&st.Conditions, t.Generation)
	if len(conflicts) > 0 {
		conds.True(tenancyv1alpha1.ConditionNamespaceConflict, ReasonNamespaceConflict,
			fmt.Sprintf("%d namespace(s) left alone because they belong to someone else: %s. %s", len(conflicts), strings.Join(conflicts, ", "), firstConflict))
	} else {
		conds.False(tenancyv1alpha1.ConditionNamespaceConflict, ReasonNoConflict, "No listed namespace belongs to someone else")
	}
	if len(failedNames) > 0 {
		conds.False(tenancyv1alpha1.ConditionResourcesReady, ReasonApplyFailed,
			fmt.Sprintf("Could not converge %s: %s", strings.Join(failedNames, ", "), firstFailure))
	} else {
		conds.True(tenancyv1alpha1.ConditionResourcesReady, ReasonResourcesApplied,
			"RoleBindings, quota, limits and NetworkPolicy are as declared in every managed namespace")
	}
	if len(refused) > 0 {
		conds.False(tenancyv1alpha1.ConditionRoleBindingsAllowed, ReasonRoleNotAllowed, refusedMessage(refused))
	} else {
		conds.True(tenancyv1alpha1.ConditionRoleBindingsAllowed, ReasonRolesAllowed, "Every additional role binding is to a ClusterRole Tenants may bind")
	}
	switch {
	case len(conflicts) > 0:
		conds.False(tenancyv1alpha1.ConditionReady, ReasonNamespaceConflict,
			fmt.Sprintf("%d of %d namespaces ready; in conflict: %s", st.ReadyNamespaces, st.NamespaceCount, strings.Join(conflicts, ", ")))
	case len(refused) > 0:
		conds.False(tenancyv1alpha1.ConditionReady, ReasonRoleNotAllowed, refusedMessage(refused))
	case len(failedNames) > 0:
		conds.False(tenancyv1alpha1.ConditionReady, ReasonApplyFailed,
			fmt.Sprintf("%d of %d namespaces ready; failing: %s", st.ReadyNamespaces, st.NamespaceCount, strings.Join(failedNames, ", ")))
	case len(pending) > 0:
		conds.False(tenancyv1alpha1.ConditionReady, ReasonNamespacePending,
			fmt.Sprintf("%d of %d namespaces ready; waiting for: %s", st.ReadyNamespaces, st.NamespaceCount, strings.Join(pending, ", ")))
	default:
		conds.True(tenancyv1alpha1.ConditionReady, ReasonReady,
			fmt.Sprintf("All %d namespaces are ready", st.NamespaceCount))
	}
	return st
}

// updateStatus writes the status computed from results and refused, emits a warning
// Event when a namespace newly falls into conflict or a role binding is newly refused,
// and updates the metrics.
func (r *Reconciler) updateStatus(ctx context.Context, t *tenancyv1alpha1.Tenant, results []namespaceResult, refused []refusal, ss selfServiceOutcome, protection, allowed protectionOutcome, quotas quotaState, extra resourceOutcome) error {
	prevState := map[string]tenancyv1alpha1.NamespaceState{}
	for _, ns := range t.Status.Namespaces {
		prevState[ns.Name] = ns.State
	}
	for _, res := range results {
		if res.state == tenancyv1alpha1.NamespaceConflict && prevState[res.name] != tenancyv1alpha1.NamespaceConflict {
			r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, ReasonNamespaceConflict, "Claim", "%s", res.message)
		}
	}
	if len(refused) > 0 && !meta.IsStatusConditionFalse(t.Status.Conditions, tenancyv1alpha1.ConditionRoleBindingsAllowed) {
		r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, ReasonRoleNotAllowed, "Bind", "%s", refusedMessage(refused))
	}
	if ss.reason != "" && !meta.IsStatusConditionFalse(t.Status.Conditions, tenancyv1alpha1.ConditionSelfServiceReady) {
		r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, ss.reason, "SelfService", "%s", ss.message)
	}
	if protection.reason != "" && !meta.IsStatusConditionFalse(t.Status.Conditions, tenancyv1alpha1.ConditionDeletionProtected) {
		r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, protection.reason, "Protect", "%s", protection.message)
	}
	if allowed.reason != "" && !meta.IsStatusConditionFalse(t.Status.Conditions, tenancyv1alpha1.ConditionAllowedEnforced) {
		r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, allowed.reason, "Restrict", "%s", allowed.message)
	}
	if t.Spec.TotalQuota != nil {
		if _, reached, summary := totalUsage(t, quotas); len(reached) > 0 && !meta.IsStatusConditionFalse(t.Status.Conditions, tenancyv1alpha1.ConditionTotalQuotaAvailable) {
			r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, ReasonTotalQuotaReached, "Limit", "The tenant has reached spec.totalQuota for %s (%s): further pods are refused in every namespace of the tenant", strings.Join(reached, ", "), strings.Join(summary, ", "))
		}
	}
	if extra.reason != "" && !meta.IsStatusConditionFalse(t.Status.Conditions, tenancyv1alpha1.ConditionExtraResourcesApplied) {
		r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, extra.reason, "Apply", "%s", kit.Truncate(extra.message, 1024))
	}
	err := kit.PatchStatus(ctx, r.Client, r.APIReader, t, func(latest *tenancyv1alpha1.Tenant) {
		latest.Status = computeStatus(latest, results, refused)
		setSelfServiceStatus(latest, &latest.Status, ss)
		setProtectionStatus(latest, &latest.Status, protection)
		setAllowedStatus(latest, &latest.Status, allowed)
		setQuotaStatus(latest, &latest.Status, quotas)
		setResourcesStatus(latest, &latest.Status, extra)
	})
	recordMetrics(t, len(refused), extra)
	return err
}
