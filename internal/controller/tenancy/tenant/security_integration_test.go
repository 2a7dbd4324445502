//go:build integration

package tenant

import (
	"context"
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/labels"
	"orderly.dev/orderly/internal/testing/testenv"
)

func clusterRoleBinding(role string, subjects ...rbacv1.Subject) tenancyv1alpha1.TenantRoleBinding {
	return tenancyv1alpha1.TenantRoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: rbacAPIGroup, Kind: "ClusterRole", Name: role}, Subjects: subjects}
}

// bindingsTo lists the RoleBindings in ns that bind role.
func bindingsTo(g Gomega, ns, role string) []string {
	var list rbacv1.RoleBindingList
	g.Expect(k.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var names []string
	for _, rb := range list.Items {
		if rb.RoleRef.Name == role {
			names = append(names, rb.Name)
		}
	}
	return names
}

// Whoever may create a Tenant asks for cluster-admin in its namespaces: the binding is
// not created, the Tenant says why, and the rest of the Tenant is created. A binding
// that was allowed and is then changed to a forbidden role goes.
func TestTenantBindsOnlyTheClusterRolesTenantsMayBind(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := newTenant("quebec", "quebec-dev").owners("quinn")
	b.t.Spec.AdditionalRoleBindings = []tenancyv1alpha1.TenantRoleBinding{
		clusterRoleBinding("view", rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "auditors"}),
		clusterRoleBinding("cluster-admin", rbacv1.Subject{Kind: rbacv1.UserKind, Name: "mallory"}),
	}
	tn := b.create(t)

	g.Eventually(func(g Gomega) {
		got := getTenant(g, tn.Name)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		allowed := condition(got, tenancyv1alpha1.ConditionRoleBindingsAllowed)
		g.Expect(allowed).NotTo(BeNil())
		g.Expect(allowed.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(allowed.Reason).To(Equal(ReasonRoleNotAllowed))
		g.Expect(allowed.Message).To(ContainSubstring(`additionalRoleBindings[1] binds ClusterRole "cluster-admin"`))
		g.Expect(allowed.Message).To(ContainSubstring("--tenant-bindable-clusterroles"))
		ready := condition(got, tenancyv1alpha1.ConditionReady)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(ReasonRoleNotAllowed))
		g.Expect(eventReasons(g, tn.Name)).To(ContainElement(ReasonRoleNotAllowed))
		g.Expect(testenv.SeriesOf(g, "orderly_tenant_refused_role_bindings", map[string]string{"tenant": tn.Name})).To(Equal(1))
		// The rest of the Tenant is in place.
		g.Expect(bindingsTo(g, "quebec-dev", "view")).To(ConsistOf(extraBindingPrefix + "0"))
		g.Expect(bindingsTo(g, "quebec-dev", tenancyv1alpha1.TenantAdminClusterRole)).To(ConsistOf(ownersBindingName))
	}, timeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(bindingsTo(g, "quebec-dev", "cluster-admin")).To(BeEmpty(), "cluster-admin is never bound")
	}, "2s", "200ms").Should(Succeed())

	// The allowed binding is changed to a forbidden role: it goes, and nothing replaces it.
	updateTenant(t, tn.Name, func(cur *tenancyv1alpha1.Tenant) {
		cur.Spec.AdditionalRoleBindings[0].RoleRef.Name = "cluster-admin"
	})
	g.Eventually(func(g Gomega) {
		err := k.Get(ctx, client.ObjectKey{Namespace: "quebec-dev", Name: extraBindingPrefix + "0"}, &rbacv1.RoleBinding{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a binding to a role Tenants may not bind is removed")
		g.Expect(condition(getTenant(g, tn.Name), tenancyv1alpha1.ConditionRoleBindingsAllowed).Message).To(HavePrefix("2 role binding(s) not created"))
	}, timeout, poll).Should(Succeed())
	g.Expect(bindingsTo(g, "quebec-dev", "cluster-admin")).To(BeEmpty())

	// Back to allowed roles: Ready.
	updateTenant(t, tn.Name, func(cur *tenancyv1alpha1.Tenant) {
		cur.Spec.AdditionalRoleBindings[0].RoleRef.Name = "view"
		cur.Spec.AdditionalRoleBindings[1].RoleRef.Name = "edit"
	})
	got := waitReady(t, tn.Name)
	g.Expect(condition(got, tenancyv1alpha1.ConditionRoleBindingsAllowed).Status).To(Equal(metav1.ConditionTrue))
	g.Eventually(func(g Gomega) {
		g.Expect(bindingsTo(g, "quebec-dev", "edit")).To(ConsistOf(extraBindingPrefix + "1"))
	}, timeout, poll).Should(Succeed())
}

// What a Tenant may not claim on its namespaces, or bind, is refused by the API server
// with a message that says why; what it may set is accepted.
func TestTenantRefusesReservedMetadataAndRoles(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		mutate  func(*tenancyv1alpha1.Tenant)
		wantErr string
	}{
		{"origin annotation (would make an adopted namespace deletable)", func(t *tenancyv1alpha1.Tenant) {
			t.Spec.Namespaces[0].Annotations = map[string]string{tenancyv1alpha1.OriginAnnotation: tenancyv1alpha1.OriginCreated}
		}, "annotations must not use the reserved prefixes"},
		{"adopt annotation (would hand the namespace to another Tenant)", func(t *tenancyv1alpha1.Tenant) {
			t.Spec.Namespaces[0].Annotations = map[string]string{tenancyv1alpha1.AdoptAnnotation: "other"}
		}, "annotations must not use the reserved prefixes"},
		{"node selector annotation", func(t *tenancyv1alpha1.Tenant) {
			t.Spec.Namespaces[0].Annotations = map[string]string{"scheduler.alpha.kubernetes.io/node-selector": "node-role.kubernetes.io/control-plane="}
		}, "annotations must not use the reserved prefixes"},
		{"privileged Pod Security", func(t *tenancyv1alpha1.Tenant) {
			t.Spec.Namespaces[0].Labels = map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}
		}, "Pod Security labels may only make a namespace stricter"},
		{"Pod Security version", func(t *tenancyv1alpha1.Tenant) {
			t.Spec.Namespaces[0].Labels = map[string]string{"pod-security.kubernetes.io/enforce-version": "v1.0"}
		}, "Pod Security labels may only make a namespace stricter"},
		{"a kubernetes.io label", func(t *tenancyv1alpha1.Tenant) {
			t.Spec.Namespaces[0].Labels = map[string]string{"kubernetes.io/metadata.name": "ingress-nginx"}
		}, "labels must not use the reserved prefixes"},
		{"an orderly.dev label", func(t *tenancyv1alpha1.Tenant) {
			t.Spec.Namespaces[0].Labels = map[string]string{"app.kubernetes.io/managed-by": "orderly", "policy.orderly.dev/x": "y"}
		}, "labels must not use the reserved prefixes"},
		{"allowFrom by a label a Tenant can set", func(t *tenancyv1alpha1.Tenant) {
			t.Spec.NetworkPolicy.AllowFrom = []tenancyv1alpha1.TenantNamespaceSelector{{MatchLabels: map[string]string{"team": "monitoring"}}}
		}, "allowFrom may select namespaces only by labels no Tenant can set"},
		{"allowFrom expression on such a label", func(t *tenancyv1alpha1.Tenant) {
			t.Spec.NetworkPolicy.AllowFrom = []tenancyv1alpha1.TenantNamespaceSelector{{MatchExpressions: []tenancyv1alpha1.TenantNamespaceSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpExists}}}}
		}, "Unsupported value: \"team\""},
		{"allowFrom In without values", func(t *tenancyv1alpha1.Tenant) {
			t.Spec.NetworkPolicy.AllowFrom = []tenancyv1alpha1.TenantNamespaceSelector{{MatchExpressions: []tenancyv1alpha1.TenantNamespaceSelectorRequirement{{Key: tenancyv1alpha1.TenantLabel, Operator: metav1.LabelSelectorOpIn}}}}
		}, "values are required for In and NotIn"},
		{"a Role", func(t *tenancyv1alpha1.Tenant) {
			t.Spec.AdditionalRoleBindings = []tenancyv1alpha1.TenantRoleBinding{{RoleRef: rbacv1.RoleRef{APIGroup: rbacAPIGroup, Kind: "Role", Name: "secret-reader"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "u"}}}}
		}, "roleRef must be a ClusterRole"},
		{"a kube-* namespace", func(t *tenancyv1alpha1.Tenant) { t.Spec.Namespaces[0].Name = "kube-system" }, "kube-* namespaces belong to Kubernetes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			tn := newTenant("reserved", "reserved-one").t
			tt.mutate(tn)
			err := k.Create(ctx, tn)
			g.Expect(err).To(HaveOccurred())
			if err == nil {
				_ = k.Delete(ctx, tn)
				return
			}
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), err.Error())
			g.Expect(err.Error()).To(ContainSubstring(tt.wantErr))
		})
	}

	t.Run("what a Tenant may set", func(t *testing.T) {
		g := NewWithT(t)
		tn := newTenant("reserved-ok", "reserved-ok-dev").t
		tn.Spec.Namespaces[0].Labels = map[string]string{"environment": "dev", "example.com/team": "payments", "pod-security.kubernetes.io/enforce": "restricted"}
		tn.Spec.Namespaces[0].Annotations = map[string]string{"example.com/contact": "payments@example.com"}
		tn.Spec.NetworkPolicy.AllowFrom = []tenancyv1alpha1.TenantNamespaceSelector{
			{MatchLabels: map[string]string{tenancyv1alpha1.NamespaceNameLabel: "ingress-nginx"}},
			{MatchExpressions: []tenancyv1alpha1.TenantNamespaceSelectorRequirement{{Key: tenancyv1alpha1.TenantLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"monitoring"}}}},
			{},
		}
		tn.Spec.AdditionalRoleBindings = []tenancyv1alpha1.TenantRoleBinding{clusterRoleBinding("view", rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "g"})}
		g.Expect(k.Create(ctx, tn)).To(Succeed())
		t.Cleanup(func() { _ = k.Delete(context.Background(), tn) })
		waitReady(t, tn.Name)
		g.Expect(getNS(g, "reserved-ok-dev").Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))
		g.Expect(bindingsTo(g, "reserved-ok-dev", "view")).To(ConsistOf(extraBindingPrefix + "0"))
	})
}

// The adopt annotation hands a namespace to one Tenant, once: once adopted it is gone,
// so a later Tenant of the same name does not adopt the namespace again.
func TestTenantRemovesTheAdoptAnnotationOnceAdopted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "romeo-legacy", Annotations: map[string]string{tenancyv1alpha1.AdoptAnnotation: "romeo", "team": "kept"}}})).To(Succeed())
	first := newTenant("romeo", "romeo-legacy").owners("rita").create(t)
	waitReady(t, first.Name)
	g.Eventually(func(g Gomega) {
		ns := getNS(g, "romeo-legacy")
		g.Expect(ns.Labels).To(HaveKeyWithValue(tenancyv1alpha1.TenantLabel, "romeo"))
		g.Expect(ns.Annotations).To(HaveKeyWithValue(tenancyv1alpha1.OriginAnnotation, tenancyv1alpha1.OriginAdopted))
		g.Expect(ns.Annotations).NotTo(HaveKey(tenancyv1alpha1.AdoptAnnotation))
		g.Expect(ns.Annotations).To(HaveKeyWithValue("team", "kept"))
		g.Expect(eventReasons(g, "romeo")).To(ContainElement("NamespaceAdopted"))
	}, timeout, poll).Should(Succeed())
	expectQuiet(t, "romeo-legacy", first.Name)

	g.Expect(k.Delete(ctx, first)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k.Get(ctx, client.ObjectKey{Name: first.Name}, &tenancyv1alpha1.Tenant{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		g.Expect(getNS(g, "romeo-legacy").Labels).NotTo(HaveKey(tenancyv1alpha1.TenantLabel))
	}, timeout, poll).Should(Succeed())

	// Someone creates a Tenant of the same name: the namespace is not theirs.
	second := newTenant("romeo", "romeo-legacy").owners("mallory").create(t)
	g.Eventually(func(g Gomega) {
		got := getTenant(g, second.Name)
		c := condition(got, tenancyv1alpha1.ConditionNamespaceConflict)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	}, timeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(getNS(g, "romeo-legacy").Labels).NotTo(HaveKey(tenancyv1alpha1.TenantLabel))
		// envtest runs no garbage collector, so the first Tenant's binding may linger;
		// the second one's owner must never be bound.
		var rbs rbacv1.RoleBindingList
		g.Expect(k.List(ctx, &rbs, client.InNamespace("romeo-legacy"))).To(Succeed())
		for _, rb := range rbs.Items {
			g.Expect(rb.Subjects).NotTo(ContainElement(HaveField("Name", "mallory")), rb.Name)
		}
	}, "2s", "200ms").Should(Succeed())
}

// A namespace an earlier Tenant left behind (its finalizer removed by hand) still
// carries that Tenant's name and UID. A new Tenant of the same name neither takes it
// over nor, with deletionPolicy Delete, deletes it as "its own" unlisted namespace.
func TestTenantDoesNotInheritAnEarlierTenantsNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        "sierra-old",
		Labels:      map[string]string{tenancyv1alpha1.TenantLabel: "sierra", labels.ManagedBy: labels.ManagedByValue},
		Annotations: map[string]string{tenancyv1alpha1.OwnerUIDAnnotation: "6f1c1d9e-earlier-tenant", tenancyv1alpha1.OriginAnnotation: tenancyv1alpha1.OriginCreated},
	}})).To(Succeed())
	tn := newTenant("sierra", "sierra-new").policy(tenancyv1alpha1.DeletionPolicyDelete).create(t)
	waitReady(t, tn.Name)
	untouched := func(g Gomega) {
		ns := getNS(g, "sierra-old")
		g.Expect(ns.DeletionTimestamp).To(BeNil(), "an earlier Tenant's namespace is not this one's to delete")
		g.Expect(ns.Labels).To(HaveKeyWithValue(tenancyv1alpha1.TenantLabel, "sierra"))
		g.Expect(ns.Annotations).To(HaveKeyWithValue(tenancyv1alpha1.OwnerUIDAnnotation, "6f1c1d9e-earlier-tenant"))
	}
	g.Consistently(untouched, "2s", "200ms").Should(Succeed())

	updateTenant(t, tn.Name, func(cur *tenancyv1alpha1.Tenant) {
		cur.Spec.Namespaces = append(cur.Spec.Namespaces, tenancyv1alpha1.TenantNamespace{Name: "sierra-old"})
	})
	g.Eventually(func(g Gomega) {
		c := condition(getTenant(g, tn.Name), tenancyv1alpha1.ConditionNamespaceConflict)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("an earlier Tenant named"))
	}, timeout, poll).Should(Succeed())

	g.Expect(k.Delete(ctx, tn)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k.Get(ctx, client.ObjectKey{Name: tn.Name}, &tenancyv1alpha1.Tenant{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		g.Expect(getNS(g, "sierra-new").DeletionTimestamp).NotTo(BeNil(), "its own namespace is deleted")
	}, timeout, poll).Should(Succeed())
	untouched(g)
}

// Anyone who may create RoleBindings in some namespace can give one Orderly's
// managed-by label and make it as large as the API server accepts. The manager's cache
// holds no more than a small, fixed set of metadata of it, and no full copy.
func TestTenantCachesOnlyMetadataOfChildren(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tango-team"}})).To(Succeed())
	subjects := make([]rbacv1.Subject, 2000)
	for i := range subjects {
		subjects[i] = rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacAPIGroup, Name: strings.Repeat("u", 100) + string(rune('a'+i%26))}
	}
	bulky := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tango-team", Name: "bulky",
			Labels:      map[string]string{labels.ManagedBy: labels.ManagedByValue, tenancyv1alpha1.TenantLabel: "tango", "padding": "p"},
			Annotations: map[string]string{"padding": strings.Repeat("x", 200_000)},
		},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacAPIGroup, Kind: "ClusterRole", Name: "view"},
		Subjects: subjects,
	}
	g.Expect(k.Create(ctx, bulky)).To(Succeed())
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "tango-team", Name: "bulky",
		Labels:      map[string]string{labels.ManagedBy: labels.ManagedByValue},
		Annotations: map[string]string{"padding": strings.Repeat("x", 200_000)},
	}}
	g.Expect(k.Create(ctx, quota)).To(Succeed())

	for _, obj := range []client.Object{bulky, quota} {
		kind := kindOf(obj)
		g.Eventually(func(g Gomega) {
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(childKinds[kind])
			g.Expect(managerCache.Get(ctx, client.ObjectKeyFromObject(obj), m)).To(Succeed())
			g.Expect(m.Annotations).To(HaveLen(1), kind)
			g.Expect(m.Annotations).To(HaveKey(fieldsDigestKey), "only the digest of who set what, %s", kind)
			g.Expect(m.ManagedFields).To(BeEmpty(), kind)
			g.Expect(m.Labels).NotTo(HaveKey("padding"), kind)
		}, timeout, poll).Should(Succeed())
	}
	// No typed (full) copy of RoleBindings is cached at all.
	err := managerCache.Get(ctx, client.ObjectKeyFromObject(bulky), &rbacv1.RoleBinding{})
	var notCached *cache.ErrResourceNotCached
	g.Expect(errors.As(err, &notCached)).To(BeTrue(), "RoleBinding read from the manager's cache: %v", err)
	// Quotas are cached typed (totalQuota plans from their usage), but with the same
	// metadata and nothing of their content but a bounded spec.hard, status.hard and
	// status.used.
	g.Eventually(func(g Gomega) {
		var q corev1.ResourceQuota
		g.Expect(managerCache.Get(ctx, client.ObjectKeyFromObject(quota), &q)).To(Succeed())
		g.Expect(q.Annotations).To(HaveLen(1))
		g.Expect(q.Annotations).To(HaveKey(fieldsDigestKey))
		g.Expect(q.ManagedFields).To(BeEmpty())
		g.Expect(q.Labels).NotTo(HaveKey("padding"))
	}, timeout, poll).Should(Succeed())
}

// Only objects of the names Orderly gives its children are Orderly's: a RoleBinding a
// namespace admin dresses up as Orderly's (labels, a controller reference to the
// Tenant) is neither deleted nor changed.
func TestTenantLeavesObjectsOfOtherNamesAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant("uniform", "uniform-dev").owners("uma").create(t)
	got := waitReady(t, tn.Name)
	sneaky := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "uniform-dev", Name: "uniform-sneaky",
			Labels: map[string]string{labels.ManagedBy: labels.ManagedByValue, tenancyv1alpha1.TenantLabel: "uniform"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: tenancyv1alpha1.GroupVersion.String(), Kind: "Tenant", Name: got.Name, UID: got.UID,
				Controller: ptr.To(true)}},
		},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacAPIGroup, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacAPIGroup, Name: "uma"}},
	}
	g.Expect(k.Create(ctx, sneaky)).To(Succeed())
	// Something else makes the Tenant reconcile in the meantime.
	updateTenant(t, tn.Name, func(cur *tenancyv1alpha1.Tenant) { cur.Spec.CostCenter = "cc-2" })
	waitReady(t, tn.Name)
	g.Consistently(func(g Gomega) {
		var rb rbacv1.RoleBinding
		g.Expect(k.Get(ctx, client.ObjectKeyFromObject(sneaky), &rb)).To(Succeed())
		g.Expect(rb.UID).To(Equal(sneaky.UID))
	}, "2s", "200ms").Should(Succeed())
}
