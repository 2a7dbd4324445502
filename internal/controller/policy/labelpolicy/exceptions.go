package labelpolicy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

// CEL has no clock in admission: a generated policy cannot tell an expired exception
// from an active one by itself. So the controller compiles only the exceptions that
// are active now (withActiveExceptions) and reconciles again at the next expiry
// (nextExpiry), when the regenerated ValidatingAdmissionPolicy stops admitting the
// expired one's workloads.

// exceptionActive says whether e admits workloads at now: until, not at, its expiry.
func exceptionActive(e *policyv1alpha1.LabelPolicyException, now time.Time) bool {
	return now.Before(e.Expires.Time)
}

// withActiveExceptions returns p, or a copy of p whose spec.exceptions holds only the
// exceptions active at now, for Compile and the audit.
func withActiveExceptions(p *policyv1alpha1.LabelPolicy, now time.Time) *policyv1alpha1.LabelPolicy {
	active := slices.DeleteFunc(slices.Clone(p.Spec.Exceptions), func(e policyv1alpha1.LabelPolicyException) bool {
		return !exceptionActive(&e, now)
	})
	if len(active) == len(p.Spec.Exceptions) {
		return p
	}
	out := p.DeepCopy()
	out.Spec.Exceptions = active
	return out
}

// nextExpiry is the earliest expiry after now of p's exceptions; false when none is
// active.
func nextExpiry(p *policyv1alpha1.LabelPolicy, now time.Time) (time.Time, bool) {
	var next time.Time
	for i := range p.Spec.Exceptions {
		e := &p.Spec.Exceptions[i]
		if exceptionActive(e, now) && (next.IsZero() || e.Expires.Time.Before(next)) {
			next = e.Expires.Time
		}
	}
	return next, !next.IsZero()
}

// activeKey names the exceptions active at now, so that the audit runs again when the
// set changes (an expired exception's workloads are violations from then on).
func activeKey(p *policyv1alpha1.LabelPolicy, now time.Time) string {
	var names []string
	for i := range p.Spec.Exceptions {
		if exceptionActive(&p.Spec.Exceptions[i], now) {
			names = append(names, p.Spec.Exceptions[i].Name)
		}
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// statusActiveKey is activeKey as the status last reported it.
func statusActiveKey(st *policyv1alpha1.LabelPolicyStatus) string {
	var names []string
	for _, e := range st.Exceptions {
		if e.State == policyv1alpha1.ExceptionActive {
			names = append(names, e.Name)
		}
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// validateExceptions checks what the CRD cannot: that each selector is a valid label
// selector.
func validateExceptions(p *policyv1alpha1.LabelPolicy) error {
	for i := range p.Spec.Exceptions {
		e := &p.Spec.Exceptions[i]
		if e.Selector == nil {
			continue
		}
		if _, err := metav1.LabelSelectorAsSelector(e.Selector); err != nil {
			return fmt.Errorf("spec.exceptions[%s].selector: %w", e.Name, err)
		}
	}
	return nil
}

// exceptedBy returns the name of the first of p's exceptions that covers workload w,
// "" when none does. It is the Go twin of exceptedExpr, for the audit; the caller
// passes p with its active exceptions only (withActiveExceptions).
func exceptedBy(p *policyv1alpha1.LabelPolicy, w workload) string {
	for i := range p.Spec.Exceptions {
		e := &p.Spec.Exceptions[i]
		if len(e.Namespaces) > 0 && !slices.Contains(e.Namespaces, w.namespace) {
			continue
		}
		if e.Selector != nil {
			sel, err := metav1.LabelSelectorAsSelector(e.Selector)
			if err != nil || !sel.Matches(k8slabels.Set(w.labels)) {
				continue
			}
		}
		return e.Name
	}
	return ""
}

// exceptedExpr is a CEL expression, true when the request's object is covered by one
// of p's exceptions; "" when p has none.
func exceptedExpr(p *policyv1alpha1.LabelPolicy) string {
	var alts []string
	for i := range p.Spec.Exceptions {
		e := &p.Spec.Exceptions[i]
		var terms []string
		if len(e.Namespaces) > 0 {
			terms = append(terms, fmt.Sprintf("request.namespace in %s", celList(e.Namespaces)))
		}
		if e.Selector != nil {
			terms = append(terms, selectorExpr(e.Selector))
		}
		if len(terms) == 0 {
			continue // the CRD refuses such an exception
		}
		alts = append(alts, "("+strings.Join(terms, " && ")+")")
	}
	return strings.Join(alts, " || ")
}

// selectorExpr is a CEL expression, true when object's labels match sel, with the
// semantics of a Kubernetes label selector. An operator it does not know matches
// nothing (validateExceptions reports it).
func selectorExpr(sel *metav1.LabelSelector) string {
	has := func(k string) string {
		return fmt.Sprintf("(has(object.metadata.labels) && %s in object.metadata.labels)", celString(k))
	}
	val := func(k string) string { return fmt.Sprintf("object.metadata.labels[%s]", celString(k)) }
	var terms []string
	keys := make([]string, 0, len(sel.MatchLabels))
	for k := range sel.MatchLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys) // a stable expression: a changed one is an API write
	for _, k := range keys {
		terms = append(terms, fmt.Sprintf("(%s && %s == %s)", has(k), val(k), celString(sel.MatchLabels[k])))
	}
	for _, r := range sel.MatchExpressions {
		switch r.Operator {
		case metav1.LabelSelectorOpIn:
			terms = append(terms, fmt.Sprintf("(%s && %s in %s)", has(r.Key), val(r.Key), celList(r.Values)))
		case metav1.LabelSelectorOpNotIn:
			terms = append(terms, fmt.Sprintf("(!%s || !(%s in %s))", has(r.Key), val(r.Key), celList(r.Values)))
		case metav1.LabelSelectorOpExists:
			terms = append(terms, has(r.Key))
		case metav1.LabelSelectorOpDoesNotExist:
			terms = append(terms, "!"+has(r.Key))
		default:
			terms = append(terms, "false")
		}
	}
	if len(terms) == 0 {
		return "true" // the empty selector matches everything, as in Kubernetes
	}
	return strings.Join(terms, " && ")
}

// celList quotes ss as a CEL list of strings.
func celList(ss []string) string {
	q := make([]string, 0, len(ss))
	for _, s := range ss {
		q = append(q, celString(s))
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// exceptionStatuses reports each exception's state at now, with the number of
// workloads it excepted at the last audit (counts, nil when no audit ran now: the
// previous counts of the still active ones are kept from prev).
func exceptionStatuses(p *policyv1alpha1.LabelPolicy, now time.Time, counts map[string]int32, prev []policyv1alpha1.ExceptionStatus) []policyv1alpha1.ExceptionStatus {
	if len(p.Spec.Exceptions) == 0 {
		return nil
	}
	out := make([]policyv1alpha1.ExceptionStatus, 0, len(p.Spec.Exceptions))
	for i := range p.Spec.Exceptions {
		e := &p.Spec.Exceptions[i]
		s := policyv1alpha1.ExceptionStatus{Name: e.Name, State: policyv1alpha1.ExceptionExpired, Expires: e.Expires}
		if exceptionActive(e, now) {
			s.State = policyv1alpha1.ExceptionActive
			if counts != nil {
				s.Workloads = counts[e.Name]
			} else if j := slices.IndexFunc(prev, func(ps policyv1alpha1.ExceptionStatus) bool { return ps.Name == e.Name }); j >= 0 {
				s.Workloads = prev[j].Workloads
			}
		}
		out = append(out, s)
	}
	return out
}

// newlyExpired names the exceptions the status reported Active that are expired now.
func newlyExpired(prev []policyv1alpha1.ExceptionStatus, now []policyv1alpha1.ExceptionStatus) []string {
	var out []string
	for _, s := range now {
		if s.State != policyv1alpha1.ExceptionExpired {
			continue
		}
		if slices.ContainsFunc(prev, func(ps policyv1alpha1.ExceptionStatus) bool {
			return ps.Name == s.Name && ps.State == policyv1alpha1.ExceptionActive
		}) {
			out = append(out, s.Name)
		}
	}
	return out
}
