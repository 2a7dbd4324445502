package labelpolicy

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

var exAt = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func exception(name string, expiresIn time.Duration, namespaces []string, sel *metav1.LabelSelector) policyv1alpha1.LabelPolicyException {
	return policyv1alpha1.LabelPolicyException{Name: name, Namespaces: namespaces, Selector: sel, Reason: "migration", Expires: metav1.NewTime(exAt.Add(expiresIn))}
}

func TestActiveExceptionsAndNextExpiry(t *testing.T) {
	p := testPolicy(policyv1alpha1.ActionDeny, func(p *policyv1alpha1.LabelPolicy) {
		p.Spec.Exceptions = []policyv1alpha1.LabelPolicyException{
			exception("gone", -time.Minute, []string{"a"}, nil),
			exception("later", time.Hour, []string{"b"}, nil),
			exception("soon", time.Minute, []string{"c"}, nil),
			exception("now", 0, []string{"d"}, nil), // expires at exAt: no longer active
		}
	})
	active := withActiveExceptions(p, exAt)
	var names []string
	for _, e := range active.Spec.Exceptions {
		names = append(names, e.Name)
	}
	if !slices.Equal(names, []string{"later", "soon"}) {
		t.Errorf("active = %v, want [later soon]", names)
	}
	if len(p.Spec.Exceptions) != 4 {
		t.Errorf("withActiveExceptions changed the policy it was given")
	}
	next, ok := nextExpiry(p, exAt)
	if !ok || !next.Equal(exAt.Add(time.Minute)) {
		t.Errorf("nextExpiry = %v, %v; want %v", next, ok, exAt.Add(time.Minute))
	}
	if _, ok := nextExpiry(p, exAt.Add(2*time.Hour)); ok {
		t.Errorf("nextExpiry after every expiry found one")
	}
	if got := activeKey(p, exAt); got != "later,soon" {
		t.Errorf("activeKey = %q", got)
	}
	noEx := testPolicy(policyv1alpha1.ActionDeny)
	if withActiveExceptions(noEx, exAt) != noEx {
		t.Errorf("a policy without exceptions is copied")
	}
}

// exceptedBy is the Go twin of the CEL that compileVAP puts in the policy; both follow
// Kubernetes' label selector semantics (NotIn and DoesNotExist match a missing key).
func TestExceptedBy(t *testing.T) {
	p := testPolicy(policyv1alpha1.ActionDeny, func(p *policyv1alpha1.LabelPolicy) {
		p.Spec.Exceptions = []policyv1alpha1.LabelPolicyException{
			exception("ns-only", time.Hour, []string{"legacy"}, nil),
			exception("batch", time.Hour, nil, &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "batch"}}),
			exception("both", time.Hour, []string{"shop"}, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "team", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"payments"}},
			}}),
		}
	})
	cases := []struct {
		ns     string
		labels map[string]string
		want   string
	}{
		{"legacy", nil, "ns-only"},
		{"other", map[string]string{"tier": "batch"}, "batch"},
		{"other", map[string]string{"tier": "web"}, ""},
		{"shop", nil, "both"},
		{"shop", map[string]string{"team": "payments"}, ""},
		{"shop", map[string]string{"team": "search"}, "both"},
	}
	for _, tc := range cases {
		got := exceptedBy(p, workload{kind: "Deployment", namespace: tc.ns, name: "w", labels: tc.labels})
		if got != tc.want {
			t.Errorf("%s %v: excepted by %q, want %q", tc.ns, tc.labels, got, tc.want)
		}
	}
}

func TestCompileExceptions(t *testing.T) {
	plain := Compile(testPolicy(policyv1alpha1.ActionDeny), policyv1alpha1.AdmissionModeNative, nil, "")
	if strings.Contains(plain.VAP.Spec.Validations[0].Expression, "excepted") || len(plain.VAP.Spec.Variables) != 2 {
		t.Errorf("a policy without exceptions compiles differently from before: %+v", plain.VAP.Spec)
	}
	p := testPolicy(policyv1alpha1.ActionDeny, func(p *policyv1alpha1.LabelPolicy) {
		p.Spec.Exceptions = []policyv1alpha1.LabelPolicyException{
			exception("legacy", time.Hour, []string{"legacy", "old"}, nil),
			exception("batch", time.Hour, nil, &metav1.LabelSelector{
				MatchLabels: map[string]string{"tier": "batch"},
				MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}},
					{Key: "canary", Operator: metav1.LabelSelectorOpDoesNotExist},
				},
			}),
		}
	})
	vap := Compile(p, policyv1alpha1.AdmissionModeNative, nil, "").VAP
	if !strings.HasPrefix(vap.Spec.Validations[0].Expression, "variables.excepted || ") {
		t.Errorf("validation does not admit excepted workloads: %s", vap.Spec.Validations[0].Expression)
	}
	want := `(request.namespace in ["legacy", "old"]) || (` +
		`((has(object.metadata.labels) && "tier" in object.metadata.labels) && object.metadata.labels["tier"] == "batch") && ` +
		`((has(object.metadata.labels) && "team" in object.metadata.labels) && object.metadata.labels["team"] in ["a", "b"]) && ` +
		`!(has(object.metadata.labels) && "canary" in object.metadata.labels))`
	got := vap.Spec.Variables[len(vap.Spec.Variables)-1]
	if got.Name != "excepted" || got.Expression != want {
		t.Errorf("excepted =\n%s\nwant\n%s", got.Expression, want)
	}
}

func TestValidateExceptions(t *testing.T) {
	p := testPolicy(policyv1alpha1.ActionDeny, func(p *policyv1alpha1.LabelPolicy) {
		p.Spec.Exceptions = []policyv1alpha1.LabelPolicyException{exception("bad", time.Hour, nil, &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Like", Values: []string{"a"}}},
		})}
	})
	err := validateExceptions(p)
	if err == nil || !strings.Contains(err.Error(), "spec.exceptions[bad].selector") {
		t.Errorf("err = %v", err)
	}
	if e := selectorExpr(p.Spec.Exceptions[0].Selector); e != "false" {
		t.Errorf("an unknown operator compiles to %q, want false", e)
	}
}

func TestExceptionStatuses(t *testing.T) {
	p := testPolicy(policyv1alpha1.ActionDeny, func(p *policyv1alpha1.LabelPolicy) {
		p.Spec.Exceptions = []policyv1alpha1.LabelPolicyException{
			exception("a", time.Minute, []string{"x"}, nil),
			exception("b", time.Hour, []string{"y"}, nil),
		}
	})
	st := exceptionStatuses(p, exAt, map[string]int32{"a": 3, "b": 1}, nil)
	if st[0].State != policyv1alpha1.ExceptionActive || st[0].Workloads != 3 || st[1].Workloads != 1 {
		t.Errorf("statuses = %+v", st)
	}
	// Without an audit the counts of the active ones are kept, an expired one has none.
	later := exceptionStatuses(p, exAt.Add(2*time.Minute), nil, st)
	if later[0].State != policyv1alpha1.ExceptionExpired || later[0].Workloads != 0 || later[1].Workloads != 1 {
		t.Errorf("later statuses = %+v", later)
	}
	if got := newlyExpired(st, later); !slices.Equal(got, []string{"a"}) {
		t.Errorf("newlyExpired = %v", got)
	}
	if got := newlyExpired(later, later); got != nil {
		t.Errorf("newlyExpired twice = %v", got)
	}
}
