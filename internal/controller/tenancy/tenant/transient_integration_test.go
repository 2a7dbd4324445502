//go:build integration

package tenant

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

// refuseQuotas has the API server refuse the Tenant's ResourceQuota in namespaces
// whose name starts with prefix, until the returned func lifts the refusal. It
// returns once the refusal is in force.
func refuseQuotas(t *testing.T, prefix string) (lift func()) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "test-refuse-quotas"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"resourcequotas"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!object.metadata.namespace.startsWith('" + prefix + "') || object.metadata.name != '" + quotaName + "'",
				Message:    "refused by the test",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-refuse-quotas"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	g.Expect(k.Create(ctx, policy)).To(Succeed())
	g.Expect(k.Create(ctx, binding)).To(Succeed())
	lift = func() {
		_ = k.Delete(context.Background(), binding)
		_ = k.Delete(context.Background(), policy)
	}
	t.Cleanup(lift)

	// Policies take effect a moment after they are written: probe until refused.
	probeNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "probe"}}
	g.Expect(k.Create(ctx, probeNS)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), probeNS) })
	g.Eventually(func(g Gomega) {
		probe := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: probeNS.Name, Name: quotaName},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}}}
		err := k.Create(ctx, probe)
		if err == nil {
			_ = k.Delete(ctx, probe)
		}
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "not refused yet: %v", err)
	}, timeout, poll).Should(Succeed())
	return lift
}

// TestTenantReportsNoRepairOfWhatFailedToBeCreated: objects a first reconcile failed
// to create (here refused by an admission policy; in a cluster, an API server that
// went away half-way) are created by a later reconcile, without being reported as
// drift repaired: nobody deleted them, they never existed. The status of the failed
// reconcile, written for the current generation, must not make them look repaired.
func TestTenantReportsNoRepairOfWhatFailedToBeCreated(t *testing.T) {
	g := NewWithT(t)
	lift := refuseQuotas(t, "echo-")
	b := newTenant("echo", "echo-a", "echo-b").owners("erin")
	b.t.Spec.Quota = &tenancyv1alpha1.TenantQuota{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("20")}}
	tn := b.create(t)

	g.Eventually(func(g Gomega) {
		got := getTenant(g, tn.Name)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(got.Status.Namespaces).To(HaveLen(2))
		for _, ns := range got.Status.Namespaces {
			g.Expect(ns.State).To(Equal(tenancyv1alpha1.NamespaceFailed), ns.Name)
		}
	}, timeout, poll).Should(Succeed())

	lift()
	waitReady(t, tn.Name)
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: "echo-b", Name: quotaName}, &corev1.ResourceQuota{})).To(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(eventReasons(g, tn.Name)).NotTo(ContainElement("Repaired"))
	}, 2*time.Second, poll).Should(Succeed())
}
