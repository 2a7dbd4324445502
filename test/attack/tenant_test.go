//go:build e2e

package attack

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

// Tenant: the platform's Tenants give mallory (an owner of tenant-a) and bob (an owner
// of tenant-b) their namespaces, self-service, isolation and allowed registries. Mallory
// tries to join tenant-b, to leave tenancy, to make her namespaces privileged, to
// change her Tenant, to open her isolation, to read tenant-b's objects through a
// copy, and to run an image from a registry her Tenant does not allow.

// tenants creates tenant-a (owner mallory, namespace ta-main, self-service "ta-")
// and tenant-b (owner bob, tb-main, "tb-"), each isolated and allowing images only
// from its own registry, and waits until both are Ready.
func tenants(t *testing.T) (a, b *tenancyv1alpha1.Tenant) {
	t.Helper()
	g := NewWithT(t)
	mk := func(name, owner, prefix string) *tenancyv1alpha1.Tenant {
		tn := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: tenancyv1alpha1.TenantSpec{
			Owners:         []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: owner}},
			Namespaces:     []tenancyv1alpha1.TenantNamespace{{Name: prefix + "main"}},
			DeletionPolicy: tenancyv1alpha1.DeletionPolicy("Delete"),
			SelfService:    &tenancyv1alpha1.TenantSelfService{MaxNamespaces: 2, NamePrefix: prefix},
			Allowed:        &tenancyv1alpha1.TenantAllowed{Registries: []string{"registry." + name + ".test/"}},
		}}
		// When the test ends, wait until it is gone with its namespaces, so that a run
		// on a kept cluster finds none of them.
		t.Cleanup(func() {
			NewWithT(t).Eventually(func() bool {
				return apierrors.IsNotFound(admin.Get(context.Background(), client.ObjectKeyFromObject(tn), &tenancyv1alpha1.Tenant{}))
			}, timeout, poll).Should(BeTrue())
		})
		create(t, admin, tn)
		return tn
	}
	a, b = mk("tenant-a", attackerUser, "ta-"), mk("tenant-b", victimUser, "tb-")
	for _, tn := range []*tenancyv1alpha1.Tenant{a, b} {
		g.Eventually(func(g Gomega) {
			get(g, tn)
			c := conditionOf(tn.Status.Conditions, tenancyv1alpha1.ConditionReady)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			g.Expect(tn.Status.ObservedGeneration).To(Equal(tn.Generation))
		}, timeout, poll).Should(Succeed())
	}
	return a, b
}

// TestAttackTenant runs the tenancy attacks on one pair of Tenants.
func TestAttackTenant(t *testing.T) {
	ctx := context.Background()
	ta, tb := tenants(t)
	ns := func(name string, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	of := func(tenant string) map[string]string { return map[string]string{tenancyv1alpha1.TenantLabel: tenant} }

	// Each Tenant's self-service binding reaches the API server's admission a moment
	// after the Tenant is Ready (docs/tenant.md, "The race window"): wait on dry runs
	// that only those bindings refuse, so that no attempt below meets a cluster that
	// does not judge yet.
	NewWithT(t).Eventually(func(g Gomega) {
		refused(g, attacker.Create(ctx, ns("tb-probe", of(ta.Name)), client.DryRunAll), "does not fit")
		unlisted := ns("attack-unlisted-probe", nil)
		err := admin.Create(ctx, unlisted)
		if err == nil {
			cleanup(t, unlisted)
		}
		refused(g, admin.Patch(ctx, unlisted, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+tenancyv1alpha1.TenantLabel+`":"tenant-b"}}}`)), client.DryRunAll), "cannot join")
	}, timeout, poll).Should(Succeed())

	t.Run("self-service namespaces only for her own tenant, by its rules", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			refused(g, attacker.Create(ctx, ns("tb-hijack", of(tb.Name)), client.DryRunAll))
		}, timeout, poll).Should(Succeed())

		for _, c := range []struct {
			what string
			ns   *corev1.Namespace
			want string
		}{
			{"a namespace of tenant-b", ns("tb-hijack", of(tb.Name)), "refused"},
			{"tenant-b's name prefix", ns("tb-squat", of(ta.Name)), "does not fit the tenant's self-service rule"},
			{"a kube-* name", ns("kube-ta", of(ta.Name)), "does not fit the tenant's self-service rule"},
			{"outside any tenant", ns("ta-untenanted", nil), "only for a Tenant you own"},
			{"a privileged namespace", ns("ta-priv", map[string]string{tenancyv1alpha1.TenantLabel: ta.Name, "pod-security.kubernetes.io/enforce": "privileged"}), "may not set labels"},
			{"choosing its nodes", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ta-nodes", Labels: of(ta.Name),
				Annotations: map[string]string{"scheduler.alpha.kubernetes.io/node-selector": "pool=gpu"}}}, "may not set labels or annotations"},
		} {
			err := attacker.Create(ctx, c.ns)
			if err == nil {
				cleanup(t, c.ns)
			}
			refused(g, err, c.want)
			g.Expect(apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(c.ns), &corev1.Namespace{}))).To(BeTrue(), c.what)
		}

		// Control: her own tenant's namespace is admitted and set up by Orderly.
		own := ns("ta-feature", of(ta.Name))
		create(t, attacker, own)
		g.Eventually(func(g Gomega) {
			var rb rbacv1.RoleBinding
			g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: own.Name, Name: "orderly-tenant-owners"}, &rb)).To(Succeed())
			get(g, ta)
			g.Expect(ta.Status.SelfServiceNamespaces).To(BeEquivalentTo(1))
		}, timeout, poll).Should(Succeed())

		// She may delete her own self-service namespace, not tenant-b's, nor the
		// namespaces the Tenant lists.
		for _, name := range []string{"tb-main", "ta-main"} {
			forbiddenByRBAC(g, attacker.Delete(ctx, ns(name, nil), client.DryRunAll))
		}
		g.Eventually(func() error { return attacker.Delete(ctx, own, client.DryRunAll) }, timeout, poll).Should(Succeed())
	})

	t.Run("joining a tenant by a label is refused, administrators included", func(t *testing.T) {
		g := NewWithT(t)
		legacy := ns("legacy-svc", nil)
		create(t, admin, legacy)
		// Mallory may not label namespaces at all (TestAttackNamespaceLabels); even
		// the platform team cannot join one to a tenant by its label, which other
		// tenants' NetworkPolicies trust.
		err := admin.Patch(ctx, legacy, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+tenancyv1alpha1.TenantLabel+`":"tenant-b"}}}`)))
		refused(g, err, "cannot join the tenant by a label")
		get(g, legacy)
		g.Expect(legacy.Labels).NotTo(HaveKey(tenancyv1alpha1.TenantLabel))
		// Control: the platform hands it over by listing it and annotating it.
		g.Expect(admin.Patch(ctx, legacy, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+tenancyv1alpha1.AdoptAnnotation+`":"tenant-b"}}}`)))).To(Succeed())
		g.Expect(admin.Patch(ctx, tb, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"namespaces":[{"name":"tb-main"},{"name":"legacy-svc"}]}}`)))).To(Succeed())
		t.Cleanup(func() {
			_ = admin.Patch(context.Background(), tb, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"namespaces":[{"name":"tb-main"}]}}`)))
		})
		g.Eventually(func(g Gomega) {
			get(g, legacy)
			g.Expect(legacy.Labels).To(HaveKeyWithValue(tenancyv1alpha1.TenantLabel, "tenant-b"))
		}, timeout, poll).Should(Succeed())
	})

	t.Run("her Tenant is read-only to her, tenant-b's unreadable", func(t *testing.T) {
		g := NewWithT(t)
		// Control: an owner reads her own Tenant.
		g.Expect(attacker.Get(ctx, client.ObjectKeyFromObject(ta), &tenancyv1alpha1.Tenant{})).To(Succeed())
		forbiddenByRBAC(g, attacker.Get(ctx, client.ObjectKeyFromObject(tb), &tenancyv1alpha1.Tenant{}))
		for _, patch := range []string{
			`{"spec":{"selfService":{"maxNamespaces":100}}}`,
			`{"spec":{"owners":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"mallory"},{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"system:authenticated"}]}}`,
			`{"spec":{"namespaces":[{"name":"ta-main"},{"name":"tb-main"}]}}`,
			`{"spec":{"networkPolicy":{"isolation":"None"}}}`,
		} {
			forbiddenByRBAC(g, attacker.Patch(ctx, ta.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch))))
		}
		forbiddenByRBAC(g, attacker.Delete(ctx, tb.DeepCopy()))
	})

	t.Run("her namespace's isolation is restored when she opens it", func(t *testing.T) {
		g := NewWithT(t)
		key := client.ObjectKey{Namespace: "ta-main", Name: "orderly-tenant-isolation"}
		var np networkingv1.NetworkPolicy
		g.Eventually(func() error { return admin.Get(ctx, key, &np) }, timeout, poll).Should(Succeed())
		want := np.Spec.Ingress
		// As an owner (admin in ta-main) she may write NetworkPolicies: she opens the
		// tenant's to everyone, then deletes it.
		open := np.DeepCopy()
		open.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}}
		g.Expect(attacker.Update(ctx, open)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(admin.Get(ctx, key, &np)).To(Succeed())
			g.Expect(np.Spec.Ingress).To(Equal(want))
		}, timeout, poll).Should(Succeed())
		g.Expect(attacker.Delete(ctx, &np)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(admin.Get(ctx, key, &np)).To(Succeed())
			g.Expect(np.DeletionTimestamp).To(BeNil())
			g.Expect(np.Spec.Ingress).To(Equal(want))
		}, timeout, poll).Should(Succeed())
		// Control: the platform opens it, through the Tenant.
		g.Expect(admin.Patch(ctx, ta, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"networkPolicy":{"allowFrom":[{"matchLabels":{"kubernetes.io/metadata.name":"`+teamB+`"}}]}}}`)))).To(Succeed())
		t.Cleanup(func() {
			_ = admin.Patch(context.Background(), ta, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"networkPolicy":null}}`)))
		})
		g.Eventually(func(g Gomega) {
			g.Expect(admin.Get(ctx, key, &np)).To(Succeed())
			g.Expect(np.Spec.Ingress).NotTo(Equal(want))
			g.Expect(fmt.Sprint(np.Spec.Ingress)).To(ContainSubstring(teamB))
		}, timeout, poll).Should(Succeed())
	})

	t.Run("a copy of another namespace's object needs its owner's consent", func(t *testing.T) {
		g := NewWithT(t)
		// team-b holds a ConfigMap; the platform (by mistake, or asked by mallory)
		// gives tenant-a an entry that copies it.
		src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "b-settings"}, Data: map[string]string{"token": "team-b-only"}}
		create(t, victim, src)
		patch := []byte(`{"spec":{"resources":[{"name":"b-settings","from":{"apiVersion":"v1","kind":"ConfigMap","namespace":"` + teamB + `","name":"b-settings"}}]}}`)
		g.Expect(admin.Patch(ctx, ta, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		t.Cleanup(func() {
			_ = admin.Patch(context.Background(), ta, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"resources":null}}`)))
		})
		c := waitCondition(g, ta, func() []metav1.Condition { return ta.Status.Conditions }, tenancyv1alpha1.ConditionExtraResourcesApplied, "SourceNotShared")
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		for _, n := range []string{"ta-main"} {
			g.Expect(apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Namespace: n, Name: "b-settings"}, &corev1.ConfigMap{}))).To(BeTrue())
		}
		// Control: once its owner shares it, the copy is made.
		g.Expect(victim.Patch(ctx, src, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+tenancyv1alpha1.ShareableLabel+`":"true"}}}`)))).To(Succeed())
		g.Eventually(func() error {
			return admin.Get(ctx, client.ObjectKey{Namespace: "ta-main", Name: "b-settings"}, &corev1.ConfigMap{})
		}, timeout, poll).Should(Succeed())
	})

	t.Run("Orderly's labels and owner on her own object", func(t *testing.T) {
		g := NewWithT(t)
		// The platform keeps a ConfigMap in every namespace of tenant-a.
		entry := []byte(`{"spec":{"resources":[{"name":"settings","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"team-settings"},"data":{"tenant":"{{ .Tenant }}"}}}]}}`)
		g.Expect(admin.Patch(ctx, ta, client.RawPatch(types.MergePatchType, entry))).To(Succeed())
		t.Cleanup(func() {
			_ = admin.Patch(context.Background(), ta, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"resources":null}}`)))
		})
		copyKey := client.ObjectKey{Namespace: "ta-main", Name: "team-settings"}
		g.Eventually(func() error { return admin.Get(ctx, copyKey, &corev1.ConfigMap{}) }, timeout, poll).Should(Succeed())
		// In ta-main (she is an owner) she dresses a ConfigMap of her own as the
		// entry's: Orderly's labels, and the Tenant as its controller.
		get(g, ta)
		forged := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ta-main", Name: "not-orderlys",
			Labels:          map[string]string{labels.ManagedBy: labels.ManagedByValue, tenancyv1alpha1.TenantLabel: ta.Name, tenancyv1alpha1.ResourceLabel: "settings"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: tenancyv1alpha1.GroupVersion.String(), Kind: "Tenant", Name: ta.Name, UID: ta.UID, Controller: ptr.To(true)}}},
			Data: map[string]string{"hers": "yes"}}
		create(t, attacker, forged)
		before := snap(g, forged)
		// The entry is removed: Orderly deletes what it applied (the control), and
		// nothing else.
		g.Expect(admin.Patch(ctx, ta, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"resources":null}}`)))).To(Succeed())
		g.Eventually(func() bool { return apierrors.IsNotFound(admin.Get(ctx, copyKey, &corev1.ConfigMap{})) }, timeout, poll).Should(BeTrue())
		unchanged(g, forged, before)
	})

	t.Run("images only from her tenant's registries, ephemeral containers included", func(t *testing.T) {
		g := NewWithT(t)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ta-main", Name: "debuggee"}, Spec: corev1.PodSpec{
			Containers:  []corev1.Container{{Name: "app", Image: "registry.tenant-a.test/app:1"}},
			Tolerations: kwokTolerations,
		}}
		// Control: an image from her tenant's registry is admitted.
		g.Eventually(func() error { return attacker.Create(ctx, pod.DeepCopy(), client.DryRunAll) }, timeout, poll).Should(Succeed())
		evil := pod.DeepCopy()
		evil.Name = "evil"
		evil.Spec.Containers[0].Image = "registry.tenant-b.test/app:1"
		g.Eventually(func(g Gomega) {
			refused(g, attacker.Create(ctx, evil.DeepCopy(), client.DryRunAll), "registry.tenant-b.test/app:1")
		}, timeout, poll).Should(Succeed())
		create(t, attacker, pod)
		// `kubectl debug` adds an ephemeral container through the pods/ephemeralcontainers
		// subresource: the registries rule applies there too.
		grantDebug(t, pod.Namespace, attackerUser)
		refused(g, debug(ctx, attacker, pod, "docker.io/library/busybox:1"), "docker.io/library/busybox")
		get(g, pod)
		g.Expect(pod.Spec.EphemeralContainers).To(BeEmpty())
		g.Expect(debug(ctx, attacker, pod, "registry.tenant-a.test/debug:1")).To(Succeed(), "control: a debug image from her registry")
	})
}
