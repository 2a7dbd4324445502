package labelpolicy

import (
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/testing/testcel"
)

func testValueSet(now time.Time) *policyv1alpha1.LabelValueSet {
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	return &policyv1alpha1.LabelValueSet{
		ObjectMeta: metav1.ObjectMeta{Name: "cost-centers"},
		Spec: policyv1alpha1.LabelValueSetSpec{Values: []policyv1alpha1.LabelValue{
			{Value: "cc-1"},
			{Value: "cc-2", Active: ptr.To(false)},
			{Value: "cc-3", Expires: at(time.Minute)},
			{Value: "cc-4", Expires: at(-time.Hour)},
			{Value: "cc-5", Expires: at(-time.Minute)},
			{Value: "cc-6", Active: ptr.To(true), Expires: at(time.Hour)},
		}},
	}
}

func TestValueSetAtATime(t *testing.T) {
	now := exAt
	s := testValueSet(now)
	if got := valuesCutoff(s, now); !got.Equal(now.Add(-time.Minute)) {
		t.Errorf("cutoff = %v, want the latest past expiry", got)
	}
	if next, ok := nextValueExpiry(s, now); !ok || !next.Equal(now.Add(time.Minute)) {
		t.Errorf("next = %v, %v", next, ok)
	}
	if !valuesCutoff(nil, now).IsZero() || !valuesCutoff(s, now.Add(-2*time.Hour)).IsZero() {
		t.Errorf("a cutoff without a past expiry")
	}
	p := testPolicy(policyv1alpha1.ActionDeny, func(p *policyv1alpha1.LabelPolicy) {
		p.Spec.AllowedValuesFrom = &policyv1alpha1.AllowedValuesSource{LabelValueSet: "cost-centers"}
	})
	vs := newValueSet("cost-centers", s, now)
	for value, want := range map[string]string{
		"cc-1": "", "cc-3": "", "cc-6": "",
		"cc-2": policyv1alpha1.ViolationRetired, "cc-4": policyv1alpha1.ViolationRetired, "cc-5": policyv1alpha1.ViolationRetired,
		"cc-9": policyv1alpha1.ViolationNotAllowed,
	} {
		v, _ := verdictWith(p, nil, vs, workload{kind: "Deployment", namespace: "ns", name: "w", labels: map[string]string{"cost-center": value}}, nil)
		got := ""
		if v != nil {
			got = v.Reason
		}
		if got != want {
			t.Errorf("%s: %q, want %q", value, got, want)
		}
	}
	// Later, cc-3 has expired too.
	if v, _ := verdictWith(p, nil, newValueSet("cost-centers", s, now.Add(time.Minute)), workload{labels: map[string]string{"cost-center": "cc-3"}}, nil); v == nil || v.Reason != policyv1alpha1.ViolationRetired {
		t.Errorf("cc-3 after its expiry: %+v", v)
	}
	// Without its set, a policy allows nothing from it (and not "any value").
	if v, _ := verdictWith(p, nil, newValueSet("cost-centers", nil, now), workload{labels: map[string]string{"cost-center": "cc-1"}}, nil); v == nil || v.Reason != policyv1alpha1.ViolationNotAllowed {
		t.Errorf("cc-1 without the set: %+v", v)
	}
}

func TestCompileAllowedValuesFrom(t *testing.T) {
	p := testPolicy(policyv1alpha1.ActionDeny, func(p *policyv1alpha1.LabelPolicy) {
		p.Spec.AllowedValuesFrom = &policyv1alpha1.AllowedValuesSource{LabelValueSet: "cost-centers"}
	})
	cutoff := time.Date(2026, 3, 1, 11, 59, 0, 0, time.UTC)
	c := CompileWith(p, policyv1alpha1.AdmissionModeNative, nil, "", Options{ValuesCutoff: cutoff})
	if pk := c.VAP.Spec.ParamKind; pk == nil || pk.Kind != "LabelValueSet" || pk.APIVersion != "policy.orderly.dev/v1alpha1" {
		t.Errorf("paramKind = %+v", pk)
	}
	ref := c.VAPBinding.Spec.ParamRef
	if ref == nil || ref.Name != "cost-centers" || ref.ParameterNotFoundAction == nil || *ref.ParameterNotFoundAction != admissionv1.DenyAction {
		t.Errorf("paramRef = %+v", ref)
	}
	var setValues string
	for _, v := range c.VAP.Spec.Variables {
		if v.Name == "setValues" {
			setValues = v.Expression
		}
	}
	if !strings.Contains(setValues, `"2026-03-01T11:59:00Z"`) {
		t.Errorf("setValues = %s", setValues)
	}
	// Evaluated by the API server's CEL: values expiring at or before the cutoff are
	// retired, inactive ones too; an expiry in year 0 is one (CEL's timestamps start in
	// year 1: the policy failed every request, found by FuzzCompileLabelPolicy).
	params := map[string]any{"spec": map[string]any{"values": []any{
		map[string]any{"value": "open"},
		map[string]any{"value": "later", "expires": "2026-03-01T12:00:00Z"},
		map[string]any{"value": "at-cutoff", "expires": "2026-03-01T11:59:00Z"},
		map[string]any{"value": "ancient", "expires": "0000-06-01T00:00:00Z"},
		map[string]any{"value": "off", "active": false},
	}}}
	var active []string
	if err := testcel.Eval(setValues, map[string]any{"params": params}, &active); err != nil || strings.Join(active, ",") != "open,later" {
		t.Errorf("setValues = %v, %v; want open,later", active, err)
	}
	year0 := CompileWith(p, policyv1alpha1.AdmissionModeNative, nil, "", Options{ValuesCutoff: time.Date(0, 6, 1, 0, 0, 0, 0, time.UTC)})
	if err := testcel.ValidatingAdmissionPolicy(&year0.VAP.Spec); err != nil {
		t.Errorf("a cutoff in year 0: %v", err)
	}
	if e := c.VAP.Spec.Validations[0].Expression; !strings.Contains(e, "variables.value in variables.setValues") {
		t.Errorf("validation = %s", e)
	}
	if m := c.VAP.Spec.Validations[0].MessageExpression; !strings.Contains(m, "which is retired in LabelValueSet cost-centers") {
		t.Errorf("message = %s", m)
	}
	// No cutoff: no expiry to compare.
	c = CompileWith(p, policyv1alpha1.AdmissionModeNative, nil, "", Options{})
	for _, v := range c.VAP.Spec.Variables {
		if v.Name == "setValues" && strings.Contains(v.Expression, "expires") {
			t.Errorf("setValues without a cutoff = %s", v.Expression)
		}
	}
	// A policy without allowedValuesFrom has no parameter.
	if c := Compile(testPolicy(policyv1alpha1.ActionDeny), policyv1alpha1.AdmissionModeNative, nil, ""); c.VAP.Spec.ParamKind != nil || c.VAPBinding.Spec.ParamRef != nil {
		t.Errorf("a parameter without allowedValuesFrom")
	}
}
