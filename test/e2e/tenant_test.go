//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

const (
	timeout = 90 * time.Second
	poll    = 250 * time.Millisecond
)

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }

func httpGet(url string) ([]byte, error) {
	resp, err := http.Get(url) //nolint:gosec,noctx // loopback URL built by the test
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

func tenant(name, policy string, namespaces ...string) *tenancyv1alpha1.Tenant {
	t := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}}
	t.Spec.Owners = []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: name + "-owner"}}
	t.Spec.DeletionPolicy = tenancyv1alpha1.DeletionPolicy(policy)
	t.Spec.Quota = &tenancyv1alpha1.TenantQuota{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("20")}}
	t.Spec.LimitRange = &tenancyv1alpha1.TenantLimitRange{Default: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}
	for _, ns := range namespaces {
		t.Spec.Namespaces = append(t.Spec.Namespaces, tenancyv1alpha1.TenantNamespace{Name: ns})
	}
	return t
}

func waitTenantReady(g Gomega, name string) {
	g.Eventually(func(g Gomega) {
		var t tenancyv1alpha1.Tenant
		g.Expect(k.Get(context.Background(), client.ObjectKey{Name: name}, &t)).To(Succeed())
		c := meta.FindStatusCondition(t.Status.Conditions, tenancyv1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		g.Expect(t.Status.ObservedGeneration).To(Equal(t.Generation))
	}, timeout, poll).Should(Succeed())
}

func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
					// kwok nodes carry this taint; real workloads on kwok need the toleration.
					Tolerations: []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
				},
			},
		},
	}
}

func readyPods(g Gomega, ns, app string) int {
	var pods corev1.PodList
	g.Expect(k.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
	n := 0
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
				n++
			}
		}
	}
	return n
}

// TestRetainKeepsWorkloadsAndGarbageCollectsOrderlysObjects: deleting a Tenant with
// deletionPolicy Retain leaves its namespace and the workload in it running, while the
// cluster's garbage collector removes the RoleBinding, quota, limits and policy.
func TestRetainKeepsWorkloadsAndGarbageCollectsOrderlysObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := tenant("e2e-retain", "Retain", "e2e-retain-dev")
	g.Expect(k.Create(ctx, tn)).To(Succeed())
	waitTenantReady(g, tn.Name)

	// The owner really is an admin in the tenant namespace, and nowhere else.
	g.Expect(canCreateDeployments("e2e-retain-owner", "e2e-retain-dev")).To(BeTrue())
	g.Expect(canCreateDeployments("e2e-retain-owner", "default")).To(BeFalse())

	g.Expect(k.Create(ctx, deployment("e2e-retain-dev", "web", 2))).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(readyPods(g, "e2e-retain-dev", "web")).To(Equal(2)) }, timeout, poll).Should(Succeed())

	// Metrics report the tenant's ready namespaces.
	g.Eventually(func(g Gomega) {
		body, err := httpGet(metricsURL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(body)).To(ContainSubstring(`orderly_tenant_namespaces_ready{tenant="e2e-retain"} 1`))
	}, timeout, poll).Should(Succeed())

	g.Expect(k.Delete(ctx, tn)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k.Get(ctx, client.ObjectKey{Name: tn.Name}, &tenancyv1alpha1.Tenant{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		// Garbage collection by kube-controller-manager, through owner references.
		for _, obj := range []client.Object{&rbacv1.RoleBinding{}, &corev1.ResourceQuota{}, &corev1.LimitRange{}, &networkingv1.NetworkPolicy{}} {
			names := map[string]string{"*v1.RoleBinding": "orderly-tenant-owners", "*v1.ResourceQuota": "orderly-tenant-quota", "*v1.LimitRange": "orderly-tenant-limits", "*v1.NetworkPolicy": "orderly-tenant-isolation"}
			name := names[fmt.Sprintf("%T", obj)]
			err := k.Get(ctx, client.ObjectKey{Namespace: "e2e-retain-dev", Name: name}, obj)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s should be garbage-collected", obj, name)
		}
	}, timeout, poll).Should(Succeed())

	var ns corev1.Namespace
	g.Expect(k.Get(ctx, client.ObjectKey{Name: "e2e-retain-dev"}, &ns)).To(Succeed())
	g.Expect(ns.DeletionTimestamp).To(BeNil())
	g.Expect(ns.Labels).NotTo(HaveKey(tenancyv1alpha1.TenantLabel))
	g.Consistently(func(g Gomega) { g.Expect(readyPods(g, "e2e-retain-dev", "web")).To(Equal(2)) }, "5s", "500ms").Should(Succeed())
}

// TestDeletePolicyRemovesNamespaces: with Delete, a namespace Orderly created is
// deleted, and the cluster's namespace controller removes what was in it.
func TestDeletePolicyRemovesNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := tenant("e2e-delete", "Delete", "e2e-delete-a", "e2e-delete-b")
	g.Expect(k.Create(ctx, tn)).To(Succeed())
	waitTenantReady(g, tn.Name)
	g.Expect(k.Create(ctx, deployment("e2e-delete-a", "api", 1))).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(readyPods(g, "e2e-delete-a", "api")).To(Equal(1)) }, timeout, poll).Should(Succeed())

	// Removing a namespace from the list deletes it (Orderly created it).
	g.Eventually(func(g Gomega) {
		var cur tenancyv1alpha1.Tenant
		g.Expect(k.Get(ctx, client.ObjectKey{Name: tn.Name}, &cur)).To(Succeed())
		cur.Spec.Namespaces = cur.Spec.Namespaces[:1]
		g.Expect(k.Update(ctx, &cur)).To(Succeed())
	}, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		err := k.Get(ctx, client.ObjectKey{Name: "e2e-delete-b"}, &corev1.Namespace{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}, timeout, poll).Should(Succeed())

	g.Expect(k.Delete(ctx, tn)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k.Get(ctx, client.ObjectKey{Name: "e2e-delete-a"}, &corev1.Namespace{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "namespace and its workload are gone")
	}, 3*timeout, poll).Should(Succeed())
}

// TestDriftIsRepairedInTheRealCluster: a deleted RoleBinding and an edited quota are
// restored by the running manager.
func TestDriftIsRepairedInTheRealCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := tenant("e2e-drift", "Retain", "e2e-drift-dev")
	g.Expect(k.Create(ctx, tn)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), tn) })
	waitTenantReady(g, tn.Name)

	g.Expect(k.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "e2e-drift-dev", Name: "orderly-tenant-owners"}})).To(Succeed())
	var q corev1.ResourceQuota
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "e2e-drift-dev", Name: "orderly-tenant-quota"}, &q)).To(Succeed())
	q.Spec.Hard[corev1.ResourcePods] = resource.MustParse("1000")
	g.Expect(k.Update(ctx, &q)).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "e2e-drift-dev", Name: "orderly-tenant-owners"}, &rbacv1.RoleBinding{})).To(Succeed())
		var q corev1.ResourceQuota
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "e2e-drift-dev", Name: "orderly-tenant-quota"}, &q)).To(Succeed())
		g.Expect(q.Spec.Hard.Pods().String()).To(Equal("20"))
	}, timeout, poll).Should(Succeed())
}

// canCreateDeployments asks the API server's authorizer whether user may create
// Deployments in ns.
func canCreateDeployments(user, ns string) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               user,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "apps", Resource: "deployments"},
	}}
	res, err := clientset.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	if res.Status.EvaluationError != "" && !strings.Contains(res.Status.EvaluationError, "not found") {
		return false, fmt.Errorf("%s", res.Status.EvaluationError)
	}
	return res.Status.Allowed, nil
}

// access asks the API server's authorizer whether user (in groups) may verb the
// resource of group, named name ("" for any), in namespace ns ("" for cluster-wide).
func access(user string, groups []string, verb, group, resource, ns, name string) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               user,
		Groups:             groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: resource, Name: name},
	}}
	res, err := clientset.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return res.Status.Allowed, nil
}

// TestTenantCannotBindClusterAdmin plays whoever may create a Tenant: asking for
// cluster-admin in a tenant namespace is refused by the manager (the allow-list), and
// even a manager told to allow it cannot bind it (its RBAC grants bind only on the
// roles Tenants may bind by default).
func TestTenantCannotBindClusterAdmin(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	// The manager's ServiceAccount, with the RBAC of config/rbac.
	manager := "system:serviceaccount:" + managerNamespace + ":" + managerSA
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + managerNamespace, "system:authenticated"}
	for _, c := range []struct {
		verb, group, resource, ns, name string
		want                            bool
	}{
		{"bind", "rbac.authorization.k8s.io", "clusterroles", "", "cluster-admin", false},
		{"bind", "rbac.authorization.k8s.io", "clusterroles", "", "admin", false},
		{"bind", "rbac.authorization.k8s.io", "roles", "default", "anything", false},
		{"escalate", "rbac.authorization.k8s.io", "clusterroles", "", "", false},
		{"bind", "rbac.authorization.k8s.io", "clusterroles", "", "orderly-tenant-admin", true},
		{"bind", "rbac.authorization.k8s.io", "clusterroles", "", "edit", true},
		{"delete", "rbac.authorization.k8s.io", "rolebindings", "kube-system", "system::leader-locking-kube-scheduler", false},
		{"patch", "rbac.authorization.k8s.io", "rolebindings", "default", "someone-elses", false},
		{"update", "rbac.authorization.k8s.io", "rolebindings", "default", "orderly-tenant-owners", false},
		{"delete", "rbac.authorization.k8s.io", "rolebindings", "default", "orderly-tenant-owners", true},
		{"delete", "networking.k8s.io", "networkpolicies", "default", "someone-elses", false},
		{"delete", "", "resourcequotas", "default", "someone-elses", false},
		{"update", "tenancy.orderly.dev", "tenants", "", "x", false},
	} {
		got, err := access(manager, groups, c.verb, c.group, c.resource, c.ns, c.name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(c.want), "manager may %s %s/%s %q in %q", c.verb, c.group, c.resource, c.name, c.ns)
	}

	tn := tenant("e2e-bind", "Retain", "e2e-bind-dev")
	tn.Spec.AdditionalRoleBindings = []tenancyv1alpha1.TenantRoleBinding{{
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "mallory"}},
	}}
	g.Expect(k.Create(ctx, tn)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), tn) })
	noClusterAdmin := func(g Gomega) {
		var rbs rbacv1.RoleBindingList
		g.Expect(k.List(ctx, &rbs, client.InNamespace("e2e-bind-dev"))).To(Succeed())
		for _, rb := range rbs.Items {
			g.Expect(rb.RoleRef.Name).NotTo(Equal("cluster-admin"), "RoleBinding %s", rb.Name)
		}
		can, err := canCreateDeployments("mallory", "e2e-bind-dev")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(can).To(BeFalse())
	}

	// The allow-list refuses it; the rest of the Tenant is created.
	g.Eventually(func(g Gomega) {
		var cur tenancyv1alpha1.Tenant
		g.Expect(k.Get(ctx, client.ObjectKey{Name: tn.Name}, &cur)).To(Succeed())
		c := meta.FindStatusCondition(cur.Status.Conditions, tenancyv1alpha1.ConditionRoleBindingsAllowed)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal("RoleNotAllowed"))
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "e2e-bind-dev", Name: "orderly-tenant-owners"}, &rbacv1.RoleBinding{})).To(Succeed())
		body, err := httpGet(metricsURL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(body)).To(ContainSubstring(`orderly_tenant_refused_role_bindings{tenant="e2e-bind"} 1`))
	}, timeout, poll).Should(Succeed())
	g.Consistently(noClusterAdmin, "3s", "500ms").Should(Succeed())

	// A manager told to allow cluster-admin still cannot bind it: the API server refuses,
	// the Tenant says how to fix it, and the manager said so when it started.
	restartManager(t, "--tenant-bindable-clusterroles=edit,view,cluster-admin")
	g.Eventually(func(g Gomega) {
		var cur tenancyv1alpha1.Tenant
		g.Expect(k.Get(ctx, client.ObjectKey{Name: tn.Name}, &cur)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, tenancyv1alpha1.ConditionRoleBindingsAllowed)).To(BeTrue())
		c := meta.FindStatusCondition(cur.Status.Conditions, tenancyv1alpha1.ConditionResourcesReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring("the manager may not bind it"))
	}, timeout, poll).Should(Succeed())
	g.Consistently(noClusterAdmin, "3s", "500ms").Should(Succeed())
	logs, err := os.ReadFile(managerLog)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(logs)).To(ContainSubstring("Tenants may bind ClusterRoles the manager may not bind"))
}

// TestTenantOwnersAndEditorsUseDevDatabases: the user-facing ClusterRoles of
// config/rbac are aggregated, so a Tenant's owners and the people bound to edit may
// create DevDatabases and BackupVerifications in the tenant's namespace, view may read
// them, and none of them
// may create the platform's cluster-scoped kinds.
func TestTenantOwnersAndEditorsUseDevDatabases(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := tenant("e2e-roles", "Retain", "e2e-roles-dev")
	tn.Spec.AdditionalRoleBindings = []tenancyv1alpha1.TenantRoleBinding{
		{RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"}, Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "e2e-roles-editor"}}},
		{RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"}, Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "e2e-roles-viewer"}}},
	}
	g.Expect(k.Create(ctx, tn)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), tn) })
	waitTenantReady(g, tn.Name)

	const data = "data.orderly.dev"
	for _, c := range []struct {
		user, verb, group, resource, ns string
		want                            bool
	}{
		{"e2e-roles-owner", "create", data, "devdatabases", "e2e-roles-dev", true},
		{"e2e-roles-editor", "create", data, "devdatabases", "e2e-roles-dev", true},
		{"e2e-roles-editor", "delete", data, "devdatabases", "e2e-roles-dev", true},
		{"e2e-roles-viewer", "list", data, "devdatabases", "e2e-roles-dev", true},
		{"e2e-roles-viewer", "create", data, "devdatabases", "e2e-roles-dev", false},
		{"e2e-roles-owner", "create", data, "backupverifications", "e2e-roles-dev", true},
		{"e2e-roles-editor", "create", data, "backupverifications", "e2e-roles-dev", true},
		{"e2e-roles-viewer", "list", data, "backupverifications", "e2e-roles-dev", true},
		{"e2e-roles-viewer", "create", data, "backupverifications", "e2e-roles-dev", false},
		{"e2e-roles-owner", "create", data, "devdatabases", "default", false},
		{"e2e-roles-owner", "create", "tenancy.orderly.dev", "tenants", "", false},
		{"e2e-roles-owner", "create", data, "databaseservers", "", false},
		{"e2e-roles-owner", "create", "power.orderly.dev", "sleepschedules", "", false},
		{"e2e-roles-owner", "create", "policy.orderly.dev", "labelpolicies", "", false},
	} {
		// The aggregation controller fills the aggregated roles in shortly after start.
		g.Eventually(func(g Gomega) {
			got, err := access(c.user, nil, c.verb, c.group, c.resource, c.ns, "")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(c.want), "%s may %s %s in %q", c.user, c.verb, c.resource, c.ns)
		}, timeout, poll).Should(Succeed())
	}
}

// TestTenantLeavesOrderlysNamespaceAlone: a Tenant that lists the manager's own
// namespace gets no hold on it (no labels, no RoleBindings), only a conflict.
func TestTenantLeavesOrderlysNamespaceAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := tenant("e2e-own", "Delete", "e2e-own-dev", managerNamespace)
	g.Expect(k.Create(ctx, tn)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), tn) })
	g.Eventually(func(g Gomega) {
		var cur tenancyv1alpha1.Tenant
		g.Expect(k.Get(ctx, client.ObjectKey{Name: tn.Name}, &cur)).To(Succeed())
		c := meta.FindStatusCondition(cur.Status.Conditions, tenancyv1alpha1.ConditionNamespaceConflict)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("Orderly's own namespace"))
		g.Expect(cur.Status.ReadyNamespaces).To(BeEquivalentTo(1))
	}, timeout, poll).Should(Succeed())
	var ns corev1.Namespace
	g.Expect(k.Get(ctx, client.ObjectKey{Name: managerNamespace}, &ns)).To(Succeed())
	g.Expect(ns.Labels).NotTo(HaveKey(tenancyv1alpha1.TenantLabel))
	g.Expect(ns.Annotations).NotTo(HaveKey(tenancyv1alpha1.OwnerUIDAnnotation))
	err := k.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: "orderly-tenant-owners"}, &rbacv1.RoleBinding{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
}
