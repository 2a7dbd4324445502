package tenant

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

// Condition reasons.
const (
	ReasonReady             = "Ready"
	ReasonNamespaceConflict = "NamespaceConflict"
	ReasonNoConflict        = "NoConflict"
	ReasonNamespacePending  = "NamespacePending"
	ReasonApplyFailed       = "ApplyFailed"
	ReasonResourcesApplied  = "ResourcesApplied"
)

// computeStatus derives the Tenant's status from what this reconcile observed.
// Pure: conditions keep their transition times when their status does not change.
func computeStatus(t *tenancyv1alpha1.Tenant, results []namespaceResult) tenancyv1alpha1.TenantStatus {
	st := *t.Status.DeepCopy()
	st.ObservedGeneration = t.Generation
	st.NamespaceCount = int32(len(results))
	st.ReadyNamespaces = 0
	st.Namespaces = make([]tenancyv1alpha1.TenantNamespaceStatus, 0, len(results))

	var conflicts, pending, failedNames []string
	var firstConflict, firstFailure string
	for _, res := range results {
		st.Namespaces = append(st.Namespaces, tenancyv1alpha1.TenantNamespaceStatus{Name: res.name, State: res.state, Message: truncate(res.message, 1024)})
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

	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: truncate(msg, 32768), ObservedGeneration: t.Generation,
		})
	}
	if len(conflicts) > 0 {
		set(tenancyv1alpha1.ConditionNamespaceConflict, metav1.ConditionTrue, ReasonNamespaceConflict,
			fmt.Sprintf("%d namespace(s) left alone because they belong to someone else: %s. %s", len(conflicts), strings.Join(conflicts, ", "), firstConflict))
	} else {
		set(tenancyv1alpha1.ConditionNamespaceConflict, metav1.ConditionFalse, ReasonNoConflict, "No listed namespace belongs to someone else")
	}
	if len(failedNames) > 0 {
		set(tenancyv1alpha1.ConditionResourcesReady, metav1.ConditionFalse, ReasonApplyFailed,
			fmt.Sprintf("Could not converge %s: %s", strings.Join(failedNames, ", "), firstFailure))
	} else {
		set(tenancyv1alpha1.ConditionResourcesReady, metav1.ConditionTrue, ReasonResourcesApplied,
			"RoleBindings, quota, limits and NetworkPolicy are as declared in every managed namespace")
	}
	switch {
	case len(conflicts) > 0:
		set(tenancyv1alpha1.ConditionReady, metav1.ConditionFalse, ReasonNamespaceConflict,
			fmt.Sprintf("%d of %d namespaces ready; in conflict: %s", st.ReadyNamespaces, st.NamespaceCount, strings.Join(conflicts, ", ")))
	case len(failedNames) > 0:
		set(tenancyv1alpha1.ConditionReady, metav1.ConditionFalse, ReasonApplyFailed,
			fmt.Sprintf("%d of %d namespaces ready; failing: %s", st.ReadyNamespaces, st.NamespaceCount, strings.Join(failedNames, ", ")))
	case len(pending) > 0:
		set(tenancyv1alpha1.ConditionReady, metav1.ConditionFalse, ReasonNamespacePending,
			fmt.Sprintf("%d of %d namespaces ready; waiting for: %s", st.ReadyNamespaces, st.NamespaceCount, strings.Join(pending, ", ")))
	default:
		set(tenancyv1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady,
			fmt.Sprintf("All %d namespaces are ready", st.NamespaceCount))
	}
	return st
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// updateStatus writes the status when it changed, emits a warning Event when a
// namespace newly falls into conflict, and updates the metrics.
func (r *Reconciler) updateStatus(ctx context.Context, t *tenancyv1alpha1.Tenant, results []namespaceResult) error {
	prevState := map[string]tenancyv1alpha1.NamespaceState{}
	for _, ns := range t.Status.Namespaces {
		prevState[ns.Name] = ns.State
	}
	for _, res := range results {
		if res.state == tenancyv1alpha1.NamespaceConflict && prevState[res.name] != tenancyv1alpha1.NamespaceConflict {
			r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, ReasonNamespaceConflict, "Claim", "%s", res.message)
		}
	}
	st := computeStatus(t, results)
	recordMetrics(t.Name, st)
	if equality.Semantic.DeepEqual(st, t.Status) {
		return nil
	}
	patch := client.MergeFrom(t.DeepCopy())
	t.Status = st
	if err := r.Status().Patch(ctx, t, patch); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	return nil
}
