package testcel

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The compilers refuse what the API server refuses, and name the expression.
func TestCompile(t *testing.T) {
	good := &admissionv1.ValidatingAdmissionPolicySpec{
		ParamKind:       &admissionv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
		Variables:       []admissionv1.Variable{{Name: "value", Expression: "has(object.metadata.labels) && 'a' in object.metadata.labels ? object.metadata.labels['a'] : ''"}},
		MatchConditions: []admissionv1.MatchCondition{{Name: "ns", Expression: "!request.namespace.startsWith('kube-')"}},
		Validations:     []admissionv1.Validation{{Expression: "variables.value.matches('^(?:a|b)$') && params != null", MessageExpression: "'bad ' + variables.value", Reason: ptrTo(metav1.StatusReasonForbidden)}},
	}
	if err := ValidatingAdmissionPolicy(good); err != nil {
		t.Fatalf("a good policy: %v", err)
	}
	for expr, want := range map[string]string{
		"variables.value.matches('^(?:\\\\Qa)$')":                  "compilation failed",
		"variables.value":                                          "must evaluate to bool",
		"variables.nope == ''":                                     "undefined field 'nope'",
		"timestamp('10000-01-01T00:00:00Z') > request.requestTime": "timestamp",
	} {
		bad := good.DeepCopy()
		bad.Validations[0].Expression = expr
		if err := ValidatingAdmissionPolicy(bad); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "validation") {
			t.Errorf("%s: error %v, want one naming the validation and %q", expr, err, want)
		}
	}
	mp := &admissionv1.MutatingAdmissionPolicySpec{
		Variables: []admissionv1.Variable{{Name: "value", Expression: "'x'"}},
		Mutations: []admissionv1.Mutation{{PatchType: admissionv1.PatchTypeApplyConfiguration, ApplyConfiguration: &admissionv1.ApplyConfiguration{
			Expression: "Object{metadata: Object.metadata{labels: {'a': variables.value}}}"}}},
	}
	if err := MutatingAdmissionPolicy(mp); err != nil {
		t.Fatalf("a good mutating policy: %v", err)
	}
	mp.Mutations[0].ApplyConfiguration.Expression = "{'a': variables.value}"
	if err := MutatingAdmissionPolicy(mp); err == nil {
		t.Error("an apply configuration that is not an Object compiled")
	}
	if err := MatchConditions([]admissionv1.MatchCondition{{Name: "x", Expression: "request.namespace"}}); err == nil {
		t.Error("a match condition that is not a bool compiled")
	}
	var out []string
	if err := Eval("variables.images.map(i, i + ':x')", map[string]any{"variables": map[string]any{"images": []string{"a"}}}, &out); err != nil || len(out) != 1 || out[0] != "a:x" {
		t.Fatalf("Eval = %v, %v", out, err)
	}
	var b bool
	if err := Eval("'a' in object.metadata.labels", map[string]any{"object": map[string]any{"metadata": map[string]any{"labels": map[string]string{"a": "b"}}}}, &b); err != nil || !b {
		t.Fatalf("Eval = %v, %v", b, err)
	}
}

func ptrTo[T any](v T) *T { return &v }
