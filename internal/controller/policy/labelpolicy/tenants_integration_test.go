//go:build integration

package labelpolicy

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/controller/policy/labelpolicy/labelpolicytest"
)

// admittedLabel creates a Deployment without the cost-center label in ns as a dry run
// and returns the value admission gave it.
func admittedLabel(g Gomega, ns string) string {
	d := deployment(ns, "probe", nil)
	g.Expect(k.Create(context.Background(), d, client.DryRunAll)).To(Succeed())
	return d.Labels[tenancyv1alpha1.CostCenterLabel]
}

// TestDefaultFromTenant: with defaultFromTenant, a workload in a Tenant's namespace
// gets the Tenant's costCenter even after the namespace's cost-center label was
// removed or changed by hand, the drift is reported (status, Event, metric), a
// namespace that merely carries the tenant label without the Tenant's UID does not
// get it, and a changed costCenter is admitted without any edit of the policy.
func TestDefaultFromTenant(t *testing.T) {
	if !mapServed {
		t.Fatal("the test API server does not serve MutatingAdmissionPolicy")
	}
	g := NewWithT(t)
	ctx := context.Background()

	// The Tenant controller does not run here: the test writes what it writes (the
	// tenant label, the cost-center label and the owner-uid claim).
	tn := &tenancyv1alpha1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Name: "tf-shop"},
		Spec: tenancyv1alpha1.TenantSpec{
			Namespaces: []tenancyv1alpha1.TenantNamespace{{Name: "tf-shop-a"}},
			CostCenter: "cc-shop",
		},
	}
	g.Expect(k.Create(ctx, tn)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), tn) })
	shop := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tf-shop-a",
		Labels:      map[string]string{"test": "tfrom", tenancyv1alpha1.TenantLabel: "tf-shop", tenancyv1alpha1.CostCenterLabel: "cc-shop"},
		Annotations: map[string]string{tenancyv1alpha1.OwnerUIDAnnotation: string(tn.UID)},
	}}
	g.Expect(k.Create(ctx, shop)).To(Succeed())
	// Labelled for the Tenant by someone, but not claimed by it.
	createNS(t, "tf-forged", map[string]string{"test": "tfrom", tenancyv1alpha1.TenantLabel: "tf-shop"})

	p := newPolicy("tfrom", tenancyv1alpha1.CostCenterLabel, policyv1alpha1.ActionDefault)
	p.Spec.DefaultFromTenant = true
	p.Spec.DefaultValue = "cc-default"
	createPolicy(t, p)
	g.Eventually(func(g Gomega) {
		got := getPolicy(g, "tfrom")
		g.Expect(got.Status.TenantDefaults).To(Equal(int32(1)))
		g.Expect(cond(got, policyv1alpha1.ConditionDefaultingAvailable).Message).To(ContainSubstring("from the costCenter of 1 Tenant(s) first"))
	}, timeout, poll).Should(Succeed())

	// The label is removed by hand: the workload still gets the Tenant's costCenter.
	g.Expect(k.Patch(ctx, shop, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"cost-center":null}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(admittedLabel(g, "tf-shop-a")).To(Equal("cc-shop"))
	}, timeout, poll).Should(Succeed())
	web := deployment("tf-shop-a", "web", nil)
	g.Expect(k.Create(ctx, web)).To(Succeed())
	g.Expect(web.Labels).To(HaveKeyWithValue("cost-center", "cc-shop"))
	// The forged namespace gets defaultValue, not the Tenant's cost center.
	g.Expect(admittedLabel(g, "tf-forged")).To(Equal("cc-default"))

	g.Eventually(func(g Gomega) {
		got := getPolicy(g, "tfrom")
		g.Expect(got.Status.TenantDriftNamespaces).To(Equal(int32(1)))
		g.Expect(got.Status.TenantDrift).To(Equal([]policyv1alpha1.TenantDrift{{Namespace: "tf-shop-a", Tenant: "tf-shop", CostCenter: "cc-shop"}}))
		g.Expect(labelpolicytest.SeriesOf(g, "orderly_labelpolicy_tenant_drift_namespaces", MetricLabel, "tfrom")).To(Equal(1))
	}, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(strings.Join(eventNotes(g, p.UID, ReasonTenantCostCenterDrift), "\n")).To(ContainSubstring("tf-shop-a (Tenant tf-shop has costCenter cc-shop, the namespace no cost-center label)"))
	}, timeout, poll).Should(Succeed())

	// Changed by hand to another value: the Tenant still wins, and the drift says what
	// the namespace has.
	g.Expect(k.Patch(ctx, shop, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"cost-center":"cc-other"}}}`)))).To(Succeed())
	g.Expect(admittedLabel(g, "tf-shop-a")).To(Equal("cc-shop"))
	g.Eventually(func(g Gomega) {
		g.Expect(getPolicy(g, "tfrom").Status.TenantDrift).To(Equal([]policyv1alpha1.TenantDrift{{Namespace: "tf-shop-a", Tenant: "tf-shop", CostCenter: "cc-shop", Value: "cc-other"}}))
	}, timeout, poll).Should(Succeed())

	// The Tenant's costCenter changes: admitted without an edit of the policy.
	g.Expect(k.Get(ctx, client.ObjectKeyFromObject(tn), tn)).To(Succeed())
	tn.Spec.CostCenter = "cc-shop2"
	g.Expect(k.Update(ctx, tn)).To(Succeed())
	start := time.Now()
	g.Eventually(func(g Gomega) {
		g.Expect(admittedLabel(g, "tf-shop-a")).To(Equal("cc-shop2"))
	}, timeout, 50*time.Millisecond).Should(Succeed())
	t.Logf("A changed Tenant costCenter was admitted %v after the Tenant's update", time.Since(start).Round(10*time.Millisecond))

	// The namespace label back in line with the Tenant: no drift.
	g.Expect(k.Patch(ctx, shop, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"cost-center":"cc-shop2"}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := getPolicy(g, "tfrom")
		g.Expect(got.Status.TenantDrift).To(BeEmpty())
		g.Expect(got.Status.TenantDriftNamespaces).To(BeZero())
	}, timeout, poll).Should(Succeed())
}

// TestDefaultFromTenantValidation: the API server refuses defaultFromTenant where
// nothing could be filled in from the Tenant.
func TestDefaultFromTenantValidation(t *testing.T) {
	ctx := context.Background()
	for name, mod := range map[string]func(*policyv1alpha1.LabelPolicy){
		"another label":            func(p *policyv1alpha1.LabelPolicy) { p.Spec.Label = "team" },
		"deny without remediation": func(p *policyv1alpha1.LabelPolicy) { p.Spec.Action = policyv1alpha1.ActionDeny },
	} {
		t.Run(name, func(t *testing.T) {
			p := newPolicy("tfrom-invalid", tenancyv1alpha1.CostCenterLabel, policyv1alpha1.ActionDefault)
			p.Spec.DefaultFromTenant = true
			mod(p)
			err := k.Create(ctx, p)
			if err == nil {
				_ = k.Delete(ctx, p)
			}
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring("defaultFromTenant needs label cost-center")))
		})
	}
	p := newPolicy("tfrom-valid", tenancyv1alpha1.CostCenterLabel, policyv1alpha1.ActionDeny)
	p.Spec.DefaultFromTenant = true
	p.Spec.Remediate = policyv1alpha1.RemediateLabelOnly
	NewWithT(t).Expect(k.Create(ctx, p, client.DryRunAll)).To(Succeed())
}
