//go:build integration

package tenant

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

// tenantBuilder builds test Tenants.
type tenantBuilder struct{ t *tenancyv1alpha1.Tenant }

func newTenant(name string, namespaces ...string) *tenantBuilder {
	t := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, ns := range namespaces {
		t.Spec.Namespaces = append(t.Spec.Namespaces, tenancyv1alpha1.TenantNamespace{Name: ns})
	}
	return &tenantBuilder{t: t}
}

func (b *tenantBuilder) owners(users ...string) *tenantBuilder {
	for _, u := range users {
		b.t.Spec.Owners = append(b.t.Spec.Owners, rbacv1.Subject{Kind: rbacv1.UserKind, Name: u})
	}
	return b
}

func (b *tenantBuilder) full() *tenantBuilder {
	b.t.Spec.CostCenter = "cc-1234"
	b.t.Spec.Quota = &tenancyv1alpha1.TenantQuota{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("20")}}
	b.t.Spec.LimitRange = &tenancyv1alpha1.TenantLimitRange{
		Default:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
		DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
	}
	b.t.Spec.NetworkPolicy.AllowFrom = []tenancyv1alpha1.TenantNamespaceSelector{{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "ingress"}}}
	b.t.Spec.AdditionalRoleBindings = []tenancyv1alpha1.TenantRoleBinding{{
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "auditors"}},
	}}
	return b
}

func (b *tenantBuilder) policy(p tenancyv1alpha1.DeletionPolicy) *tenantBuilder {
	b.t.Spec.DeletionPolicy = p
	return b
}

func (b *tenantBuilder) create(t *testing.T) *tenancyv1alpha1.Tenant {
	t.Helper()
	NewWithT(t).Expect(k.Create(context.Background(), b.t)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), b.t) })
	return b.t
}

func getTenant(g Gomega, name string) *tenancyv1alpha1.Tenant {
	var t tenancyv1alpha1.Tenant
	g.Expect(k.Get(context.Background(), client.ObjectKey{Name: name}, &t)).To(Succeed())
	return &t
}

func condition(t *tenancyv1alpha1.Tenant, typ string) *metav1.Condition {
	return meta.FindStatusCondition(t.Status.Conditions, typ)
}

// waitReady waits until the Tenant reports Ready for its current generation.
func waitReady(t *testing.T, name string) *tenancyv1alpha1.Tenant {
	t.Helper()
	var got *tenancyv1alpha1.Tenant
	NewWithT(t).Eventually(func(g Gomega) {
		got = getTenant(g, name)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		c := condition(got, tenancyv1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
	}, timeout, poll).Should(Succeed())
	return got
}

func getNS(g Gomega, name string) *corev1.Namespace {
	var ns corev1.Namespace
	g.Expect(k.Get(context.Background(), client.ObjectKey{Name: name}, &ns)).To(Succeed())
	return &ns
}

func TestTenantCreatesEverythingDeclared(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant("alpha", "alpha-dev", "alpha-prod").owners("alice").full().create(t)
	got := waitReady(t, tn.Name)

	g.Expect(got.Status.NamespaceCount).To(BeEquivalentTo(2))
	g.Expect(got.Status.ReadyNamespaces).To(BeEquivalentTo(2))
	g.Expect(got.Status.Namespaces).To(HaveLen(2))
	g.Expect(got.Finalizers).To(ContainElement(finalizer))
	g.Expect(condition(got, tenancyv1alpha1.ConditionNamespaceConflict).Status).To(Equal(metav1.ConditionFalse))

	for _, name := range []string{"alpha-dev", "alpha-prod"} {
		ns := getNS(g, name)
		g.Expect(ns.Labels).To(HaveKeyWithValue(tenancyv1alpha1.TenantLabel, "alpha"))
		g.Expect(ns.Labels).To(HaveKeyWithValue(tenancyv1alpha1.CostCenterLabel, "cc-1234"))
		g.Expect(ns.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "orderly"))
		g.Expect(ns.Annotations).To(HaveKeyWithValue(tenancyv1alpha1.OriginAnnotation, tenancyv1alpha1.OriginCreated))

		var owners rbacv1.RoleBinding
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: name, Name: ownersBindingName}, &owners)).To(Succeed())
		g.Expect(owners.RoleRef.Name).To(Equal(tenancyv1alpha1.TenantAdminClusterRole))
		g.Expect(owners.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "alice"}))
		g.Expect(metav1.IsControlledBy(&owners, got)).To(BeTrue(), "owner reference lets the garbage collector remove it")

		var extra rbacv1.RoleBinding
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: name, Name: extraBindingPrefix + "0"}, &extra)).To(Succeed())
		g.Expect(extra.RoleRef.Name).To(Equal("view"))

		var quota corev1.ResourceQuota
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: name, Name: quotaName}, &quota)).To(Succeed())
		g.Expect(quota.Spec.Hard.Pods().String()).To(Equal("20"))

		var lr corev1.LimitRange
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: name, Name: limitRangeName}, &lr)).To(Succeed())
		g.Expect(lr.Spec.Limits[0].Default.Cpu().String()).To(Equal("500m"))

		var np networkingv1.NetworkPolicy
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: name, Name: networkPolicyName}, &np)).To(Succeed())
		g.Expect(np.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}), "egress (DNS) is never restricted")
		g.Expect(np.Spec.Ingress[0].From).To(HaveLen(2))
	}

	// Converged means quiet: nothing is rewritten while nothing changes.
	var before corev1.ResourceQuota
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "alpha-dev", Name: quotaName}, &before)).To(Succeed())
	nsBefore := getNS(g, "alpha-dev").ResourceVersion
	tenantBefore := getTenant(g, "alpha").ResourceVersion
	g.Consistently(func(g Gomega) {
		var q corev1.ResourceQuota
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "alpha-dev", Name: quotaName}, &q)).To(Succeed())
		g.Expect(q.Spec).To(Equal(before.Spec))
		g.Expect(getNS(g, "alpha-dev").ResourceVersion).To(Equal(nsBefore))
		g.Expect(getTenant(g, "alpha").ResourceVersion).To(Equal(tenantBefore))
	}, "2s", "200ms").Should(Succeed())
}

func TestTenantRepairsDrift(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant("bravo", "bravo-dev").owners("bob").full().create(t)
	waitReady(t, tn.Name)

	// Deleted RoleBinding comes back.
	g.Expect(k.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "bravo-dev", Name: ownersBindingName}})).To(Succeed())
	// Edited quota is reverted.
	var q corev1.ResourceQuota
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "bravo-dev", Name: quotaName}, &q)).To(Succeed())
	q.Spec.Hard[corev1.ResourcePods] = resource.MustParse("999")
	g.Expect(k.Update(ctx, &q)).To(Succeed())
	// Edited NetworkPolicy is reverted.
	var np networkingv1.NetworkPolicy
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "bravo-dev", Name: networkPolicyName}, &np)).To(Succeed())
	np.Spec.Ingress = nil
	g.Expect(k.Update(ctx, &np)).To(Succeed())
	// Deleted LimitRange comes back.
	g.Expect(k.Delete(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "bravo-dev", Name: limitRangeName}})).To(Succeed())
	// Removed and edited namespace labels come back; a label a person added stays.
	ns := getNS(g, "bravo-dev")
	delete(ns.Labels, tenancyv1alpha1.TenantLabel)
	ns.Labels[tenancyv1alpha1.CostCenterLabel] = "someone-else"
	ns.Labels["team-note"] = "kept"
	g.Expect(k.Update(ctx, ns)).To(Succeed())

	g.Eventually(func(g Gomega) {
		var rb rbacv1.RoleBinding
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "bravo-dev", Name: ownersBindingName}, &rb)).To(Succeed())
		var q corev1.ResourceQuota
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "bravo-dev", Name: quotaName}, &q)).To(Succeed())
		g.Expect(q.Spec.Hard.Pods().String()).To(Equal("20"))
		var np networkingv1.NetworkPolicy
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "bravo-dev", Name: networkPolicyName}, &np)).To(Succeed())
		g.Expect(np.Spec.Ingress).To(HaveLen(1))
		var lr corev1.LimitRange
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "bravo-dev", Name: limitRangeName}, &lr)).To(Succeed())
		ns := getNS(g, "bravo-dev")
		g.Expect(ns.Labels).To(HaveKeyWithValue(tenancyv1alpha1.TenantLabel, "bravo"))
		g.Expect(ns.Labels).To(HaveKeyWithValue(tenancyv1alpha1.CostCenterLabel, "cc-1234"))
		g.Expect(ns.Labels).To(HaveKeyWithValue("team-note", "kept"))
	}, timeout, poll).Should(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(eventReasons(g, "bravo")).To(ContainElement("Repaired"))
	}, timeout, poll).Should(Succeed())
}

// eventReasons lists the reasons of the Events about a Tenant.
func eventReasons(g Gomega, tenant string) []string {
	var list eventsv1.EventList
	g.Expect(k.List(context.Background(), &list)).To(Succeed())
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Tenant" && e.Regarding.Name == tenant {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

func TestTenantLeavesForeignNamespaceAloneUntilAdopted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	existing := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "charlie-legacy", Labels: map[string]string{"owner": "legacy-team"}}}
	g.Expect(k.Create(ctx, existing)).To(Succeed())
	tn := newTenant("charlie", "charlie-new", "charlie-legacy").owners("carol").create(t)

	g.Eventually(func(g Gomega) {
		got := getTenant(g, tn.Name)
		c := condition(got, tenancyv1alpha1.ConditionNamespaceConflict)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("charlie-legacy"))
		g.Expect(c.Message).To(ContainSubstring(tenancyv1alpha1.AdoptAnnotation))
		ready := condition(got, tenancyv1alpha1.ConditionReady)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(ReasonNamespaceConflict))
		g.Expect(got.Status.ReadyNamespaces).To(BeEquivalentTo(1))
		g.Expect(eventReasons(g, "charlie")).To(ContainElement(ReasonNamespaceConflict))
	}, timeout, poll).Should(Succeed())
	ns := getNS(g, "charlie-legacy")
	g.Expect(ns.Labels).NotTo(HaveKey(tenancyv1alpha1.TenantLabel), "a foreign namespace is never taken over silently")
	var rbs rbacv1.RoleBindingList
	g.Expect(k.List(ctx, &rbs, client.InNamespace("charlie-legacy"))).To(Succeed())
	g.Expect(rbs.Items).To(BeEmpty())

	// The owner opts in: the namespace is adopted.
	ns.Annotations = map[string]string{tenancyv1alpha1.AdoptAnnotation: "charlie"}
	g.Expect(k.Update(ctx, ns)).To(Succeed())
	waitReady(t, tn.Name)
	ns = getNS(g, "charlie-legacy")
	g.Expect(ns.Labels).To(HaveKeyWithValue(tenancyv1alpha1.TenantLabel, "charlie"))
	g.Expect(ns.Labels).To(HaveKeyWithValue("owner", "legacy-team"))
	g.Expect(ns.Annotations).To(HaveKeyWithValue(tenancyv1alpha1.OriginAnnotation, tenancyv1alpha1.OriginAdopted))
}

func TestTenantDoesNotTakeAnotherTenantsNamespace(t *testing.T) {
	g := NewWithT(t)
	first := newTenant("delta", "shared-ns").create(t)
	waitReady(t, first.Name)
	second := newTenant("echo", "shared-ns", "echo-own").create(t)
	g.Eventually(func(g Gomega) {
		got := getTenant(g, second.Name)
		c := condition(got, tenancyv1alpha1.ConditionNamespaceConflict)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring(`tenant "delta"`))
	}, timeout, poll).Should(Succeed())
	// No flapping: the first tenant stays Ready and keeps the namespace.
	g.Consistently(func(g Gomega) {
		g.Expect(getNS(g, "shared-ns").Labels).To(HaveKeyWithValue(tenancyv1alpha1.TenantLabel, "delta"))
		g.Expect(condition(getTenant(g, "delta"), tenancyv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
	}, "2s", "200ms").Should(Succeed())
}

func TestTenantRefusesToOverwriteForeignObject(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "foxtrot-dev", Annotations: map[string]string{tenancyv1alpha1.AdoptAnnotation: "foxtrot"}}})).To(Succeed())
	foreign := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: "foxtrot-dev", Name: quotaName},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3")}},
	}
	g.Expect(k.Create(ctx, foreign)).To(Succeed())
	b := newTenant("foxtrot", "foxtrot-dev")
	b.t.Spec.Quota = &tenancyv1alpha1.TenantQuota{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("50")}}
	tn := b.create(t)

	g.Eventually(func(g Gomega) {
		got := getTenant(g, tn.Name)
		c := condition(got, tenancyv1alpha1.ConditionResourcesReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring("not managed by this Tenant"))
		g.Expect(got.Status.Namespaces[0].State).To(Equal(tenancyv1alpha1.NamespaceFailed))
	}, timeout, poll).Should(Succeed())
	var q corev1.ResourceQuota
	g.Expect(k.Get(ctx, client.ObjectKeyFromObject(foreign), &q)).To(Succeed())
	g.Expect(q.Spec.Hard.Pods().String()).To(Equal("3"), "an object Orderly did not create is never overwritten")
	g.Expect(q.OwnerReferences).To(BeEmpty())
}

func TestTenantSpecChangesConverge(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant("golf", "golf-a", "golf-b").owners("gina").full().create(t)
	waitReady(t, tn.Name)

	// Drop the quota and the extra binding, change owners, remove golf-b (Retain).
	g.Eventually(func(g Gomega) {
		cur := getTenant(g, tn.Name)
		cur.Spec.Quota = nil
		cur.Spec.AdditionalRoleBindings = nil
		cur.Spec.Owners = []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "golf-admins"}}
		cur.Spec.Namespaces = cur.Spec.Namespaces[:1]
		cur.Spec.Namespaces[0].Labels = map[string]string{"env": "dev"}
		g.Expect(k.Update(ctx, cur)).To(Succeed())
	}, timeout, poll).Should(Succeed())
	waitReady(t, tn.Name)

	g.Eventually(func(g Gomega) {
		err := k.Get(ctx, client.ObjectKey{Namespace: "golf-a", Name: quotaName}, &corev1.ResourceQuota{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "quota removed from the spec is deleted")
		err = k.Get(ctx, client.ObjectKey{Namespace: "golf-a", Name: extraBindingPrefix + "0"}, &rbacv1.RoleBinding{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		var rb rbacv1.RoleBinding
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "golf-a", Name: ownersBindingName}, &rb)).To(Succeed())
		g.Expect(rb.Subjects).To(HaveLen(1))
		g.Expect(rb.Subjects[0].Name).To(Equal("golf-admins"))
		g.Expect(getNS(g, "golf-a").Labels).To(HaveKeyWithValue("env", "dev"))

		// golf-b is retained but released: Orderly's labels and objects are gone.
		b := getNS(g, "golf-b")
		g.Expect(b.DeletionTimestamp).To(BeNil())
		g.Expect(b.Labels).NotTo(HaveKey(tenancyv1alpha1.TenantLabel))
		g.Expect(b.Labels).NotTo(HaveKey(tenancyv1alpha1.CostCenterLabel))
		g.Expect(b.Annotations).NotTo(HaveKey(tenancyv1alpha1.OriginAnnotation))
		var rbs rbacv1.RoleBindingList
		g.Expect(k.List(ctx, &rbs, client.InNamespace("golf-b"))).To(Succeed())
		g.Expect(rbs.Items).To(BeEmpty())
	}, timeout, poll).Should(Succeed())

	// A label removed from the spec is removed from the namespace.
	g.Eventually(func(g Gomega) {
		cur := getTenant(g, tn.Name)
		cur.Spec.Namespaces[0].Labels = nil
		g.Expect(k.Update(ctx, cur)).To(Succeed())
	}, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getNS(g, "golf-a").Labels).NotTo(HaveKey("env"))
	}, timeout, poll).Should(Succeed())
}

func TestTenantDeletionPolicies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	// Retain: the namespace stays, released; the Tenant goes away.
	keep := newTenant("hotel", "hotel-dev").owners("hank").create(t)
	waitReady(t, keep.Name)
	g.Expect(k.Delete(ctx, keep)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k.Get(ctx, client.ObjectKey{Name: keep.Name}, &tenancyv1alpha1.Tenant{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		ns := getNS(g, "hotel-dev")
		g.Expect(ns.DeletionTimestamp).To(BeNil())
		g.Expect(ns.Labels).NotTo(HaveKey(tenancyv1alpha1.TenantLabel))
	}, timeout, poll).Should(Succeed())

	// Delete: a namespace Orderly created is deleted; an adopted one is only released.
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "india-adopted", Annotations: map[string]string{tenancyv1alpha1.AdoptAnnotation: "india"}}})).To(Succeed())
	del := newTenant("india", "india-dev", "india-adopted").policy(tenancyv1alpha1.DeletionPolicyDelete).create(t)
	waitReady(t, del.Name)
	g.Expect(k.Delete(ctx, del)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k.Get(ctx, client.ObjectKey{Name: del.Name}, &tenancyv1alpha1.Tenant{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		// envtest runs no namespace controller: a deleted namespace stays Terminating.
		g.Expect(getNS(g, "india-dev").DeletionTimestamp).NotTo(BeNil())
		adopted := getNS(g, "india-adopted")
		g.Expect(adopted.DeletionTimestamp).To(BeNil(), "Orderly never deletes a namespace it did not create")
		g.Expect(adopted.Labels).NotTo(HaveKey(tenancyv1alpha1.TenantLabel))
		// Issue 10: the adopt annotation hands the namespace over once; it was consumed
		// by the adoption (TestTenantRemovesTheAdoptAnnotationOnceAdopted), so a later
		// Tenant named india does not adopt the namespace again.
		g.Expect(adopted.Annotations).NotTo(HaveKey(tenancyv1alpha1.AdoptAnnotation), "consumed by the adoption")
	}, timeout, poll).Should(Succeed())
}

func TestTenantValidation(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		mutate  func(*tenancyv1alpha1.Tenant)
		wantErr string
	}{
		{"duplicate namespace names", func(t *tenancyv1alpha1.Tenant) {
			t.Spec.Namespaces = append(t.Spec.Namespaces, tenancyv1alpha1.TenantNamespace{Name: "v-one"})
		}, "Duplicate value"},
		{"invalid namespace name", func(t *tenancyv1alpha1.Tenant) { t.Spec.Namespaces[0].Name = "Not_Valid" }, "spec.namespaces[0].name"},
		{"no namespaces", func(t *tenancyv1alpha1.Tenant) { t.Spec.Namespaces = nil }, "spec.namespaces"},
		{"invalid quantity", func(t *tenancyv1alpha1.Tenant) {
			t.Spec.Quota = &tenancyv1alpha1.TenantQuota{Hard: corev1.ResourceList{corev1.ResourceCPU: resource.Quantity{}}}
		}, ""},
		{"unknown isolation", func(t *tenancyv1alpha1.Tenant) { t.Spec.NetworkPolicy.Isolation = "Everything" }, `Unsupported value: "Everything"`},
		{"unknown deletion policy", func(t *tenancyv1alpha1.Tenant) { t.Spec.DeletionPolicy = "Shred" }, `Unsupported value: "Shred"`},
		{"label overrides tenant label", func(t *tenancyv1alpha1.Tenant) {
			t.Spec.Namespaces[0].Labels = map[string]string{tenancyv1alpha1.TenantLabel: "other"}
		}, "labels must not set tenancy.orderly.dev/tenant"},
		{"service account owner without namespace", func(t *tenancyv1alpha1.Tenant) {
			t.Spec.Owners = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "ci"}}
		}, "ServiceAccount subjects need a namespace"},
		{"role ref of another group", func(t *tenancyv1alpha1.Tenant) {
			t.Spec.AdditionalRoleBindings = []tenancyv1alpha1.TenantRoleBinding{{RoleRef: rbacv1.RoleRef{APIGroup: "example.com", Kind: "Role", Name: "x"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "u"}}}}
		}, "roleRef must be a Role or ClusterRole"},
		{"bad cost center", func(t *tenancyv1alpha1.Tenant) { t.Spec.CostCenter = "has spaces" }, "spec.costCenter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			tn := newTenant("validation", "v-one").t
			tt.mutate(tn)
			err := k.Create(ctx, tn)
			if tt.name == "invalid quantity" {
				// A typed client cannot send a malformed quantity; send raw JSON instead.
				err = createRaw(ctx, `{"apiVersion":"tenancy.orderly.dev/v1alpha1","kind":"Tenant","metadata":{"name":"validation-q"},"spec":{"namespaces":[{"name":"v-q"}],"quota":{"hard":{"cpu":"lots"}}}}`)
				tt.wantErr = "spec.quota.hard.cpu"
			}
			g.Expect(err).To(HaveOccurred())
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), err.Error())
			g.Expect(err.Error()).To(ContainSubstring(tt.wantErr))
		})
	}
	t.Run("long tenant name", func(t *testing.T) {
		g := NewWithT(t)
		err := k.Create(ctx, newTenant(strings.Repeat("x", 64), "v-long").t)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("at most 63 characters"))
	})
}

// createRaw creates an object from JSON as kubectl would, bypassing Go types.
func createRaw(ctx context.Context, raw string) error {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(raw)); err != nil {
		return err
	}
	return k.Create(ctx, u)
}
