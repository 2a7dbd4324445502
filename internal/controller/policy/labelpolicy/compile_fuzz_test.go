package labelpolicy

import (
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/testing/testcel"
)

// The CRD's rules that the fuzz targets hold inputs to: what the API server lets
// through is what Compile must turn into admission objects it accepts.
var (
	apiLabelKey     = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	apiDefaultValue = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
	apiName         = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// labelPolicyInput is what the fuzz targets build a policy from.
type labelPolicyInput struct {
	name, label, value1, value2, pattern, defaultValue string
	action                                             uint8
	propagate, fromSet, fromTenant                     bool
	excludedNS, exceptionNS, selKey, selValue          string
	selOp                                              uint8
	selOnNamespaces                                    bool
	managerNS                                          string
	cutoff                                             int64
	tenant, costCenter                                 string
	ownerAPIVersion, ownerKind                         string
}

func (in labelPolicyInput) policy() (*policyv1alpha1.LabelPolicy, Options) {
	p := &policyv1alpha1.LabelPolicy{ObjectMeta: metav1.ObjectMeta{Name: in.name, UID: "uid-1"}, Spec: policyv1alpha1.LabelPolicySpec{
		Label: in.label, AllowedPattern: in.pattern, DefaultValue: in.defaultValue,
		Action:                 []policyv1alpha1.Action{policyv1alpha1.ActionDeny, policyv1alpha1.ActionDefault, policyv1alpha1.ActionAudit}[int(in.action)%3],
		PropagateToPodTemplate: in.propagate, DefaultFromTenant: in.fromTenant,
	}}
	for _, v := range []string{in.value1, in.value2} {
		if v != "" {
			p.Spec.AllowedValues = append(p.Spec.AllowedValues, v)
		}
	}
	if in.fromSet {
		p.Spec.AllowedValuesFrom = &policyv1alpha1.AllowedValuesSource{LabelValueSet: "set-" + in.name}
	}
	if in.excludedNS != "" {
		p.Spec.Match.ExcludedNamespaces = []string{in.excludedNS}
	}
	if in.selOnNamespaces && in.selKey != "" {
		p.Spec.Match.NamespaceSelector = selector(in.selKey, in.selValue, in.selOp)
	}
	if in.exceptionNS != "" || in.selKey != "" && !in.selOnNamespaces {
		e := policyv1alpha1.LabelPolicyException{Name: "x", Reason: "fuzz", Expires: metav1.NewTime(time.Now().Add(time.Hour))}
		if in.exceptionNS != "" {
			e.Namespaces = []string{in.exceptionNS}
		}
		if in.selKey != "" && !in.selOnNamespaces {
			e.Selector = selector(in.selKey, in.selValue, in.selOp)
		}
		p.Spec.Exceptions = []policyv1alpha1.LabelPolicyException{e}
	}
	if in.ownerAPIVersion != "" || in.ownerKind != "" {
		p.Spec.Match.PodOwners = []policyv1alpha1.PodOwner{{APIVersion: in.ownerAPIVersion, Kind: in.ownerKind}}
	}
	opts := Options{}
	if in.cutoff != 0 {
		opts.ValuesCutoff = time.Unix(in.cutoff, 0)
	}
	if in.tenant != "" {
		opts.TenantDefaults = []TenantDefault{{Tenant: in.tenant, UID: "uid-" + in.tenant, CostCenter: in.costCenter}}
	}
	return p, opts
}

// selector is a label selector of one requirement: matchLabels, or a match
// expression of operator op.
func selector(key, value string, op uint8) *metav1.LabelSelector {
	ops := []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}
	if int(op)%5 == 4 {
		return &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}
	}
	r := metav1.LabelSelectorRequirement{Key: key, Operator: ops[int(op)%5]}
	if value != "" {
		r.Values = strings.Split(value, ",")
	}
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{r}}
}

// admitted says whether the API server would store the policy (the CRD's rules,
// the ones that matter to what Compile writes).
func (in labelPolicyInput) admitted(p *policyv1alpha1.LabelPolicy) bool {
	for _, s := range []string{in.name, in.label, in.value1, in.value2, in.pattern, in.defaultValue, in.excludedNS, in.exceptionNS, in.selKey, in.selValue, in.managerNS, in.tenant, in.costCenter, in.ownerAPIVersion, in.ownerKind} {
		if !utf8.ValidString(s) {
			return false // strings from the API server are JSON
		}
	}
	if !apiName.MatchString(in.name) || len(in.name) > 63 || !apiLabelKey.MatchString(in.label) || len(in.label) > 317 {
		return false
	}
	for _, v := range p.Spec.AllowedValues {
		if len(v) > 63 {
			return false
		}
	}
	if in.pattern != "" {
		if len(in.pattern) > 256 {
			return false
		}
		if _, err := regexp.Compile(in.pattern); err != nil {
			return false // ''.matches(self): RE2, which is Go's regexp in cel-go
		}
	}
	if in.defaultValue != "" {
		if !apiDefaultValue.MatchString(in.defaultValue) || len(in.defaultValue) > 63 {
			return false
		}
	}
	for _, ns := range []string{in.excludedNS, in.exceptionNS} {
		if len(ns) > 63 {
			return false
		}
	}
	if in.managerNS != "" && !apiName.MatchString(in.managerNS) {
		return false
	}
	for _, o := range p.Spec.Match.PodOwners {
		if !apiPodOwnerVersion.MatchString(o.APIVersion) || len(o.APIVersion) > 317 || !apiPodOwnerKind.MatchString(o.Kind) || len(o.Kind) > 63 {
			return false
		}
	}
	if validateExceptions(p) != nil {
		return false // the controller reports it and compiles nothing
	}
	// A LabelValueSet's expiries are metav1.Times: RFC 3339, years 0000 to 9999.
	return in.cutoff == 0 || (in.cutoff >= time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix() && in.cutoff < time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).Unix())
}

func addLabelPolicySeeds(f *testing.F) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Unix()
	for _, in := range []labelPolicyInput{
		{name: "cost", label: "cost-center"},
		{name: "cost", label: "cost-center", action: 1},
		{name: "cost", label: "cost-center", action: 2},
		{name: "cost", label: "cost-center", action: 1, propagate: true},
		{name: "cost", label: "cost-center", value1: "a", value2: `q"uote`, pattern: "cc-[0-9]+", defaultValue: "a", action: 1, propagate: true},
		{name: "cost", label: "cost-center", value1: "fin"},
		{name: "cost", label: "cost-center", pattern: "cc-[0-9]+", defaultValue: "cc-0", action: 2},
		{name: "cost", label: "cost-center", pattern: "("},
		{name: "cost", label: "example.com/team", fromSet: true, cutoff: now, excludedNS: "legacy", managerNS: "orderly-system"},
		{name: "cost", label: "cost-center", action: 1, fromTenant: true, tenant: "acme", costCenter: "cc-1"},
		{name: "cost", label: "cost-center", exceptionNS: "shop", selKey: "app", selValue: "web,api", selOp: 0},
		{name: "cost", label: "cost-center", selKey: "app", selValue: "web", selOp: 4},
		{name: "cost", label: "cost-center", selKey: "example.com/app", selOp: 3},
		{name: "cost", label: "cost-center", selKey: "team", selValue: "a", selOp: 4, selOnNamespaces: true},
		{name: "cost", label: "cost-center", value1: "ünïcode\u2028", value2: "\x7f\\'"},
		{name: "cost", label: "cost-center", excludedNS: " "},
		{name: "cost", label: "cost-center", pattern: `\Qcc-`},
		{name: "cost", label: "cost-center", fromSet: true, cutoff: time.Date(0, 6, 1, 0, 0, 0, 0, time.UTC).Unix()},
		{name: "cost", label: "cost-center", action: 1, ownerAPIVersion: "postgresql.cnpg.io/v1", ownerKind: "Cluster"},
		{name: "cost", label: "cost-center", ownerAPIVersion: "core.strimzi.io/v1beta2", ownerKind: "StrimziPodSet"},
	} {
		f.Add(in.name, in.label, in.value1, in.value2, in.pattern, in.defaultValue, in.action, in.propagate, in.fromSet, in.fromTenant,
			in.excludedNS, in.exceptionNS, in.selKey, in.selValue, in.selOp, in.selOnNamespaces, in.managerNS, in.cutoff, in.tenant, in.costCenter, in.ownerAPIVersion, in.ownerKind)
	}
}

// FuzzCompileLabelPolicy compiles any LabelPolicy the API server would store (its
// CRD's rules applied to the fuzzed fields) in each admission mode. Properties: the
// ValidatingAdmissionPolicy, the MutatingAdmissionPolicy and the webhook's match
// conditions compile with the API server's CEL compilers (else the API server
// refuses them, or they fail every request); the pattern compiles anchored; the
// generated objects never apply to kube-* or the manager's namespace; and for any
// policy, stored or not, a pattern that does not compile is refused with a message.
func FuzzCompileLabelPolicy(f *testing.F) {
	addLabelPolicySeeds(f)
	f.Fuzz(func(t *testing.T, name, label, value1, value2, pattern, defaultValue string, action uint8, propagate, fromSet, fromTenant bool,
		excludedNS, exceptionNS, selKey, selValue string, selOp uint8, selOnNamespaces bool, managerNS string, cutoff int64, tenant, costCenter,
		ownerAPIVersion, ownerKind string) {
		in := labelPolicyInput{name, label, value1, value2, pattern, defaultValue, action, propagate, fromSet, fromTenant,
			excludedNS, exceptionNS, selKey, selValue, selOp, selOnNamespaces, managerNS, cutoff, tenant, costCenter, ownerAPIVersion, ownerKind}
		p, opts := in.policy()
		re, err := CompilePattern(p)
		if err != nil && !strings.Contains(err.Error(), "allowedPattern") {
			t.Fatalf("CompilePattern: the error %q does not name allowedPattern", err)
		}
		if !in.admitted(p) {
			// Not what the API server stores: no panic is all that is asked.
			for _, mode := range []string{policyv1alpha1.AdmissionModeNative, policyv1alpha1.AdmissionModeWebhook} {
				CompileWith(p, mode, &admission.Endpoint{URL: "https://127.0.0.1:9443"}, managerNS, opts)
			}
			return
		}
		if err != nil {
			t.Fatalf("allowedPattern %q, which the API server accepts, does not compile anchored: %v", pattern, err)
		}
		if p.Spec.AllowedPattern != "" && re == nil {
			t.Fatal("a pattern compiled to nil")
		}
		for _, mode := range []string{policyv1alpha1.AdmissionModeNative, policyv1alpha1.AdmissionModeWebhook} {
			c := CompileWith(p, mode, &admission.Endpoint{URL: "https://127.0.0.1:9443"}, managerNS, opts)
			if err := testcel.ValidatingAdmissionPolicy(&c.VAP.Spec); err != nil {
				t.Fatalf("the ValidatingAdmissionPolicy of %+v does not compile: %v", p.Spec, err)
			}
			if c.MAP != nil {
				if err := testcel.MutatingAdmissionPolicy(&c.MAP.Spec); err != nil {
					t.Fatalf("the MutatingAdmissionPolicy of %+v does not compile: %v", p.Spec, err)
				}
			}
			if c.Webhook != nil {
				if err := testcel.MatchConditions(c.Webhook.Webhooks[0].MatchConditions); err != nil {
					t.Fatalf("the webhook's match conditions do not compile: %v", err)
				}
			}
			excluded := c.VAPBinding.Spec.MatchResources.NamespaceSelector
			sel, err := metav1.LabelSelectorAsSelector(excluded)
			if err != nil {
				t.Fatalf("the binding's namespaceSelector %v: %v", excluded, err)
			}
			for _, ns := range []string{"kube-system", managerNS} {
				if ns != "" && sel.Matches(k8slabels.Set{corev1NamespaceNameLabel: ns}) {
					t.Fatalf("the binding applies to namespace %s", ns)
				}
			}
			for _, ns := range []string{"kube-system", "kube-flannel", managerNS} {
				var applies bool
				if ns == "" {
					continue
				}
				if err := testcel.Eval(c.VAP.Spec.MatchConditions[0].Expression, map[string]any{"request": map[string]any{"namespace": ns}}, &applies); err != nil || applies {
					t.Fatalf("the match condition %q applies to namespace %s (%v)", c.VAP.Spec.MatchConditions[0].Expression, ns, err)
				}
			}
		}
	})
}

// FuzzAllowedTwin checks the audit's Go twin against the policy's CEL: for any
// stored policy without a LabelValueSet and any label value, Allowed says what the
// ValidatingAdmissionPolicy's allowed-value expression says.
func FuzzAllowedTwin(f *testing.F) {
	for _, s := range [][5]string{
		{"a", `q"uote`, "cc-[0-9]+", "cc-1", "x"}, {"fin", "", "", "fin", ""}, {"", "", "cc-[0-9]+", "x-cc-1", ""},
		{"", "", "", "", ""}, {"", "", "", "anything", ""}, {"", "", `(?i)prod|dev`, "PROD", ""}, {"ü", "", `\p{L}+`, "ü", ""},
		{"", "", `a|b`, "ab", ""}, {"", "", `\Qa.b`, "a.b", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, v1, v2, pattern, value string) {
		in := labelPolicyInput{name: "cost", label: "cost-center", value1: v1, value2: v2, pattern: pattern}
		p, _ := in.policy()
		if !in.admitted(p) || !utf8.ValidString(value) {
			return
		}
		re, err := CompilePattern(p)
		if err != nil {
			t.Fatalf("allowedPattern %q, which the API server accepts, does not compile anchored: %v", pattern, err)
		}
		var cel bool
		if err := testcel.Eval(allowedExpr(p, "value"), map[string]any{"value": value}, &cel); err != nil {
			t.Fatalf("%s: %v", allowedExpr(p, "value"), err)
		}
		if got := Allowed(p, re, value); got != cel {
			t.Fatalf("Allowed(%q) = %v, the policy's CEL %s says %v", value, got, allowedExpr(p, "value"), cel)
		}
	})
}

// FuzzSelectorTwin checks exceptions' CEL against Kubernetes' label selectors: for
// any valid selector of one requirement and any labels, selectorExpr matches what
// the selector matches (exceptedBy, the audit's twin, uses the selector).
func FuzzSelectorTwin(f *testing.F) {
	for _, s := range []struct {
		key, value string
		op         uint8
		lk, lv     string
	}{
		{"app", "web,api", 0, "app", "web"}, {"app", "web,api", 1, "app", "db"}, {"app", "", 2, "app", ""},
		{"example.com/app", "", 3, "x", "y"}, {"app", "web", 4, "app", "web"}, {"app", "web", 4, "app", "api"},
		{"app", "", 4, "app", ""},
	} {
		f.Add(s.key, s.value, s.op, s.lk, s.lv)
	}
	f.Fuzz(func(t *testing.T, key, value string, op uint8, lk, lv string) {
		sel := selector(key, value, op)
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return // validateExceptions refuses the policy
		}
		labels := map[string]string{}
		if lk != "" {
			if !utf8.ValidString(lk) || !utf8.ValidString(lv) {
				return
			}
			labels[lk] = lv
		}
		var cel bool
		obj := map[string]any{"metadata": map[string]any{"labels": labels}}
		if err := testcel.Eval(selectorExpr(sel), map[string]any{"object": obj}, &cel); err != nil {
			t.Fatalf("%s: %v", selectorExpr(sel), err)
		}
		if want := s.Matches(k8slabels.Set(labels)); cel != want {
			t.Fatalf("selector %v on %v: CEL %s says %v, Kubernetes %v", sel, labels, selectorExpr(sel), cel, want)
		}
	})
}
