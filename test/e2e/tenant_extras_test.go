//go:build e2e

package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		g.Expect(err.Error()).To(ContainSubstring("you own no self-service Tenant named selfsvc"))
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
