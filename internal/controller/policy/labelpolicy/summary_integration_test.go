//go:build integration

package labelpolicy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/controller/policy/labelpolicy/labelpolicytest"
)

// TestComplianceSummary: the audit reports workloads and violations per namespace and
// per tenant (the namespace's tenancy.orderly.dev/tenant label) in status and metrics.
func TestComplianceSummary(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNS(t, "sum-shop-a", map[string]string{"test": "sum", "tenancy.orderly.dev/tenant": "sum-shop"})
	createNS(t, "sum-shop-b", map[string]string{"test": "sum", "tenancy.orderly.dev/tenant": "sum-shop"})
	createNS(t, "sum-loose", map[string]string{"test": "sum"})
	g.Expect(k.Create(ctx, deployment("sum-shop-a", "ok", map[string]string{"cc-sum": "x"}))).To(Succeed())
	g.Expect(k.Create(ctx, deployment("sum-shop-a", "bad", nil))).To(Succeed())
	g.Expect(k.Create(ctx, deployment("sum-shop-b", "bad", nil))).To(Succeed())
	g.Expect(k.Create(ctx, deployment("sum-loose", "ok", map[string]string{"cc-sum": "y"}))).To(Succeed())

	createPolicy(t, newPolicy("sum", "cc-sum", policyv1alpha1.ActionAudit))
	g.Eventually(func(g Gomega) {
		got := getPolicy(g, "sum")
		g.Expect(got.Status.Workloads).To(Equal(int32(4)))
		g.Expect(got.Status.Violations).To(Equal(int32(2)))
		g.Expect(got.Status.Namespaces).To(Equal([]policyv1alpha1.ComplianceSummary{
			{Name: "sum-shop-a", Workloads: 2, Violations: 1},
			{Name: "sum-shop-b", Workloads: 1, Violations: 1},
			{Name: "sum-loose", Workloads: 1, Violations: 0},
		}))
		g.Expect(got.Status.Tenants).To(Equal([]policyv1alpha1.ComplianceSummary{
			{Name: "sum-shop", Workloads: 3, Violations: 2, Namespaces: 2},
			{Name: "(none)", Workloads: 1, Violations: 0, Namespaces: 1},
		}))
		g.Expect(got.Status.OtherNamespaces).To(BeNil())
		g.Expect(labelpolicytest.SeriesOf(g, "orderly_labelpolicy_tenant_violations", "tenant", "sum-shop")).To(Equal(1))
		g.Expect(labelpolicytest.SeriesOf(g, "orderly_labelpolicy_workloads", MetricLabel, "sum")).To(Equal(1))
	}, timeout, poll).Should(Succeed())
}
