package devdatabase

import (
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
)

// The policy matches only deletions of DevDatabases, refuses (Deny) in every
// namespace, and fails closed.
func TestProtectionPolicy(t *testing.T) {
	policy, binding := protectionPolicy()
	if *policy.Spec.FailurePolicy != admissionv1.Fail {
		t.Errorf("failurePolicy %s", *policy.Spec.FailurePolicy)
	}
	rules := policy.Spec.MatchConstraints.ResourceRules
	if len(rules) != 1 || len(rules[0].Operations) != 1 || rules[0].Operations[0] != admissionv1.Delete ||
		len(rules[0].Resources) != 1 || rules[0].Resources[0] != "devdatabases" || rules[0].APIGroups[0] != "data.orderly.dev" {
		t.Errorf("rules %+v", rules)
	}
	if binding.Spec.PolicyName != policy.Name || len(binding.Spec.ValidationActions) != 1 || binding.Spec.ValidationActions[0] != admissionv1.Deny ||
		binding.Spec.MatchResources != nil {
		t.Errorf("binding %+v", binding.Spec)
	}
}
