//go:build integration

package labelpolicy

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/testing/testenv"
)

// TestPoliciesNeverBlockProtectedNamespaces plays the careless platform admin: a Deny
// and a Default policy that match every namespace. They are enforced everywhere else,
// but a Deployment in the manager's namespace (Orderly's own), in kube-system or in
// any other kube-* namespace is admitted and left as it was, and the audit does not
// count it. It runs on an API server of its own, so that policies matching everything
// meet no other test (envtest has no garbage collector to remove their admission
// objects).
func TestPoliciesNeverBlockProtectedNamespaces(t *testing.T) {
	const managerNS = "orderly-system"
	g := NewWithT(t)
	env := testenv.StartForTest(t)
	c, ctx := env.Client, context.Background()
	served, err := admission.ServesMutatingAdmissionPolicy(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	env.StartManagerForTest(t, kit.Deps{Admission: admission.Config{Mode: admission.Auto, MAPServed: served}, Namespace: managerNS},
		[]kit.Controller{withAuditEvery(time.Second)})

	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: managerNS}},
		{ObjectMeta: metav1.ObjectMeta{Name: "kube-addons"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"cc-default": "from-ns"}}},
	} {
		g.Expect(c.Create(ctx, ns)).To(Succeed())
	}
	// Workloads that were there before the policies, one per namespace.
	for _, ns := range []string{managerNS, "kube-system", "kube-addons", "shop"} {
		g.Expect(c.Create(ctx, deployment(ns, "before", nil))).To(Succeed())
	}
	deny := &policyv1alpha1.LabelPolicy{ObjectMeta: metav1.ObjectMeta{Name: "everywhere-deny"},
		Spec: policyv1alpha1.LabelPolicySpec{Label: "cc-deny", Action: policyv1alpha1.ActionDeny}}
	def := &policyv1alpha1.LabelPolicy{ObjectMeta: metav1.ObjectMeta{Name: "everywhere-default"},
		Spec: policyv1alpha1.LabelPolicySpec{Label: "cc-default", Action: policyv1alpha1.ActionDefault}}
	g.Expect(c.Create(ctx, deny)).To(Succeed())
	g.Expect(c.Create(ctx, def)).To(Succeed())

	// Enforced elsewhere: a Deployment without cc-deny is rejected, one with it gets
	// cc-default filled in from its namespace (where the API server fills labels in).
	g.Eventually(func() error {
		d := deployment("shop", "", nil)
		d.GenerateName = "probe-"
		err := c.Create(ctx, d)
		if err == nil {
			_ = c.Delete(ctx, d)
		}
		return err
	}, timeout, poll).Should(MatchError(ContainSubstring("has no label cc-deny")))
	if served {
		g.Eventually(func(g Gomega) {
			d := deployment("shop", "", map[string]string{"cc-deny": "x"})
			d.GenerateName = "probe-"
			g.Expect(c.Create(ctx, d)).To(Succeed())
			_ = c.Delete(ctx, d)
			g.Expect(d.Labels).To(HaveKeyWithValue("cc-default", "from-ns"))
		}, timeout, poll).Should(Succeed())
	}

	for _, ns := range []string{managerNS, "kube-system", "kube-addons"} {
		d := deployment(ns, "orderly-manager", nil)
		g.Expect(c.Create(ctx, d)).To(Succeed(), "a policy blocked a Deployment in %s", ns)
		g.Expect(d.Labels).NotTo(HaveKey("cc-default"), "a policy filled a label in in %s", ns)
		d.Spec.Replicas = ptr.To(int32(2))
		g.Expect(c.Update(ctx, d)).To(Succeed(), "a policy blocked an update in %s", ns)
	}

	for _, p := range []*policyv1alpha1.LabelPolicy{deny, def} {
		g.Eventually(func(g Gomega) {
			var got policyv1alpha1.LabelPolicy
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
			g.Expect(got.Status.ProtectedNamespaces).To(Equal([]string{"kube-*", managerNS}))
			g.Expect(got.Status.LastAuditTime).NotTo(BeNil())
			// Only shop/before: the protected namespaces are not audited.
			g.Expect(got.Status.TopViolations).To(ConsistOf(policyv1alpha1.Violation{Kind: "Deployment", Namespace: "shop", Name: "before", Reason: policyv1alpha1.ViolationMissing}))
		}, timeout, poll).Should(Succeed())
	}
}
