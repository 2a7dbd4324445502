//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

// TestLabelPolicyExceptionExpires plays a platform team that grants a namespace a
// short exception: while it is active a Deployment without the label is admitted
// there (and refused elsewhere); when it expires, with no edit of the policy and no
// restart of the manager, the same Deployment is refused, and status says Expired.
func TestLabelPolicyExceptionExpires(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := policyClient(t)
	createNamespace(t, "e2e-lp-exc-legacy", map[string]string{"e2e-labelpolicy": "e2e-exc"})
	createNamespace(t, "e2e-lp-exc-other", map[string]string{"e2e-labelpolicy": "e2e-exc"})
	expires := time.Now().Add(40 * time.Second).Truncate(time.Second)
	p := labelPolicy("e2e-exc", policyv1alpha1.ActionDeny)
	p.Spec.Exceptions = []policyv1alpha1.LabelPolicyException{{
		Name: "migration", Namespaces: []string{"e2e-lp-exc-legacy"}, Reason: "moving to the new billing",
		Expires: metav1.NewTime(expires),
	}}
	g.Expect(c.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	waitPolicyReady(g, c, p.Name)

	// Enforced elsewhere: the API server has the policy.
	g.Eventually(func() error {
		d := deployment("e2e-lp-exc-other", "unlabelled", 0)
		err := k.Create(ctx, d)
		if err == nil {
			_ = k.Delete(ctx, d)
		}
		return err
	}, timeout, poll).Should(MatchError(ContainSubstring("has no label cost-center")))
	g.Expect(k.Create(ctx, deployment("e2e-lp-exc-legacy", "before", 0))).To(Succeed(), "the exception admits its namespace's workloads")
	g.Expect(time.Now().Before(expires)).To(BeTrue(), "the test was too slow to see the exception active")
	var got policyv1alpha1.LabelPolicy
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
	g.Expect(got.Status.Exceptions).To(ConsistOf(HaveField("State", policyv1alpha1.ExceptionActive)))

	g.Eventually(func() error {
		d := deployment("e2e-lp-exc-legacy", "after", 0)
		err := k.Create(ctx, d)
		if err == nil {
			_ = k.Delete(ctx, d)
		}
		return err
	}, time.Until(expires)+timeout, poll).Should(MatchError(ContainSubstring("has no label cost-center")))
	g.Expect(time.Now().After(expires)).To(BeTrue(), "refused before the exception expired")

	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
		g.Expect(got.Status.Exceptions).To(ConsistOf(HaveField("State", policyv1alpha1.ExceptionExpired)))
		g.Expect(got.Status.Violations).To(BeNumerically(">=", 1), "the Deployment the exception admitted is a violation now")
	}, timeout, poll).Should(Succeed())
}

// TestLabelPolicyRemediationNamesWorkloads: with remediate LabelOnly, the workload
// Orderly labelled is named in status, with the value written and the time.
func TestLabelPolicyRemediationNamesWorkloads(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := policyClient(t)
	createNamespace(t, "e2e-lp-remnames", map[string]string{"e2e-labelpolicy": "e2e-remnames", "cost-center": "cc-5"})
	g.Expect(k.Create(ctx, deployment("e2e-lp-remnames", "unlabelled", 0))).To(Succeed())
	p := labelPolicy("e2e-remnames", policyv1alpha1.ActionAudit)
	p.Spec.Remediate = policyv1alpha1.RemediateLabelOnly
	g.Expect(c.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })

	g.Eventually(func(g Gomega) {
		var got policyv1alpha1.LabelPolicy
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
		g.Expect(got.Status.RecentlyRemediated).To(ContainElement(And(
			HaveField("Kind", "Deployment"), HaveField("Namespace", "e2e-lp-remnames"),
			HaveField("Name", "unlabelled"), HaveField("Value", "cc-5"))))
	}, timeout, poll).Should(Succeed())
}

// TestLabelPolicyValuesFromLabelValueSet plays finance keeping the cost centres in a
// LabelValueSet: an active value is admitted, a retired one refused with a message
// that says it is retired, and a value finance adds is admitted without anyone
// editing the LabelPolicy.
func TestLabelPolicyValuesFromLabelValueSet(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := policyClient(t)
	createNamespace(t, "e2e-lp-values", map[string]string{"e2e-labelpolicy": "e2e-values"})
	set := &policyv1alpha1.LabelValueSet{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-cost-centers"},
		Spec: policyv1alpha1.LabelValueSetSpec{Values: []policyv1alpha1.LabelValue{
			{Value: "cc-1"}, {Value: "cc-old", Active: ptr.To(false)},
		}},
	}
	g.Expect(c.Create(ctx, set)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), set) })
	p := labelPolicy("e2e-values", policyv1alpha1.ActionDeny)
	p.Spec.AllowedValuesFrom = &policyv1alpha1.AllowedValuesSource{LabelValueSet: set.Name}
	g.Expect(c.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	waitPolicyReady(g, c, p.Name)

	create := func(name, value string) error {
		d := deployment("e2e-lp-values", name, 0)
		d.Labels = map[string]string{"cost-center": value}
		err := k.Create(ctx, d)
		if err == nil {
			_ = k.Delete(ctx, d)
		}
		return err
	}
	g.Eventually(func() error { return create("retired", "cc-old") }, timeout, poll).
		Should(MatchError(ContainSubstring("cost-center=cc-old, which is retired in LabelValueSet e2e-cost-centers")))
	g.Expect(create("active", "cc-1")).To(Succeed())
	g.Expect(create("new", "cc-new")).To(MatchError(ContainSubstring("which is not allowed")))

	// Read again on a conflict: the set's status is written meanwhile.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(set), set); err != nil {
			return err
		}
		set.Spec.Values = append(set.Spec.Values, policyv1alpha1.LabelValue{Value: "cc-new"})
		return c.Update(ctx, set)
	})).To(Succeed())
	g.Eventually(func() error { return create("new", "cc-new") }, timeout, poll).Should(Succeed())
	var got policyv1alpha1.LabelPolicy
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
	g.Expect(got.Generation).To(Equal(int64(1)), "nobody edited the policy")
}

// TestLabelPolicyComplianceByTenant plays finance charting coverage: the audit sums
// workloads and violations per tenant (the namespaces' tenancy.orderly.dev/tenant
// label) in status and in the metrics, without a report object per workload.
func TestLabelPolicyComplianceByTenant(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := policyClient(t)
	for _, ns := range []string{"e2e-lp-sum-a", "e2e-lp-sum-b"} {
		createNamespace(t, ns, map[string]string{"e2e-labelpolicy": "e2e-sum", "tenancy.orderly.dev/tenant": "e2e-sum-shop"})
	}
	g.Expect(k.Create(ctx, deployment("e2e-lp-sum-a", "unlabelled", 0))).To(Succeed())
	labelled := deployment("e2e-lp-sum-b", "labelled", 0)
	labelled.Labels = map[string]string{"cost-center": "cc-1"}
	g.Expect(k.Create(ctx, labelled)).To(Succeed())
	p := labelPolicy("e2e-sum", policyv1alpha1.ActionAudit)
	g.Expect(c.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })

	g.Eventually(func(g Gomega) {
		var got policyv1alpha1.LabelPolicy
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
		g.Expect(got.Status.Tenants).To(ConsistOf(policyv1alpha1.ComplianceSummary{Name: "e2e-sum-shop", Workloads: 2, Violations: 1, Namespaces: 2}))
	}, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		body, err := httpGet(metricsURL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(body)).To(ContainSubstring(`orderly_labelpolicy_tenant_violations{labelpolicy="e2e-sum",tenant="e2e-sum-shop"} 1`))
		g.Expect(string(body)).To(ContainSubstring(`orderly_labelpolicy_tenant_workloads{labelpolicy="e2e-sum",tenant="e2e-sum-shop"} 2`))
	}, timeout, poll).Should(Succeed())
}

// TestLabelPolicyDefaultFromTenant plays a platform team whose Tenants carry the cost
// center: with the real Tenant controller writing the namespace (its labels and the
// owner-uid claim) and the manager running with its own RBAC (reading Tenants), a
// Deployment created right after someone removed the namespace's cost-center label by
// hand still gets the Tenant's costCenter, not the policy's defaultValue, and a changed
// costCenter is filled in without an edit of the LabelPolicy.
func TestLabelPolicyDefaultFromTenant(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := policyClient(t)
	tn := tenant("e2e-lp-tenant", "Delete")
	tn.Spec.Namespaces = []tenancyv1alpha1.TenantNamespace{{Name: "e2e-lp-tenant-a", Labels: map[string]string{"e2e-labelpolicy": "e2e-tfrom"}}}
	tn.Spec.CostCenter = "cc-t1"
	g.Expect(k.Create(ctx, tn)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), tn) })
	waitTenantReady(g, tn.Name)

	p := labelPolicy("e2e-tfrom", policyv1alpha1.ActionDefault)
	p.Spec.DefaultFromTenant = true
	p.Spec.DefaultValue = "cc-default"
	g.Expect(c.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	g.Eventually(func(g Gomega) {
		got := waitPolicyReady(g, c, p.Name)
		g.Expect(got.Status.TenantDefaults).To(BeNumerically(">=", 1), "the manager reads Tenants with its own RBAC")
	}, timeout, poll).Should(Succeed())

	admitted := func(g Gomega) string {
		d := deployment("e2e-lp-tenant-a", "probe", 0)
		g.Expect(k.Create(ctx, d, client.DryRunAll)).To(Succeed())
		return d.Labels["cost-center"]
	}
	g.Eventually(admitted, timeout, poll).Should(Equal("cc-t1"))

	// Removed by hand: the next create, at once, still gets the Tenant's value (the
	// Tenant controller puts the label back later; the policy does not wait for it).
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-lp-tenant-a"}}
	g.Expect(k.Patch(ctx, ns, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"cost-center":null}}}`)))).To(Succeed())
	d := deployment("e2e-lp-tenant-a", "web", 0)
	g.Expect(k.Create(ctx, d)).To(Succeed())
	g.Expect(d.Labels).To(HaveKeyWithValue("cost-center", "cc-t1"))

	g.Expect(k.Get(ctx, client.ObjectKeyFromObject(tn), tn)).To(Succeed())
	tn.Spec.CostCenter = "cc-t2"
	g.Expect(k.Update(ctx, tn)).To(Succeed())
	g.Eventually(admitted, timeout, poll).Should(Equal("cc-t2"))
	var got policyv1alpha1.LabelPolicy
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
	g.Expect(got.Generation).To(Equal(int64(1)), "nobody edited the policy")
}
