package imagepolicy

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

type observation struct {
	now          time.Time
	invalid      string
	admissionErr error
	evalErr      error
	eval         *Evaluation
	// webhook says whether the manager serves Orderly's webhook.
	webhook bool
}

// computeStatus derives the status from what the reconcile observed.
func computeStatus(p *policyv1alpha1.ImagePolicy, obs observation) policyv1alpha1.ImagePolicyStatus {
	st := *p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation
	conds := kit.ConditionsOf(&st.Conditions, p.Generation).At(obs.now)
	switch {
	case obs.invalid != "":
		conds.False(policyv1alpha1.ImagePolicyConditionReady, "InvalidSpec", obs.invalid)
	case obs.admissionErr != nil:
		conds.False(policyv1alpha1.ImagePolicyConditionReady, "AdmissionFailed", "Writing the admission objects failed: "+obs.admissionErr.Error())
	case NeedsScans(p) && !obs.webhook:
		conds.False(policyv1alpha1.ImagePolicyConditionReady, "WebhookUnavailable",
			"The manager serves no webhook, so maxSeverity and unscanned are not enforced at admission (only reported here); allowedRegistries and requireDigest are enforced natively")
	default:
		conds.True(policyv1alpha1.ImagePolicyConditionReady, "Enforced", readyMessage(p))
	}
	if obs.evalErr != nil {
		conds.Unknown(policyv1alpha1.ImagePolicyConditionCompliant, "EvaluationFailed", obs.evalErr.Error())
	}
	if ev := obs.eval; ev != nil {
		st.Coverage = ev.Coverage
		st.Violations = policyv1alpha1.ImageViolations{Count: int32(len(ev.Violations)), Items: ev.Violations[:min(len(ev.Violations), 20)]}
		st.LastEvaluated = &metav1.Time{Time: obs.now}
		if len(ev.Violations) == 0 {
			conds.True(policyv1alpha1.ImagePolicyConditionCompliant, "NoViolations",
				fmt.Sprintf("%d running images, %d scanned, %d failed, %d pending", ev.Coverage.Running, ev.Coverage.Scanned, ev.Coverage.Failed, ev.Coverage.Pending))
		} else {
			v := ev.Violations[0]
			conds.False(policyv1alpha1.ImagePolicyConditionCompliant, "Violations",
				fmt.Sprintf("%d running workloads' images break the policy, e.g. %s %s/%s: %s", len(ev.Violations), v.Kind, v.Namespace, v.Name, v.Message))
		}
	}
	return st
}

func readyMessage(p *policyv1alpha1.ImagePolicy) string {
	var parts []string
	if NeedsNative(p) {
		parts = append(parts, "ValidatingAdmissionPolicy "+ObjectName(p)+" checks allowedRegistries and requireDigest")
	}
	if NeedsScans(p) {
		parts = append(parts, "Orderly's webhook "+ObjectName(p)+" decides from scan results")
	}
	return fmt.Sprintf("Action %s: %s", actionOf(p), joinAnd(parts))
}

func actionOf(p *policyv1alpha1.ImagePolicy) policyv1alpha1.ImageAction {
	if p.Spec.Action == "" {
		return policyv1alpha1.ImageActionDeny
	}
	return p.Spec.Action
}

func joinAnd(parts []string) string {
	switch len(parts) {
	case 0:
		return "nothing to enforce"
	case 1:
		return parts[0]
	}
	return parts[0] + "; " + parts[1]
}

// reevaluatedAfter is how old status.lastEvaluated may grow before a new date alone is
// written: an evaluation every 30 s that finds the same would otherwise write each time.
const reevaluatedAfter = 10 * time.Minute

// updateStatus writes the status computed from obs, unless it differs from the
// policy's only by a lastEvaluated less than reevaluatedAfter newer.
func (r *Reconciler) updateStatus(ctx context.Context, p *policyv1alpha1.ImagePolicy, obs observation) error {
	return kit.PatchStatus(ctx, r.Client, r.APIReader, p, func(latest *policyv1alpha1.ImagePolicy) {
		if st := computeStatus(latest, obs); !onlyReevaluated(latest.Status, st, obs.now) {
			latest.Status = st
		}
	})
}

// onlyReevaluated says whether next differs from prev by lastEvaluated alone, and
// prev's is less than reevaluatedAfter old: the evaluation date alone is no reason
// to write.
func onlyReevaluated(prev, next policyv1alpha1.ImagePolicyStatus, now time.Time) bool {
	if prev.LastEvaluated == nil || now.Sub(prev.LastEvaluated.Time) >= reevaluatedAfter {
		return false
	}
	same := next.DeepCopy()
	same.LastEvaluated = prev.LastEvaluated
	return equality.Semantic.DeepEqual(*same, prev)
}
