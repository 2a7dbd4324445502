package imagepolicy

import (
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
)

func TestCompileAdmission(t *testing.T) {
	endpoint := &admission.Endpoint{URL: "https://127.0.0.1:9443", CABundle: []byte("ca")}
	tests := []struct {
		name                    string
		policy                  *policyv1alpha1.ImagePolicy
		endpoint                *admission.Endpoint
		wantVAP, wantWebhook    bool
		wantFailure             admissionv1.FailurePolicyType
		wantBindingActionIsDeny bool
	}{
		{"severity only: webhook, no native policy", policy(nil), endpoint, false, true, admissionv1.Fail, false},
		{"registries and severity: both", policy(func(s *policyv1alpha1.ImagePolicySpec) { s.AllowedRegistries = []string{"r.io/*"} }), endpoint, true, true, admissionv1.Fail, true},
		{"registries only, unscanned allowed: native only", policy(func(s *policyv1alpha1.ImagePolicySpec) {
			s.MaxSeverity = ""
			s.AllowedRegistries = []string{"r.io/*"}
			s.Unscanned = &policyv1alpha1.UnscannedPolicy{Action: policyv1alpha1.UnscannedAllow}
		}), endpoint, true, false, "", true},
		{"Warn fails open", policy(func(s *policyv1alpha1.ImagePolicySpec) { s.Action = policyv1alpha1.ImageActionWarn }), endpoint, false, true, admissionv1.Ignore, false},
		{"no webhook served: no configuration", policy(nil), nil, false, false, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := CompileAdmission(tt.policy, tt.endpoint, "orderly-system")
			if (a.VAP != nil) != tt.wantVAP || (a.Webhook != nil) != tt.wantWebhook {
				t.Fatalf("VAP %v webhook %v", a.VAP != nil, a.Webhook != nil)
			}
			if a.Webhook != nil {
				w := a.Webhook.Webhooks[0]
				if *w.FailurePolicy != tt.wantFailure || *w.ClientConfig.URL != "https://127.0.0.1:9443/imagepolicy/prod" {
					t.Errorf("webhook %+v", w)
				}
				if !strings.Contains(w.MatchConditions[0].Expression, `"orderly-system"`) {
					t.Errorf("the manager's namespace is not excluded: %s", w.MatchConditions[0].Expression)
				}
				for _, r := range w.Rules {
					for _, op := range r.Operations {
						if op == admissionv1.Delete {
							t.Error("DELETE is checked")
						}
					}
				}
			}
			if a.VAPBinding != nil && (a.VAPBinding.Spec.ValidationActions[0] == admissionv1.Deny) != tt.wantBindingActionIsDeny {
				t.Errorf("binding actions %v", a.VAPBinding.Spec.ValidationActions)
			}
		})
	}
}

// requireDigest.rewrite adds a mutating webhook that fails open (the native check
// still refuses tags); without a served webhook, or without rewrite, there is none.
func TestCompileRewrite(t *testing.T) {
	endpoint := &admission.Endpoint{URL: "https://127.0.0.1:9443", CABundle: []byte("ca")}
	rewrite := policy(func(s *policyv1alpha1.ImagePolicySpec) {
		s.RequireDigest = &policyv1alpha1.RequireDigest{Enabled: true, Rewrite: true}
	})
	a := CompileAdmission(rewrite, endpoint, "orderly-system")
	if a.Mutating == nil || a.VAP == nil {
		t.Fatalf("mutating %v, VAP %v: want both", a.Mutating != nil, a.VAP != nil)
	}
	w := a.Mutating.Webhooks[0]
	if *w.FailurePolicy != admissionv1.Ignore || *w.ClientConfig.URL != "https://127.0.0.1:9443/imagepolicy-mutate/prod" ||
		*w.ReinvocationPolicy != admissionv1.IfNeededReinvocationPolicy || *w.SideEffects != admissionv1.SideEffectClassNoneOnDryRun {
		t.Errorf("mutating webhook %+v", w)
	}
	if CompileAdmission(rewrite, nil, "orderly-system").Mutating != nil {
		t.Error("a mutating webhook without a webhook served")
	}
	enabledOnly := policy(func(s *policyv1alpha1.ImagePolicySpec) {
		s.RequireDigest = &policyv1alpha1.RequireDigest{Enabled: true}
	})
	if CompileAdmission(enabledOnly, endpoint, "orderly-system").Mutating != nil {
		t.Error("a mutating webhook without rewrite")
	}
}

// Every admission object a policy compiles to matches every way an image reaches a
// node, the ephemeral containers of `kubectl debug` among them.
func TestCompiledAdmissionMatchesEphemeralContainers(t *testing.T) {
	endpoint := &admission.Endpoint{URL: "https://127.0.0.1:9443", CABundle: []byte("ca")}
	p := policy(func(s *policyv1alpha1.ImagePolicySpec) {
		s.AllowedRegistries = []string{"r.io/*"}
		s.RequireDigest = &policyv1alpha1.RequireDigest{Enabled: true, Rewrite: true}
	})
	a := CompileAdmission(p, endpoint, "orderly-system")
	matches := func(rules []admissionv1.RuleWithOperations) bool {
		for _, r := range rules {
			for _, res := range r.Resources {
				if res == "pods/ephemeralcontainers" && slices.Contains(r.Operations, admissionv1.Update) {
					return true
				}
			}
		}
		return false
	}
	var vapRules []admissionv1.RuleWithOperations
	for _, r := range a.VAP.Spec.MatchConstraints.ResourceRules {
		vapRules = append(vapRules, r.RuleWithOperations)
	}
	for name, rules := range map[string][]admissionv1.RuleWithOperations{
		"ValidatingAdmissionPolicy": vapRules, "validating webhook": a.Webhook.Webhooks[0].Rules, "mutating webhook": a.Mutating.Webhooks[0].Rules,
	} {
		if !matches(rules) {
			t.Errorf("the %s does not match pods/ephemeralcontainers: %+v", name, rules)
		}
	}
}
