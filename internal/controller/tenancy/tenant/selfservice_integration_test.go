//go:build integration

package tenant

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

// as is a client that acts as user, through impersonation.
func as(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (b *tenantBuilder) selfService(max int32, prefix string) *tenantBuilder {
	b.t.Spec.SelfService = &tenancyv1alpha1.TenantSelfService{MaxNamespaces: max, NamePrefix: prefix}
	return b
}

func labelledNS(name, tenant string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if tenant != "" {
		ns.Labels = map[string]string{tenancyv1alpha1.TenantLabel: tenant}
	}
	return ns
}

// refused polls until creating ns as c is refused with a message containing msg, or
// one of also (where two policies refuse it, the API server reports either). The
// attempts are dry runs: while the API server has not loaded the policy yet, nothing
// is created by mistake.
func refused(g Gomega, c client.Client, ns *corev1.Namespace, msg string, also ...string) {
	var matchers []types.GomegaMatcher
	for _, m := range append([]string{msg}, also...) {
		matchers = append(matchers, ContainSubstring(m))
	}
	g.Eventually(func(g Gomega) {
		err := c.Create(context.Background(), ns.DeepCopy(), client.DryRunAll)
		g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "want refused, got %v", err)
		g.Expect(err.Error()).To(Or(matchers...))
	}, timeout, poll).Should(Succeed())
}

func selfServiceState(g Gomega, name string) *tenancyv1alpha1.Tenant {
	got := getTenant(g, name)
	c := condition(got, tenancyv1alpha1.ConditionSelfServiceReady)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
	g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	return got
}

// An owner creates namespaces of the tenant herself; a non-owner, a name outside the
// rule, a namespace over maxNamespaces, an unlabelled namespace and reserved metadata
// are refused by the generated admission policies with a message saying why. The
// namespaces the owner created get the tenant's RBAC and quota, and she may delete
// them, and get her Tenant, and nothing more.
func TestTenantSelfServiceNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant("sierra", "sierra-main").owners("sally").full().selfService(3, "sierra-").create(t)
	other := newTenant("tango", "tango-main").owners("tom").selfService(2, "tango-").create(t)
	g.Eventually(func(g Gomega) { selfServiceState(g, tn.Name); selfServiceState(g, other.Name) }, timeout, poll).Should(Succeed())

	// The generated objects: the shared policy, the Tenant's binding and its owners' role.
	var b admissionv1.ValidatingAdmissionPolicyBinding
	g.Expect(k.Get(ctx, client.ObjectKey{Name: "orderly-tenant-self-service-sierra"}, &b)).To(Succeed())
	g.Expect(b.Spec.ParamRef.Name).To(Equal("sierra"))
	g.Expect(metav1.IsControlledBy(&b, tn)).To(BeTrue())
	var role rbacv1.ClusterRole
	g.Expect(k.Get(ctx, client.ObjectKey{Name: "orderly-tenant:sierra"}, &role)).To(Succeed())
	var crb rbacv1.ClusterRoleBinding
	g.Expect(k.Get(ctx, client.ObjectKey{Name: "orderly-tenant:sierra"}, &crb)).To(Succeed())
	g.Expect(crb.Subjects).To(ConsistOf(rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacAPIGroup, Name: "sally"}))

	// nora may create namespaces, outside self-service.
	creator := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-namespace-creator"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create"}}}}
	creatorBinding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-namespace-creator"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacAPIGroup, Kind: "ClusterRole", Name: creator.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacAPIGroup, Name: "nora"}}}
	g.Expect(k.Create(ctx, creator)).To(Succeed())
	g.Expect(k.Create(ctx, creatorBinding)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(ctx, creatorBinding); _ = k.Delete(ctx, creator) })

	sally, tom, nora := as(t, "sally"), as(t, "tom"), as(t, "nora")

	// Refused, each with its reason. nora is judged by sierra's binding; tom, who may
	// create namespaces only through self-service (he owns tango), by the guard too.
	refused(g, nora, labelledNS("sierra-nora", "sierra"), "only the tenant's owners may create its namespaces, and nora is not one of its spec.owners")
	refused(g, tom, labelledNS("sierra-tom", "sierra"), "you own no self-service Tenant named sierra",
		"only the tenant's owners may create its namespaces, and tom is not one of its spec.owners")
	refused(g, sally, labelledNS("tango-sally", "tango"), "you own no self-service Tenant named tango",
		"only the tenant's owners may create its namespaces, and sally is not one of its spec.owners")
	refused(g, sally, labelledNS("elsewhere", "sierra"), "does not fit the tenant's self-service rule (names starting with sierra-)")
	refused(g, sally, labelledNS("sierra-nolabel", ""), "you may create namespaces only for a Tenant you own that allows self-service")
	privileged := labelledNS("sierra-priv", "sierra")
	privileged.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
	refused(g, sally, privileged, "may not set labels or annotations under kubernetes.io/")

	// Admitted, and then set up like a listed namespace.
	for _, name := range []string{"sierra-a", "sierra-b", "sierra-c"} {
		g.Expect(sally.Create(ctx, labelledNS(name, "sierra"))).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		got := getTenant(g, tn.Name)
		g.Expect(got.Status.SelfServiceNamespaces).To(BeEquivalentTo(3))
		g.Expect(got.Status.NamespaceCount).To(BeEquivalentTo(4))
		g.Expect(got.Status.ReadyNamespaces).To(BeEquivalentTo(4))
		i := slices.IndexFunc(got.Status.Namespaces, func(n tenancyv1alpha1.TenantNamespaceStatus) bool { return n.Name == "sierra-a" })
		g.Expect(i).To(BeNumerically(">=", 0))
		g.Expect(got.Status.Namespaces[i].State).To(Equal(tenancyv1alpha1.NamespaceReady))
		g.Expect(got.Status.Namespaces[i].SelfService).To(BeTrue())
		// A self-service namespace reports its quota like a listed one.
		g.Expect(got.Status.Namespaces[i].Quota).NotTo(BeNil())
		g.Expect(got.Status.Namespaces[i].Quota.Hard).To(HaveKey(corev1.ResourcePods))
		ns := getNS(g, "sierra-a")
		g.Expect(ns.Annotations).To(HaveKeyWithValue(tenancyv1alpha1.OriginAnnotation, tenancyv1alpha1.OriginSelfService))
		g.Expect(ns.Annotations).To(HaveKeyWithValue(tenancyv1alpha1.OwnerUIDAnnotation, string(tn.UID)))
		g.Expect(ns.Labels).To(HaveKeyWithValue(tenancyv1alpha1.CostCenterLabel, "cc-1234"))
		var owners rbacv1.RoleBinding
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "sierra-a", Name: ownersBindingName}, &owners)).To(Succeed())
		var quota corev1.ResourceQuota
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "sierra-a", Name: quotaName}, &quota)).To(Succeed())
		g.Expect(eventReasons(g, tn.Name)).To(ContainElement("SelfServiceNamespaceAdopted"))
	}, timeout, poll).Should(Succeed())

	// The fourth is over maxNamespaces: 3.
	refused(g, sally, labelledNS("sierra-d", "sierra"), "already has 3 self-service namespaces, its maximum")

	// Sally may get her Tenant and delete her self-service namespaces; not the listed
	// one, not another tenant's, and she may not list namespaces or Tenants.
	g.Expect(sally.Get(ctx, client.ObjectKey{Name: "sierra"}, &tenancyv1alpha1.Tenant{})).To(Succeed())
	g.Expect(apierrors.IsForbidden(sally.Get(ctx, client.ObjectKey{Name: "tango"}, &tenancyv1alpha1.Tenant{}))).To(BeTrue())
	g.Expect(apierrors.IsForbidden(sally.List(ctx, &corev1.NamespaceList{}))).To(BeTrue())
	g.Expect(apierrors.IsForbidden(sally.List(ctx, &tenancyv1alpha1.TenantList{}))).To(BeTrue())
	g.Expect(apierrors.IsForbidden(sally.Delete(ctx, labelledNS("sierra-main", "")))).To(BeTrue())
	g.Expect(apierrors.IsForbidden(sally.Delete(ctx, labelledNS("tango-main", "")))).To(BeTrue())
	g.Eventually(func() error { return sally.Delete(ctx, labelledNS("sierra-c", ""), client.DryRunAll) }, timeout, poll).Should(Succeed())

	// No one joins a tenant by a label on an existing namespace, not even an administrator.
	g.Expect(k.Create(ctx, labelledNS("sierra-existing", ""))).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(ctx, labelledNS("sierra-existing", "")) })
	g.Eventually(func(g Gomega) {
		ns := getNS(g, "sierra-existing")
		ns.Labels[tenancyv1alpha1.TenantLabel] = "sierra"
		err := k.Update(ctx, ns, client.DryRunAll)
		g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "want refused, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("cannot join the tenant by a label"))
	}, timeout, poll).Should(Succeed())
}

// A namespace labelled for a tenant before its self-service was enabled did not go
// through the policy: it is not taken over on its label alone, and counts for nothing.
// Removing selfService removes the binding and the owners' role, and releases the
// self-service namespaces (Orderly did not create them: never deleted).
func TestTenantSelfServiceAdoptsOnlyWhatThePolicyAdmitted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	old := labelledNS("victor-old", "victor")
	g.Expect(k.Create(ctx, old)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(ctx, labelledNS("victor-old", "")) })

	tn := newTenant("victor", "victor-main").owners("vera").policy(tenancyv1alpha1.DeletionPolicyDelete).create(t)
	waitReady(t, tn.Name)
	// Creation times have a resolution of a second: self-service is enabled in a later
	// second than the one the old namespace was created in.
	g.Eventually(func() bool { return time.Now().After(old.CreationTimestamp.Add(time.Second)) }, timeout, poll).Should(BeTrue())
	updateTenant(t, tn.Name, func(cur *tenancyv1alpha1.Tenant) {
		cur.Spec.SelfService = &tenancyv1alpha1.TenantSelfService{MaxNamespaces: 2, NamePrefix: "victor-"}
	})
	g.Eventually(func(g Gomega) {
		got := selfServiceState(g, tn.Name)
		g.Expect(got.Status.Namespaces).To(ContainElement(And(
			HaveField("Name", "victor-old"), HaveField("State", tenancyv1alpha1.NamespaceConflict),
			HaveField("Message", ContainSubstring("was not created through self-service")))))
	}, timeout, poll).Should(Succeed())
	vera := as(t, "vera")
	g.Eventually(func() error { return vera.Create(ctx, labelledNS("victor-new", "victor")) }, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		got := getTenant(g, tn.Name)
		g.Expect(got.Status.SelfServiceNamespaces).To(BeEquivalentTo(1))
		g.Expect(getNS(g, "victor-new").Annotations).To(HaveKeyWithValue(tenancyv1alpha1.OwnerUIDAnnotation, string(tn.UID)))
	}, timeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(getNS(g, "victor-old").Annotations).NotTo(HaveKey(tenancyv1alpha1.OwnerUIDAnnotation))
		g.Expect(getTenant(g, tn.Name).Status.SelfServiceNamespaces).To(BeEquivalentTo(1))
	}, "2s", "200ms").Should(Succeed())

	updateTenant(t, tn.Name, func(cur *tenancyv1alpha1.Tenant) { cur.Spec.SelfService = nil })
	g.Eventually(func(g Gomega) {
		got := getTenant(g, tn.Name)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(condition(got, tenancyv1alpha1.ConditionSelfServiceReady)).To(BeNil())
		g.Expect(got.Status.SelfServiceNamespaces).To(BeZero())
		err := k.Get(ctx, client.ObjectKey{Name: "orderly-tenant-self-service-victor"}, &admissionv1.ValidatingAdmissionPolicyBinding{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "binding: %v", err)
		// The owners keep reading their Tenant, and nothing more.
		var role rbacv1.ClusterRole
		g.Expect(k.Get(ctx, client.ObjectKey{Name: "orderly-tenant:victor"}, &role)).To(Succeed())
		g.Expect(role.Rules).To(ConsistOf(rbacv1.PolicyRule{APIGroups: []string{tenancyv1alpha1.GroupVersion.Group}, Resources: []string{"tenants"},
			Verbs: []string{"get"}, ResourceNames: []string{"victor"}}))
		ns := getNS(g, "victor-new")
		g.Expect(ns.DeletionTimestamp).To(BeNil(), "a self-service namespace is never deleted by Orderly")
		g.Expect(ns.Annotations).NotTo(HaveKey(tenancyv1alpha1.OwnerUIDAnnotation))
	}, timeout, poll).Should(Succeed())
	g.Expect(vera.Get(ctx, client.ObjectKey{Name: "victor"}, &tenancyv1alpha1.Tenant{})).To(Succeed())
	g.Expect(apierrors.IsForbidden(vera.Get(ctx, client.ObjectKey{Name: "sierra"}, &tenancyv1alpha1.Tenant{}))).To(BeTrue(), "another Tenant")
	g.Expect(apierrors.IsForbidden(vera.Create(ctx, labelledNS("victor-later", "victor"), client.DryRunAll))).To(BeTrue(), "a namespace without self-service")
}

// The self-service objects are restored when deleted behind Orderly's back; an object
// of one of their names that Orderly did not make is left alone and reported.
func TestTenantSelfServiceRepairsAndNeverOverwrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	foreign := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "orderly-tenant:whiskey"}}
	g.Expect(k.Create(ctx, foreign)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(ctx, foreign) })

	tn := newTenant("whiskey", "whiskey-main").owners("will").selfService(1, "whiskey-").create(t)
	g.Eventually(func(g Gomega) {
		c := condition(getTenant(g, tn.Name), tenancyv1alpha1.ConditionSelfServiceReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(ReasonSelfServiceConflict))
		g.Expect(c.Message).To(ContainSubstring(`ClusterRole "orderly-tenant:whiskey" exists and was not made by Orderly`))
		g.Expect(condition(getTenant(g, tn.Name), tenancyv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
	}, timeout, poll).Should(Succeed())
	var kept rbacv1.ClusterRole
	g.Expect(k.Get(ctx, client.ObjectKey{Name: foreign.Name}, &kept)).To(Succeed())
	g.Expect(kept.Rules).To(BeEmpty())
	g.Expect(kept.OwnerReferences).To(BeEmpty())

	// The foreign role is not in Orderly's cache, so its removal brings no event: the
	// Tenant looks again after a minute, or at once when it changes.
	g.Expect(k.Delete(ctx, foreign)).To(Succeed())
	updateTenant(t, tn.Name, func(cur *tenancyv1alpha1.Tenant) { cur.Spec.SelfService.MaxNamespaces = 2 })
	g.Eventually(func(g Gomega) { selfServiceState(g, tn.Name) }, timeout, poll).Should(Succeed())

	// The shared policy is deleted: a binding without its policy admits everything.
	g.Expect(k.Delete(ctx, &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: selfServicePolicyName}})).To(Succeed())
	g.Expect(k.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "orderly-tenant:whiskey"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		var p admissionv1.ValidatingAdmissionPolicy
		g.Expect(k.Get(ctx, client.ObjectKey{Name: selfServicePolicyName}, &p)).To(Succeed())
		g.Expect(p.Spec.ParamKind).NotTo(BeNil())
		g.Expect(k.Get(ctx, client.ObjectKey{Name: "orderly-tenant:whiskey"}, &rbacv1.ClusterRoleBinding{})).To(Succeed())
	}, timeout, poll).Should(Succeed())
}

// With spec.preventDeletion, the API server refuses to delete the Tenant and its
// namespaces, with a message saying how to lift it; once lifted, both may go.
func TestTenantPreventDeletion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := newTenant("yankee", "yankee-main").owners("yan")
	b.t.Spec.PreventDeletion = true
	tn := b.create(t)
	g.Eventually(func(g Gomega) {
		got := getTenant(g, tn.Name)
		c := condition(got, tenancyv1alpha1.ConditionDeletionProtected)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		g.Expect(getNS(g, "yankee-main").Labels).To(HaveKeyWithValue(tenancyv1alpha1.PreventDeletionLabel, "true"))
	}, timeout, poll).Should(Succeed())

	g.Eventually(func(g Gomega) {
		err := k.Delete(ctx, labelledNS("yankee-main", ""), client.DryRunAll)
		g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "want refused, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("namespace yankee-main belongs to tenant yankee, which has spec.preventDeletion: lift it first (kubectl patch tenant yankee --type merge"))
		err = k.Delete(ctx, &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tn.Name}}, client.DryRunAll)
		g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "want refused, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("Tenant yankee has spec.preventDeletion: lift it first"))
	}, timeout, poll).Should(Succeed())

	updateTenant(t, tn.Name, func(cur *tenancyv1alpha1.Tenant) { cur.Spec.PreventDeletion = false })
	g.Eventually(func(g Gomega) {
		got := getTenant(g, tn.Name)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(condition(got, tenancyv1alpha1.ConditionDeletionProtected)).To(BeNil())
		g.Expect(getNS(g, "yankee-main").Labels).NotTo(HaveKey(tenancyv1alpha1.PreventDeletionLabel))
		g.Expect(k.Delete(ctx, labelledNS("yankee-main", ""), client.DryRunAll)).To(Succeed())
		g.Expect(k.Delete(ctx, &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tn.Name}}, client.DryRunAll)).To(Succeed())
	}, timeout, poll).Should(Succeed())
}

// spec.allowed: in the tenant's namespaces, a PVC of a storage class, a pod of an
// image registry, a pod template of a priority class outside the lists are refused
// with a message naming what is allowed; what is allowed is admitted; other
// namespaces are not concerned; status says what is allowed.
func TestTenantAllowedClassesAndRegistries(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := newTenant("xray", "xray-main").owners("xavier")
	b.t.Spec.Allowed = &tenancyv1alpha1.TenantAllowed{
		StorageClasses:  []string{"fast"},
		PriorityClasses: []string{"batch-low"},
		Registries:      []string{"ghcr.io/acme/", "*.example.com/"},
	}
	tn := b.create(t)
	g.Eventually(func(g Gomega) {
		c := condition(getTenant(g, tn.Name), tenancyv1alpha1.ConditionAllowedEnforced)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		g.Expect(c.Message).To(ContainSubstring("storage classes fast"))
		g.Expect(c.Message).To(ContainSubstring("registries ghcr.io/acme/, *.example.com/"))
	}, timeout, poll).Should(Succeed())

	pvc := func(ns, class string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: &class,
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
	}
	pod := func(ns, image, priority string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
			Spec:       corev1.PodSpec{PriorityClassName: priority, Containers: []corev1.Container{{Name: "app", Image: image}}},
		}
	}
	refusedWrite := func(obj client.Object, msg string) {
		g.Eventually(func(g Gomega) {
			err := k.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)
			g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "want refused, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(msg))
		}, timeout, poll).Should(Succeed())
	}
	refusedWrite(pvc("xray-main", "slow"), "PersistentVolumeClaim xray-main/data in tenant xray: storage class slow is not allowed; allowed: fast")
	refusedWrite(pod("xray-main", "nginx", ""), "Pod xray-main/app in tenant xray: image nginx is not from an allowed registry; allowed: ghcr.io/acme/, *.example.com/")
	refusedWrite(pod("xray-main", "ghcr.io/other/app:1", ""), "image ghcr.io/other/app:1 is not from an allowed registry")
	high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "xray-high"}, Value: 1000}
	g.Expect(k.Create(ctx, high)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(ctx, high) })
	refusedWrite(pod("xray-main", "ghcr.io/acme/app:1", "xray-high"), "priority class xray-high is not allowed; allowed: batch-low")

	g.Expect(k.Create(ctx, pvc("xray-main", "fast"), client.DryRunAll)).To(Succeed())
	g.Expect(k.Create(ctx, pod("xray-main", "ghcr.io/acme/app:1", ""), client.DryRunAll)).To(Succeed())
	// An ephemeral container (kubectl debug) added to a running pod is judged too.
	running := pod("xray-main", "ghcr.io/acme/app:1", "")
	running.Name = "debug-target"
	g.Expect(k.Create(ctx, running)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), running) })
	debug := func(image string) *corev1.Pod {
		p := running.DeepCopy()
		p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debug", Image: image, ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		}}}
		return p
	}
	err := k.SubResource("ephemeralcontainers").Update(ctx, debug("busybox"))
	g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "want refused, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("image busybox is not from an allowed registry"))
	g.Expect(k.SubResource("ephemeralcontainers").Update(ctx, debug("ghcr.io/acme/debug:1"))).To(Succeed())
	g.Expect(k.Create(ctx, pod("xray-main", "registry.example.com/team/app@sha256:"+strings.Repeat("a", 64), ""), client.DryRunAll)).To(Succeed())
	// Outside the tenant, nothing changes.
	g.Expect(k.Create(ctx, pvc("default", "slow"), client.DryRunAll)).To(Succeed())

	// Lifted: the binding goes and the condition with it.
	updateTenant(t, tn.Name, func(cur *tenancyv1alpha1.Tenant) { cur.Spec.Allowed = nil })
	g.Eventually(func(g Gomega) {
		got := getTenant(g, tn.Name)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(condition(got, tenancyv1alpha1.ConditionAllowedEnforced)).To(BeNil())
		g.Expect(k.Create(ctx, pvc("xray-main", "slow"), client.DryRunAll)).To(Succeed())
	}, timeout, poll).Should(Succeed())
}
