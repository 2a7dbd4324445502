package labelpolicy

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/kit"
)

func testPolicy(action policyv1alpha1.Action, mod ...func(*policyv1alpha1.LabelPolicy)) *policyv1alpha1.LabelPolicy {
	p := &policyv1alpha1.LabelPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "cost", UID: "uid-1"},
		Spec:       policyv1alpha1.LabelPolicySpec{Label: "cost-center", Action: action},
	}
	for _, m := range mod {
		m(p)
	}
	return p
}

func TestCompileObjects(t *testing.T) {
	propagate := func(p *policyv1alpha1.LabelPolicy) { p.Spec.PropagateToPodTemplate = true }
	native, webhook := policyv1alpha1.AdmissionModeNative, policyv1alpha1.AdmissionModeWebhook
	cases := []struct {
		name          string
		p             *policyv1alpha1.LabelPolicy
		mode          string
		wantActions   []admissionv1.ValidationAction
		wantFailure   admissionv1.FailurePolicyType
		wantMAP       bool
		wantMutations int
	}{
		{"deny", testPolicy(policyv1alpha1.ActionDeny), native, []admissionv1.ValidationAction{admissionv1.Deny}, admissionv1.Fail, false, 0},
		{"audit", testPolicy(policyv1alpha1.ActionAudit), native, []admissionv1.ValidationAction{admissionv1.Warn, admissionv1.Audit}, admissionv1.Ignore, false, 0},
		{"default", testPolicy(policyv1alpha1.ActionDefault), native, []admissionv1.ValidationAction{admissionv1.Deny}, admissionv1.Fail, true, 1},
		// Deployment, StatefulSet, DaemonSet, Job and CronJob have pod templates.
		{"default and propagate", testPolicy(policyv1alpha1.ActionDefault, propagate), native, []admissionv1.ValidationAction{admissionv1.Deny}, admissionv1.Fail, true, 6},
		{"deny and propagate", testPolicy(policyv1alpha1.ActionDeny, propagate), native, []admissionv1.ValidationAction{admissionv1.Deny}, admissionv1.Fail, true, 5},
		{"default by webhook", testPolicy(policyv1alpha1.ActionDefault), webhook, []admissionv1.ValidationAction{admissionv1.Deny}, admissionv1.Fail, false, 0},
		{"default validated only", testPolicy(policyv1alpha1.ActionDefault), policyv1alpha1.AdmissionModeValidationOnly, []admissionv1.ValidationAction{admissionv1.Deny}, admissionv1.Fail, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Compile(tc.p, tc.mode, &admission.Endpoint{URL: "https://127.0.0.1:9443"}, "")
			if wantWebhook := tc.mode == webhook; (c.Webhook != nil) != wantWebhook {
				t.Fatalf("webhook configuration = %v, want %v", c.Webhook != nil, wantWebhook)
			}
			if c.VAP.Name != "orderly-labelpolicy-cost" || c.VAPBinding.Spec.PolicyName != c.VAP.Name {
				t.Errorf("names: policy %q, binding refers to %q", c.VAP.Name, c.VAPBinding.Spec.PolicyName)
			}
			if got := c.VAPBinding.Spec.ValidationActions; !equalActions(got, tc.wantActions) {
				t.Errorf("validationActions = %v, want %v", got, tc.wantActions)
			}
			if *c.VAP.Spec.FailurePolicy != tc.wantFailure {
				t.Errorf("failurePolicy = %v, want %v", *c.VAP.Spec.FailurePolicy, tc.wantFailure)
			}
			if (c.MAP != nil) != tc.wantMAP || (c.MAPBinding != nil) != tc.wantMAP {
				t.Fatalf("MAP = %v, binding = %v, want both %v", c.MAP != nil, c.MAPBinding != nil, tc.wantMAP)
			}
			if c.MAP != nil {
				if len(c.MAP.Spec.Mutations) != tc.wantMutations {
					t.Errorf("%d mutations, want %d", len(c.MAP.Spec.Mutations), tc.wantMutations)
				}
				if c.MAPBinding.Spec.PolicyName != c.MAP.Name {
					t.Errorf("MAP binding refers to %q", c.MAPBinding.Spec.PolicyName)
				}
				for _, mc := range c.MAP.Spec.MatchConditions {
					if strings.Contains(mc.Expression, "namespaceObject") {
						t.Errorf("matchCondition %q uses namespaceObject, which the API server does not provide there", mc.Name)
					}
				}
			}
			if c.VAP.Labels[policyv1alpha1.PolicyLabel] != "cost" || c.VAP.Labels["app.kubernetes.io/managed-by"] != "orderly" {
				t.Errorf("labels = %v", c.VAP.Labels)
			}
		})
	}
}

func equalActions(a, b []admissionv1.ValidationAction) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCompileMatchesPodsWithoutTrustedControllerAndExcludesSystemNamespaces(t *testing.T) {
	p := testPolicy(policyv1alpha1.ActionDeny, func(p *policyv1alpha1.LabelPolicy) {
		// Names no namespace can have are left out: in the binding's NotIn they made
		// the API server refuse it (found by FuzzCompileLabelPolicy).
		p.Spec.Match.ExcludedNamespaces = []string{"ci", " ", "Not_A_Namespace"}
		p.Spec.Match.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	})
	c := Compile(p, policyv1alpha1.AdmissionModeNative, nil, "")
	// No pods of trusted controllers (TestPodOwnerRule), and never in a protected
	// namespace (TestCompileProtectsNamespaces).
	if !slices.Equal(c.VAP.Spec.MatchConditions, []admissionv1.MatchCondition{kit.ProtectedMatchCondition(""), podsMatchCondition(p)}) {
		t.Errorf("matchConditions = %v, want only pods without a trusted controller, outside the protected namespaces", c.VAP.Spec.MatchConditions)
	}
	var resources []string
	for _, r := range c.VAP.Spec.MatchConstraints.ResourceRules {
		resources = append(resources, r.Resources...)
		if len(r.Operations) != 2 || r.Operations[0] != admissionv1.Create || r.Operations[1] != admissionv1.Update {
			t.Errorf("operations = %v", r.Operations)
		}
	}
	if got := strings.Join(resources, ","); got != "pods,daemonsets,deployments,statefulsets,cronjobs,jobs" {
		t.Errorf("resources = %s", got)
	}
	sel := c.VAPBinding.Spec.MatchResources.NamespaceSelector
	if sel.MatchLabels["team"] != "a" {
		t.Errorf("namespaceSelector lost the user's labels: %v", sel)
	}
	last := sel.MatchExpressions[len(sel.MatchExpressions)-1]
	if last.Key != "kubernetes.io/metadata.name" || last.Operator != metav1.LabelSelectorOpNotIn ||
		strings.Join(last.Values, ",") != "ci,kube-node-lease,kube-public,kube-system" {
		t.Errorf("exclusion = %v", last)
	}
	if p.Spec.Match.NamespaceSelector.MatchExpressions != nil {
		t.Error("Compile changed the policy's selector")
	}
}

func TestCompileExpressions(t *testing.T) {
	p := testPolicy(policyv1alpha1.ActionDefault, func(p *policyv1alpha1.LabelPolicy) {
		p.Spec.AllowedValues = []string{"a", `q"uote`}
		p.Spec.AllowedPattern = "cc-[0-9]+"
		p.Spec.DefaultValue = "a"
		p.Spec.PropagateToPodTemplate = true
		p.Spec.Match.Kinds = []policyv1alpha1.Kind{policyv1alpha1.KindCronJob}
	})
	c := Compile(p, policyv1alpha1.AdmissionModeNative, nil, "")
	v := c.VAP.Spec.Validations[0]
	for _, want := range []string{`variables.value in ["a", "q\"uote"]`, `variables.value.matches("^(?:cc-[0-9]+)$")`, "request.operation == 'UPDATE'"} {
		if !strings.Contains(v.Expression, want) {
			t.Errorf("validation %q lacks %q", v.Expression, want)
		}
	}
	for _, want := range []string{"LabelPolicy cost: ", "one of [a, q\\\"uote] or a value matching ^(?:cc-[0-9]+)$", "label the namespace with cost-center"} {
		if !strings.Contains(v.MessageExpression, want) {
			t.Errorf("messageExpression %q lacks %q", v.MessageExpression, want)
		}
	}
	if !strings.Contains(c.MAP.Spec.Variables[0].Expression, "namespaceObject.metadata.labels[\"cost-center\"]") {
		t.Errorf("value does not come from the namespace: %s", c.MAP.Spec.Variables[0].Expression)
	}
	cron := c.MAP.Spec.Mutations[1].ApplyConfiguration.Expression
	want := `Object{spec: Object.spec{jobTemplate: Object.spec.jobTemplate{spec: Object.spec.jobTemplate.spec{template: Object.spec.jobTemplate.spec.template{metadata: Object.spec.jobTemplate.spec.template.metadata{labels: {"cost-center": variables.value}}}}}}}`
	if !strings.HasSuffix(cron, want) {
		t.Errorf("CronJob mutation = %s", cron)
	}
}

func TestRejectionMessage(t *testing.T) {
	p := testPolicy(policyv1alpha1.ActionDeny, func(p *policyv1alpha1.LabelPolicy) { p.Spec.AllowedValues = []string{"fin"} })
	got := RejectionMessage(p, "Deployment", "shop", "web", "")
	want := `LabelPolicy cost: Deployment shop/web has no label cost-center. Allowed: one of [fin]. To fix: set metadata.labels["cost-center"] to an allowed value, e.g. cost-center: fin (see: kubectl get labelpolicy cost -o yaml)`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestVerdict(t *testing.T) {
	withPattern := func(p *policyv1alpha1.LabelPolicy) { p.Spec.AllowedPattern = "cc-[0-9]+" }
	remediate := func(p *policyv1alpha1.LabelPolicy) {
		p.Spec.Remediate = policyv1alpha1.RemediateLabelOnly
		p.Spec.DefaultValue = "cc-0"
	}
	cases := []struct {
		name       string
		p          *policyv1alpha1.LabelPolicy
		labels     map[string]string
		nsLabels   map[string]string
		wantReason string
		wantFix    string
	}{
		{"allowed", testPolicy(policyv1alpha1.ActionDeny, withPattern), map[string]string{"cost-center": "cc-1"}, nil, "", ""},
		{"pattern is anchored", testPolicy(policyv1alpha1.ActionDeny, withPattern), map[string]string{"cost-center": "x-cc-1"}, nil, "NotAllowed", ""},
		{"missing", testPolicy(policyv1alpha1.ActionDeny, withPattern), nil, nil, "Missing", ""},
		{"empty is missing", testPolicy(policyv1alpha1.ActionDeny), map[string]string{"cost-center": ""}, nil, "Missing", ""},
		{"any value when unrestricted", testPolicy(policyv1alpha1.ActionDeny), map[string]string{"cost-center": "x"}, nil, "", ""},
		{"fix from namespace", testPolicy(policyv1alpha1.ActionAudit, withPattern, remediate), nil, map[string]string{"cost-center": "cc-7"}, "Missing", "cc-7"},
		{"namespace value not allowed: default", testPolicy(policyv1alpha1.ActionAudit, withPattern, remediate), nil, map[string]string{"cost-center": "bad"}, "Missing", "cc-0"},
		{"chosen values are not overwritten", testPolicy(policyv1alpha1.ActionAudit, withPattern, remediate), map[string]string{"cost-center": "bad"}, nil, "NotAllowed", ""},
		{"no remediation", testPolicy(policyv1alpha1.ActionAudit, withPattern), nil, map[string]string{"cost-center": "cc-7"}, "Missing", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			re, err := CompilePattern(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			v, fix := verdict(tc.p, re, workload{kind: "Deployment", namespace: "ns", name: "w", labels: tc.labels}, tc.nsLabels)
			gotReason := ""
			if v != nil {
				gotReason = v.Reason
			}
			if gotReason != tc.wantReason || fix != tc.wantFix {
				t.Errorf("verdict = %q, fix %q; want %q, fix %q", gotReason, fix, tc.wantReason, tc.wantFix)
			}
		})
	}
}

// A \Q literal running to the end of the pattern swallowed the anchors: a pattern the
// API server accepts was refused, and its policy's CEL did not compile (found by
// FuzzCompileLabelPolicy).
func TestCompilePatternUnterminatedQuote(t *testing.T) {
	for pattern, cases := range map[string]map[string]bool{
		`\Qcc-`:       {"cc-": true, "cc-1": false, "ccx": false},
		`\Qa.b`:       {"a.b": true, "axb": false},
		`x\Qa\E|\Qb.`: {"xa": true, "b.": true, "bx": false},
		`\\Q`:         {`\Q`: true},
	} {
		re, err := CompilePattern(testPolicy(policyv1alpha1.ActionDeny, func(p *policyv1alpha1.LabelPolicy) { p.Spec.AllowedPattern = pattern }))
		if err != nil {
			t.Fatalf("%s: %v", pattern, err)
		}
		for v, want := range cases {
			if got := re.MatchString(v); got != want {
				t.Errorf("%s matches %q: %v, want %v", pattern, v, got, want)
			}
		}
	}
}

func TestCompilePatternRejectsInvalid(t *testing.T) {
	_, err := CompilePattern(testPolicy(policyv1alpha1.ActionDeny, func(p *policyv1alpha1.LabelPolicy) { p.Spec.AllowedPattern = "(" }))
	if err == nil || !strings.Contains(err.Error(), "not a valid regular expression") {
		t.Errorf("err = %v", err)
	}
	if re, _ := CompilePattern(testPolicy(policyv1alpha1.ActionDeny)); re != (*regexp.Regexp)(nil) {
		t.Error("no pattern must compile to nil")
	}
}

func TestCompileWebhook(t *testing.T) {
	p := testPolicy(policyv1alpha1.ActionDefault, func(p *policyv1alpha1.LabelPolicy) {
		p.Spec.Match.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	})
	t.Run("url", func(t *testing.T) {
		c := Compile(p, policyv1alpha1.AdmissionModeWebhook, &admission.Endpoint{URL: "https://127.0.0.1:9443/", CABundle: []byte("ca")}, "")
		if c.MAP != nil || c.Webhook == nil || len(c.Webhook.Webhooks) != 1 {
			t.Fatalf("MAP %v, webhook %v", c.MAP, c.Webhook)
		}
		w := c.Webhook.Webhooks[0]
		if w.Name != "cost.labelpolicy.orderly.dev" || c.Webhook.Name != "orderly-labelpolicy-cost" {
			t.Errorf("names %q, %q", c.Webhook.Name, w.Name)
		}
		if w.ClientConfig.URL == nil || *w.ClientConfig.URL != "https://127.0.0.1:9443/labelpolicy/cost" || string(w.ClientConfig.CABundle) != "ca" {
			t.Errorf("clientConfig = %+v", w.ClientConfig)
		}
		if *w.FailurePolicy != admissionv1.Ignore || *w.TimeoutSeconds != 5 || *w.SideEffects != admissionv1.SideEffectClassNone {
			t.Errorf("defaults: failurePolicy %v, timeout %d, sideEffects %v", *w.FailurePolicy, *w.TimeoutSeconds, *w.SideEffects)
		}
		if !slices.Equal(w.MatchConditions, []admissionv1.MatchCondition{kit.ProtectedMatchCondition(""), podsMatchCondition(p)}) {
			t.Errorf("matchConditions = %v", w.MatchConditions)
		}
		if w.NamespaceSelector.MatchLabels["team"] != "a" || len(w.Rules) != 3 {
			t.Errorf("namespaceSelector %v, %d rules", w.NamespaceSelector, len(w.Rules))
		}
	})
	t.Run("service", func(t *testing.T) {
		c := Compile(p, policyv1alpha1.AdmissionModeWebhook, &admission.Endpoint{
			Service:       &admissionv1.ServiceReference{Namespace: "orderly-system", Name: "orderly-webhook", Port: ptr.To(int32(443))},
			FailurePolicy: admissionv1.Fail, TimeoutSeconds: 3,
		}, "")
		w := c.Webhook.Webhooks[0]
		s := w.ClientConfig.Service
		if w.ClientConfig.URL != nil || s == nil || s.Name != "orderly-webhook" || *s.Path != "/labelpolicy/cost" || *s.Port != 443 {
			t.Errorf("clientConfig = %+v", w.ClientConfig)
		}
		if *w.FailurePolicy != admissionv1.Fail || *w.TimeoutSeconds != 3 {
			t.Errorf("failurePolicy %v, timeout %d", *w.FailurePolicy, *w.TimeoutSeconds)
		}
	})
	t.Run("deny needs no webhook", func(t *testing.T) {
		c := Compile(testPolicy(policyv1alpha1.ActionDeny), policyv1alpha1.AdmissionModeWebhook, &admission.Endpoint{URL: "https://x"}, "")
		if c.Webhook != nil {
			t.Error("a Deny policy got a webhook configuration")
		}
	})
}

// A policy that matches every namespace still leaves the manager's namespace and the
// kube-* namespaces alone, in every object it compiles to: it must never block the
// cluster's components or Orderly's own Deployment.
func TestCompileProtectsNamespaces(t *testing.T) {
	const managerNS = "orderly-system"
	wantCondition := admissionv1.MatchCondition{Name: "not-protected-namespace", Expression: `!request.namespace.startsWith("kube-") && request.namespace != "orderly-system"`}
	for _, mode := range []string{policyv1alpha1.AdmissionModeNative, policyv1alpha1.AdmissionModeWebhook} {
		t.Run(mode, func(t *testing.T) {
			p := testPolicy(policyv1alpha1.ActionDefault, func(p *policyv1alpha1.LabelPolicy) {
				p.Spec.Match.ExcludedNamespaces = nil
				p.Spec.Match.NamespaceSelector = nil
			})
			c := Compile(p, mode, &admission.Endpoint{URL: "https://127.0.0.1:9443"}, managerNS)
			type matched struct {
				what       string
				selector   *metav1.LabelSelector
				conditions []admissionv1.MatchCondition
			}
			all := []matched{{"ValidatingAdmissionPolicyBinding", c.VAPBinding.Spec.MatchResources.NamespaceSelector, c.VAP.Spec.MatchConditions}}
			switch mode {
			case policyv1alpha1.AdmissionModeNative:
				all = append(all, matched{"MutatingAdmissionPolicyBinding", c.MAPBinding.Spec.MatchResources.NamespaceSelector, c.MAP.Spec.MatchConditions})
			case policyv1alpha1.AdmissionModeWebhook:
				all = append(all, matched{"MutatingWebhookConfiguration", c.Webhook.Webhooks[0].NamespaceSelector, c.Webhook.Webhooks[0].MatchConditions})
			}
			for _, m := range all {
				if !slices.Contains(m.conditions, wantCondition) {
					t.Errorf("%s: matchConditions %v lack %v", m.what, m.conditions, wantCondition)
				}
				if !slices.Contains(m.conditions, podsMatchCondition(p)) {
					t.Errorf("%s: matchConditions %v lack %v", m.what, m.conditions, podsMatchCondition(p))
				}
				want := metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn,
					Values: []string{"kube-node-lease", "kube-public", "kube-system", managerNS}}
				if !slices.ContainsFunc(m.selector.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool {
					return r.Key == want.Key && r.Operator == want.Operator && slices.Equal(r.Values, want.Values)
				}) {
					t.Errorf("%s: namespaceSelector %v lacks %v", m.what, m.selector, want)
				}
			}
		})
	}
}

func TestNamespaceFilterSkipsProtectedNamespaces(t *testing.T) {
	p := testPolicy(policyv1alpha1.ActionAudit, func(p *policyv1alpha1.LabelPolicy) { p.Spec.Match.ExcludedNamespaces = []string{"ci"} })
	inScope, err := namespaceFilter(p, "orderly-system")
	if err != nil {
		t.Fatal(err)
	}
	for ns, want := range map[string]bool{"shop": true, "kubeflow": true, "ci": false, "kube-system": false, "kube-flannel": false, "orderly-system": false} {
		if got := inScope(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); got != want {
			t.Errorf("namespace %s in scope = %v, want %v", ns, got, want)
		}
	}
}
