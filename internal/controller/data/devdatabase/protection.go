package devdatabase

import (
	"context"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// spec.deletionProtected is enforced by the API server, with a
// ValidatingAdmissionPolicy the controller installs when it starts (and puts back
// every few minutes should someone delete or change it): no webhook, so the
// protection holds while Orderly is down. The finalizer is the second line: a
// protected DevDatabase deleted anyway (before the policy was installed, or
// protected after its deletion began) keeps its database until the flag is lifted.

// ProtectionPolicyName names the policy and its binding.
const ProtectionPolicyName = "orderly-devdatabase-deletion-protection"

// protectionInterval is how often the policy is applied again.
const protectionInterval = 5 * time.Minute

// protectionPolicy is the policy that refuses to delete a protected DevDatabase,
// and its binding (every namespace).
func protectionPolicy() (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	meta := metav1.ObjectMeta{Name: ProtectionPolicyName, Labels: map[string]string{labels.ManagedBy: labels.ManagedByValue}}
	equivalent := admissionv1.Equivalent
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: meta,
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Delete},
					Rule: admissionv1.Rule{APIGroups: []string{datav1alpha1.GroupVersion.Group}, APIVersions: []string{"*"},
						Resources: []string{"devdatabases"}, Scope: ptr.To(admissionv1.NamespacedScope)},
				}}},
				MatchPolicy:       &equivalent,
				NamespaceSelector: &metav1.LabelSelector{},
				ObjectSelector:    &metav1.LabelSelector{},
			},
			Validations: []admissionv1.Validation{{
				Expression: "!(has(oldObject.spec.deletionProtected) && oldObject.spec.deletionProtected)",
				Message:    "this DevDatabase is deletion-protected (spec.deletionProtected: true); set spec.deletionProtected to false, then delete it",
				MessageExpression: `'DevDatabase ' + oldObject.metadata.namespace + '/' + oldObject.metadata.name + ` +
					`' is deletion-protected (spec.deletionProtected: true); to delete it, first run: kubectl patch devdatabase ' + ` +
					`oldObject.metadata.name + ' -n ' + oldObject.metadata.namespace + ' --type merge -p ' + "'" + '{"spec":{"deletionProtected":false}}' + "'"`,
				Reason: ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: meta,
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        ProtectionPolicyName,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	return policy, binding
}

// protectionInstaller applies the policy when the manager starts leading, and again
// every protectionInterval.
type protectionInstaller struct {
	c client.Client
}

func (p protectionInstaller) NeedLeaderElection() bool { return true }

func (p protectionInstaller) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithValues("validatingAdmissionPolicy", ProtectionPolicyName)
	wait := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		if err := applyProtectionPolicy(ctx, p.c); err != nil {
			logger.Error(err, "Applying the DevDatabase deletion protection ValidatingAdmissionPolicy; retrying")
			wait = 10 * time.Second
			continue
		}
		wait = protectionInterval
	}
}

// applyProtectionPolicy writes the policy and its binding with server-side apply,
// which changes nothing when they are as they should be.
func applyProtectionPolicy(ctx context.Context, c client.Client) error {
	policy, binding := protectionPolicy()
	if err := kit.Apply(ctx, c, policy); err != nil {
		return err
	}
	return kit.Apply(ctx, c, binding)
}
