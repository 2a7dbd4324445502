package labelpolicy

import (
	"fmt"
	"regexp"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

// A LabelPolicy's allowedValuesFrom is the parameter of its ValidatingAdmissionPolicy:
// the API server reads the LabelValueSet itself, so an edit of the list (a value added,
// or retired with active: false) is enforced at once, with no edit of the policy and no
// reconcile. Only expiry needs the controller, because CEL in admission has no clock:
// the generated policy carries a cutoff, the latest expires already past, and treats
// every value that expires at or before it as retired; the controller compiles the
// policy again at the next expiry (nextValueExpiry) and whenever the set changes.

// valueSetParamKind is the paramKind of a policy with allowedValuesFrom.
var valueSetParamKind = &admissionv1.ParamKind{APIVersion: policyv1alpha1.GroupVersion.String(), Kind: "LabelValueSet"}

// valueActive says whether v is allowed at now: active, and not expired.
func valueActive(v *policyv1alpha1.LabelValue, now time.Time) bool {
	return (v.Active == nil || *v.Active) && (v.Expires == nil || now.Before(v.Expires.Time))
}

// valuesCutoff is the latest expiry of s's values at or before now; zero when none has
// passed. The generated policy treats every value that expires at or before it as
// retired.
func valuesCutoff(s *policyv1alpha1.LabelValueSet, now time.Time) time.Time {
	var cutoff time.Time
	if s == nil {
		return cutoff
	}
	for i := range s.Spec.Values {
		if e := s.Spec.Values[i].Expires; e != nil && !now.Before(e.Time) && e.After(cutoff) {
			cutoff = e.Time
		}
	}
	return cutoff
}

// nextValueExpiry is the earliest expiry after now of s's values; false when none.
func nextValueExpiry(s *policyv1alpha1.LabelValueSet, now time.Time) (time.Time, bool) {
	var next time.Time
	if s == nil {
		return next, false
	}
	for i := range s.Spec.Values {
		if e := s.Spec.Values[i].Expires; e != nil && now.Before(e.Time) && (next.IsZero() || e.Time.Before(next)) {
			next = e.Time
		}
	}
	return next, !next.IsZero()
}

// valueSet is a LabelValueSet as the audit reads it at one time.
type valueSet struct {
	name string
	// active are the values allowed now; listed are all the values, retired or not.
	active, listed map[string]bool
}

// newValueSet reads s at now. A policy whose LabelValueSet does not exist gets an
// empty set (s nil): nothing is allowed from it, as at admission.
func newValueSet(name string, s *policyv1alpha1.LabelValueSet, now time.Time) *valueSet {
	vs := &valueSet{name: name, active: map[string]bool{}, listed: map[string]bool{}}
	if s == nil {
		return vs
	}
	for i := range s.Spec.Values {
		v := &s.Spec.Values[i]
		vs.listed[v.Value] = true
		if valueActive(v, now) {
			vs.active[v.Value] = true
		}
	}
	return vs
}

// retired says whether value is in the set but not allowed any more.
func (vs *valueSet) retired(value string) bool {
	return vs != nil && value != "" && vs.listed[value] && !vs.active[value]
}

// allowedWith is Allowed with the values of the policy's LabelValueSet (vs, nil when
// the policy has no allowedValuesFrom): the Go twin of the generated policy's CEL.
func allowedWith(p *policyv1alpha1.LabelPolicy, re *regexp.Regexp, vs *valueSet, value string) bool {
	if Allowed(p, re, value) {
		return true
	}
	return vs != nil && vs.active[value]
}

// setValuesExpr is the CEL list of the values allowed from params at compile time:
// active and expiring after cutoff (zero: every expiry is still to come).
//
// Expiries are compared as the strings the API server stores them as (RFC 3339 in
// UTC, four-digit years, which order as the times do), not as CEL timestamps: CEL's
// run from year 1, and a value or cutoff in year 0 made a literal the API server
// refuses, or an expression that fails (and so refuses) every request.
func setValuesExpr(cutoff time.Time) string {
	cond := "(!has(v.active) || v.active)"
	if !cutoff.IsZero() {
		cond += fmt.Sprintf(" && (!has(v.expires) || string(v.expires) > %s)", celString(cutoff.UTC().Format(time.RFC3339)))
	}
	return fmt.Sprintf("params.spec.values.filter(v, %s).map(v, v.value)", cond)
}

// retiredExpr is CEL, true when the object's value is listed in params but retired.
const retiredExpr = "variables.value != '' && params.spec.values.exists(v, v.value == variables.value) && !(variables.value in variables.setValues)"
