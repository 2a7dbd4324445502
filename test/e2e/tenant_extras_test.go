//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

// impersonating is a client that acts as user, through the administrator's
// impersonation: what the user's own kubeconfig would do.
func impersonating(t *testing.T, user string, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append([]string{"system:authenticated"}, groups...)}
	c, err := client.New(cfg, client.Options{Scheme: k.Scheme()})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return c
}

func tenantNamespace(name, tenant string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if tenant != "" {
		ns.Labels = map[string]string{tenancyv1alpha1.TenantLabel: tenant}
	}
	return ns
}

// The user story of self-service namespaces on the whole cluster, with the manager
// running as its own ServiceAccount: an owner creates a namespace (admitted by the
// generated policy, then set up by Orderly with the tenant's RBAC, so she can deploy
// there), a non-owner is refused with the policy's message, and the 4th namespace over
// maxNamespaces: 3 is refused until the owner deletes one (which she may).
func TestTenantSelfServiceNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := tenant("selfsvc", "Delete", "selfsvc-main")
	tn.Spec.SelfService = &tenancyv1alpha1.TenantSelfService{MaxNamespaces: 3, NamePrefix: "selfsvc-"}
	other := tenant("othersvc", "Delete", "othersvc-main")
	other.Spec.SelfService = &tenancyv1alpha1.TenantSelfService{MaxNamespaces: 1, NamePrefix: "othersvc-"}
	for _, x := range []*tenancyv1alpha1.Tenant{tn, other} {
		g.Expect(k.Create(ctx, x)).To(Succeed())
		t.Cleanup(func() { _ = k.Delete(context.Background(), x) })
	}
	created := []string{"selfsvc-one", "selfsvc-two", "selfsvc-three"}
	t.Cleanup(func() {
		for _, n := range append(created, "selfsvc-four") {
			_ = k.Delete(context.Background(), tenantNamespace(n, ""))
		}
	})
	waitTenantReady(g, tn.Name)
	waitTenantReady(g, other.Name)
	g.Eventually(func(g Gomega) {
		var got tenancyv1alpha1.Tenant
		g.Expect(k.Get(ctx, client.ObjectKey{Name: tn.Name}, &got)).To(Succeed())
		c := meta.FindStatusCondition(got.Status.Conditions, tenancyv1alpha1.ConditionSelfServiceReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
	}, timeout, poll).Should(Succeed())

	owner := impersonating(t, tn.Name+"-owner")
	stranger := impersonating(t, other.Name+"-owner") // may create namespaces: owns othersvc

	// A non-owner (an owner of another tenant, who may create namespaces only through
	// self-service) is refused, with the message. Dry runs until the API server has
	// loaded the policy, so that nothing is created by mistake.
	g.Eventually(func(g Gomega) {
		err := stranger.Create(ctx, tenantNamespace("selfsvc-stranger", tn.Name), client.DryRunAll)
		g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "want refused, got %v", err)
		// Two policies refuse it (the guard, and the tenant's own binding); which
		// message the API server returns depends on the order it evaluates them in.
		g.Expect(err.Error()).To(Or(ContainSubstring("you own no self-service Tenant named selfsvc"),
			ContainSubstring("only the tenant's owners may create its namespaces, and othersvc-owner is not one of its spec.owners")))
	}, timeout, poll).Should(Succeed())

	// The owner creates three: admitted, adopted and set up; she can deploy in them.
	for _, n := range created {
		g.Expect(owner.Create(ctx, tenantNamespace(n, tn.Name))).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		var got tenancyv1alpha1.Tenant
		g.Expect(k.Get(ctx, client.ObjectKey{Name: tn.Name}, &got)).To(Succeed())
		g.Expect(got.Status.SelfServiceNamespaces).To(BeEquivalentTo(3))
		g.Expect(got.Status.ReadyNamespaces).To(BeEquivalentTo(4))
		var rb rbacv1.RoleBinding
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "selfsvc-one", Name: "orderly-tenant-owners"}, &rb)).To(Succeed())
	}, timeout, poll).Should(Succeed())
	g.Eventually(func() error {
		return owner.Create(ctx, deployment("selfsvc-one", "web", 1), client.DryRunAll)
	}, timeout, poll).Should(Succeed())

	// The 4th is over maxNamespaces: 3. The policy reads the count from the Tenant's
	// status through the API server's own cache of it, which can be a moment behind
	// what we just read (the documented race window): dry runs until it has caught up.
	g.Eventually(func(g Gomega) {
		err := owner.Create(ctx, tenantNamespace("selfsvc-four", tn.Name), client.DryRunAll)
		g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "want refused, got %v", err)
	}, timeout, poll).Should(Succeed())
	err := owner.Create(ctx, tenantNamespace("selfsvc-four", tn.Name))
	g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "want refused, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("already has 3 self-service namespaces, its maximum"))

	// She deletes one; once it is gone the count drops and the 4th is admitted.
	g.Eventually(func() error { return owner.Delete(ctx, tenantNamespace("selfsvc-three", "")) }, timeout, poll).Should(Succeed())
	g.Eventually(func() error {
		return owner.Create(ctx, tenantNamespace("selfsvc-four", tn.Name))
	}, timeout, poll).Should(Succeed())
}

// spec.preventDeletion on the whole cluster: the Tenant and its namespace cannot be
// deleted, by the administrator either, until the protection is lifted; then the
// Tenant goes, and its namespace with it (deletionPolicy Delete).
func TestTenantPreventDeletion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := tenant("keepme", "Delete", "keepme-main")
	tn.Spec.PreventDeletion = true
	g.Expect(k.Create(ctx, tn)).To(Succeed())
	t.Cleanup(func() {
		var cur tenancyv1alpha1.Tenant
		if k.Get(context.Background(), client.ObjectKey{Name: tn.Name}, &cur) == nil && cur.Spec.PreventDeletion {
			cur.Spec.PreventDeletion = false
			_ = k.Update(context.Background(), &cur)
		}
		_ = k.Delete(context.Background(), tn)
	})
	waitTenantReady(g, tn.Name)

	g.Eventually(func(g Gomega) {
		err := k.Delete(ctx, tenantNamespace("keepme-main", ""))
		g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "want refused, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("namespace keepme-main belongs to tenant keepme, which has spec.preventDeletion: lift it first"))
	}, timeout, poll).Should(Succeed())
	err := k.Delete(ctx, &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tn.Name}})
	g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "want refused, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("Tenant keepme has spec.preventDeletion: lift it first"))

	g.Eventually(func() error {
		var cur tenancyv1alpha1.Tenant
		if err := k.Get(ctx, client.ObjectKey{Name: tn.Name}, &cur); err != nil {
			return err
		}
		cur.Spec.PreventDeletion = false
		return k.Update(ctx, &cur)
	}, timeout, poll).Should(Succeed())
	g.Eventually(func() error {
		return k.Delete(ctx, &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tn.Name}})
	}, timeout, poll).Should(Succeed())
	g.Eventually(func() bool {
		err := k.Get(ctx, client.ObjectKey{Name: "keepme-main"}, &corev1.Namespace{})
		return apierrors.IsNotFound(err)
	}, timeout, poll).Should(BeTrue())
}

// spec.allowed on the whole cluster: the owner's PVC with a storage class outside the
// list is refused with the message; one of an allowed class is admitted.
func TestTenantAllowedStorageClass(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := tenant("classy", "Delete", "classy-main")
	tn.Spec.Allowed = &tenancyv1alpha1.TenantAllowed{StorageClasses: []string{"fast"}}
	g.Expect(k.Create(ctx, tn)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), tn) })
	waitTenantReady(g, tn.Name)
	owner := impersonating(t, tn.Name+"-owner")

	pvc := func(class string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "classy-main", Name: "data-" + class},
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: &class,
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
	}
	g.Eventually(func(g Gomega) {
		// A dry run until the API server has loaded the binding, then for real.
		g.Expect(owner.Create(ctx, pvc("slow"), client.DryRunAll)).NotTo(Succeed())
		err := owner.Create(ctx, pvc("slow"))
		g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "want refused, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("PersistentVolumeClaim classy-main/data-slow in tenant classy: storage class slow is not allowed; allowed: fast"))
	}, timeout, poll).Should(Succeed())
	g.Expect(owner.Create(ctx, pvc("fast"))).To(Succeed())
}

// spec.resources on the whole cluster, with the manager's RBAC as shipped: a ConfigMap
// (allowed by default) goes into every tenant namespace; a PodDisruptionBudget is
// reported KindNotAllowed until the platform grants it with a ClusterRole labelled for
// aggregation, then it is applied too; deleting the Tenant takes both with it.
func TestTenantResourcesUnderTheManagersRBAC(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := tenant("extras", "Retain", "extras-a", "extras-b")
	tn.Spec.Resources = []tenancyv1alpha1.TenantResource{
		{Name: "settings", Object: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"team-settings"},"data":{"namespace":"{{ .Namespace }}"}}`)}},
		{Name: "pdb", Object: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"web"},"spec":{"maxUnavailable":1,"selector":{"matchLabels":{"app":"web"}}}}`)}},
	}
	g.Expect(k.Create(ctx, tn)).To(Succeed())
	t.Cleanup(func() {
		_ = k.Delete(context.Background(), tn)
		for _, n := range tn.Spec.Namespaces {
			_ = k.Delete(context.Background(), tenantNamespace(n.Name, ""))
		}
	})
	waitTenantReady(g, tn.Name)
	extraCondition := func(g Gomega) *metav1.Condition {
		var got tenancyv1alpha1.Tenant
		g.Expect(k.Get(ctx, client.ObjectKey{Name: tn.Name}, &got)).To(Succeed())
		c := meta.FindStatusCondition(got.Status.Conditions, tenancyv1alpha1.ConditionExtraResourcesApplied)
		g.Expect(c).NotTo(BeNil())
		return c
	}
	g.Eventually(func(g Gomega) {
		c := extraCondition(g)
		g.Expect(c.Reason).To(Equal("KindNotAllowed"), c.Message)
		g.Expect(c.Message).To(ContainSubstring("poddisruptionbudgets.policy"))
		for _, ns := range []string{"extras-a", "extras-b"} {
			var cm corev1.ConfigMap
			g.Expect(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "team-settings"}, &cm)).To(Succeed())
			g.Expect(cm.Data).To(HaveKeyWithValue("namespace", ns))
		}
	}, timeout, poll).Should(Succeed())

	grant := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-orderly-tenant-pdbs", Labels: map[string]string{tenancyv1alpha1.ResourcesAggregationLabel: "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"get", "create", "patch", "delete"}}},
	}
	g.Expect(k.Create(ctx, grant)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), grant) })
	// The Tenant looks again every minute; a namespace label change brings it sooner.
	touch := 0
	g.Eventually(func(g Gomega) {
		touch++
		var ns corev1.Namespace
		g.Expect(k.Get(ctx, client.ObjectKey{Name: "extras-a"}, &ns)).To(Succeed())
		ns.Labels["e2e-touch"] = fmt.Sprint(touch)
		g.Expect(k.Update(ctx, &ns)).To(Succeed())
		c := extraCondition(g)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
	}, 2*timeout, 2*time.Second).Should(Succeed())
	for _, ns := range []string{"extras-a", "extras-b"} {
		var pdb policyv1.PodDisruptionBudget
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &pdb)).To(Succeed())
		g.Expect(pdb.Labels).To(HaveKeyWithValue(tenancyv1alpha1.ResourceLabel, "pdb"))
	}

	// Deleting the Tenant (Retain): the namespaces stay, Orderly's objects go.
	g.Expect(k.Delete(ctx, tn)).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, ns := range []string{"extras-a", "extras-b"} {
			err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "team-settings"}, &corev1.ConfigMap{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s: %v", ns, err)
			err = k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &policyv1.PodDisruptionBudget{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s: %v", ns, err)
			g.Expect(k.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})).To(Succeed())
		}
	}, 2*timeout, poll).Should(Succeed())
}
