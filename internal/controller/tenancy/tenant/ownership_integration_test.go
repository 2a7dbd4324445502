//go:build integration

package tenant

import (
	"time"

	"context"
	"fmt"
	"maps"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/labels"
	"orderly.dev/orderly/internal/testing/testenv"
)

// applyAs writes obj (JSON) with server-side apply as another field manager would.
func applyAs(g Gomega, manager string, force bool, obj string) {
	u := &unstructured.Unstructured{}
	g.Expect(u.UnmarshalJSON([]byte(obj))).To(Succeed())
	opts := []client.ApplyOption{client.FieldOwner(manager)}
	if force {
		opts = append(opts, client.ForceOwnership)
	}
	g.Expect(k.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), opts...)).To(Succeed())
}

// updateTenant changes a Tenant's spec, retrying on conflicts with the controller.
func updateTenant(t *testing.T, name string, change func(*tenancyv1alpha1.Tenant)) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		cur := getTenant(g, name)
		change(cur)
		g.Expect(k.Update(context.Background(), cur)).To(Succeed())
	}, timeout, poll).Should(Succeed())
}

// versions are the resourceVersions of a namespace and of every object Orderly may
// keep in it: unchanged versions mean nobody wrote.
func versions(g Gomega, namespace string) map[string]string {
	ctx := context.Background()
	out := map[string]string{"Namespace": getNS(g, namespace).ResourceVersion}
	var rbs rbacv1.RoleBindingList
	var quotas corev1.ResourceQuotaList
	var lrs corev1.LimitRangeList
	var nps networkingv1.NetworkPolicyList
	for _, list := range []client.ObjectList{&rbs, &quotas, &lrs, &nps} {
		g.Expect(k.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
	}
	for _, o := range rbs.Items {
		out["RoleBinding/"+o.Name] = o.ResourceVersion
	}
	for _, o := range quotas.Items {
		out["ResourceQuota/"+o.Name] = o.ResourceVersion
	}
	for _, o := range lrs.Items {
		out["LimitRange/"+o.Name] = o.ResourceVersion
	}
	for _, o := range nps.Items {
		out["NetworkPolicy/"+o.Name] = o.ResourceVersion
	}
	return out
}

// expectQuiet checks that, once converged, Orderly writes nothing more in namespace.
// It first waits for a second without writes: what the caller waited for can be
// visible before the reconcile that made it has written its last object (a
// migration moves field ownership after the labels look right), and on a loaded
// machine that last write lands inside the quiet window.
func expectQuiet(t *testing.T, namespace, tenant string) {
	t.Helper()
	g := NewWithT(t)
	var before map[string]string
	var tenantBefore string
	g.Eventually(func(g Gomega) {
		first, firstTenant := versions(g, namespace), getTenant(g, tenant).ResourceVersion
		time.Sleep(time.Second)
		before, tenantBefore = versions(g, namespace), getTenant(g, tenant).ResourceVersion
		g.Expect(before).To(Equal(first))
		g.Expect(tenantBefore).To(Equal(firstTenant))
	}, timeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(versions(g, namespace)).To(Equal(before))
		g.Expect(getTenant(g, tenant).ResourceVersion).To(Equal(tenantBefore))
	}, "2s", "200ms").Should(Succeed())
}

// Orderly owns the namespace labels it sets through server-side apply, shared with
// other writers: when the Tenant stops setting a label, Orderly removes it only when
// no one else set it too, and never touches labels it did not set.
func TestTenantSharesNamespaceLabelsWithOtherWriters(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := newTenant("kilo", "kilo-dev")
	b.t.Spec.Namespaces[0].Labels = map[string]string{"env": "dev", "shared": "yes"}
	b.t.Spec.Namespaces[0].Annotations = map[string]string{"kilo-note": "n"}
	tn := b.create(t)
	waitReady(t, tn.Name)
	g.Expect(getNS(g, "kilo-dev").Annotations).NotTo(HaveKey(legacyManagedKeysAnnotation), "no bookkeeping annotation of Orderly's own")

	// A person labels the namespace by hand (kubectl label is an update), and another
	// tool applies a label of its own and the one the Tenant sets, with the same value.
	ns := getNS(g, "kilo-dev")
	ns.Labels["person"] = "p"
	g.Expect(k.Update(ctx, ns, client.FieldOwner("kubectl-label"))).To(Succeed())
	applyAs(g, "gitops", false, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kilo-dev","labels":{"gitops":"g","shared":"yes"}}}`)

	updateTenant(t, tn.Name, func(cur *tenancyv1alpha1.Tenant) {
		cur.Spec.Namespaces[0].Labels = nil
		cur.Spec.Namespaces[0].Annotations = nil
	})
	waitReady(t, tn.Name)
	g.Eventually(func(g Gomega) {
		ns := getNS(g, "kilo-dev")
		g.Expect(ns.Labels).NotTo(HaveKey("env"), "only Orderly set env: it goes")
		g.Expect(ns.Annotations).NotTo(HaveKey("kilo-note"))
		g.Expect(ns.Labels).To(HaveKeyWithValue("shared", "yes"), "gitops set shared too: it stays")
		g.Expect(ns.Labels).To(HaveKeyWithValue("gitops", "g"))
		g.Expect(ns.Labels).To(HaveKeyWithValue("person", "p"))
		g.Expect(ns.Labels).To(HaveKeyWithValue(tenancyv1alpha1.TenantLabel, "kilo"))
		g.Expect(ns.Annotations).To(HaveKeyWithValue(tenancyv1alpha1.OriginAnnotation, tenancyv1alpha1.OriginCreated))
		g.Expect(ns.Annotations).NotTo(HaveKey(legacyManagedKeysAnnotation))
	}, timeout, poll).Should(Succeed())
	expectQuiet(t, "kilo-dev", tn.Name)

	// Released, the namespace keeps what others set; everything only Orderly set goes.
	updateTenant(t, tn.Name, func(cur *tenancyv1alpha1.Tenant) {
		cur.Spec.Namespaces[0].Name = "kilo-other"
	})
	g.Eventually(func(g Gomega) {
		ns := getNS(g, "kilo-dev")
		g.Expect(ns.Labels).To(Equal(map[string]string{
			"kubernetes.io/metadata.name": "kilo-dev", "shared": "yes", "gitops": "g", "person": "p",
		}))
		g.Expect(ns.Annotations).To(BeEmpty())
	}, timeout, poll).Should(Succeed())
}

// A namespace written by an earlier Orderly carries the keys it set in an annotation
// of its own, and Orderly's fields are recorded as updates, not applies. The first
// reconcile removes the listed keys that are no longer wanted (unless another writer
// owns them) and the annotation; from then on, keys dropped from the spec go.
func TestTenantMigratesLegacyManagedKeys(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := newTenant("lima", "lima-dev")
	b.t.Spec.CostCenter = "cc-1"
	b.t.Spec.Namespaces[0].Labels = map[string]string{"env": "dev"}
	b.t.Spec.Namespaces[0].Annotations = map[string]string{"kept-anno": "k"}
	tn := b.create(t)
	waitReady(t, tn.Name)

	ns := getNS(g, "lima-dev")
	ns.Labels["person"] = "p"
	g.Expect(k.Update(ctx, ns, client.FieldOwner("kubectl-label"))).To(Succeed())
	applyAs(g, "gitops", false, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"lima-dev","labels":{"co-owned":"c"}}}`)
	// What an earlier Orderly left: keys it set with merge patches, and its list.
	legacy := `{"metadata":{"labels":{"retired":"r","co-owned":"c"},"annotations":{"retired-anno":"r",` +
		`"tenancy.orderly.dev/managed-keys":"{\"labels\":[\"co-owned\",\"cost-center\",\"env\",\"retired\",\"tenancy.orderly.dev/tenant\"],\"annotations\":[\"kept-anno\",\"retired-anno\"]}"}}}`
	g.Expect(k.Patch(ctx, getNS(g, "lima-dev"), client.RawPatch(types.MergePatchType, []byte(legacy)), client.FieldOwner(labels.FieldManager))).To(Succeed())

	g.Eventually(func(g Gomega) {
		ns := getNS(g, "lima-dev")
		g.Expect(ns.Annotations).NotTo(HaveKey(legacyManagedKeysAnnotation))
		g.Expect(ns.Labels).NotTo(HaveKey("retired"))
		g.Expect(ns.Annotations).NotTo(HaveKey("retired-anno"))
		g.Expect(ns.Labels).To(HaveKeyWithValue("co-owned", "c"), "listed, but gitops owns it")
		g.Expect(ns.Labels).To(HaveKeyWithValue("person", "p"))
		g.Expect(ns.Labels).To(HaveKeyWithValue("env", "dev"))
		g.Expect(ns.Labels).To(HaveKeyWithValue(tenancyv1alpha1.CostCenterLabel, "cc-1"))
		g.Expect(ns.Labels).To(HaveKeyWithValue(tenancyv1alpha1.TenantLabel, "lima"))
		g.Expect(ns.Annotations).To(HaveKeyWithValue("kept-anno", "k"))
		g.Expect(ns.Annotations).To(HaveKeyWithValue(tenancyv1alpha1.OriginAnnotation, tenancyv1alpha1.OriginCreated))
	}, timeout, poll).Should(Succeed())
	expectQuiet(t, "lima-dev", tn.Name)

	updateTenant(t, tn.Name, func(cur *tenancyv1alpha1.Tenant) {
		cur.Spec.CostCenter = ""
		cur.Spec.Namespaces[0].Labels = nil
		cur.Spec.Namespaces[0].Annotations = nil
	})
	waitReady(t, tn.Name)
	g.Eventually(func(g Gomega) {
		ns := getNS(g, "lima-dev")
		g.Expect(ns.Labels).NotTo(HaveKey("env"))
		g.Expect(ns.Labels).NotTo(HaveKey(tenancyv1alpha1.CostCenterLabel))
		g.Expect(ns.Annotations).NotTo(HaveKey("kept-anno"))
		g.Expect(ns.Labels).To(HaveKeyWithValue("co-owned", "c"))
		g.Expect(ns.Labels).To(HaveKeyWithValue("person", "p"))
	}, timeout, poll).Should(Succeed())
}

// Another field manager that takes fields of Orderly's objects over with a forced
// apply gets them taken back; fields it added of its own are its own.
func TestTenantRestoresChildrenTakenOverByAnotherManager(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant("mike", "mike-dev").owners("mia").full().create(t)
	waitReady(t, tn.Name)

	applyAs(g, "intruder", true, `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"namespace":"mike-dev","name":"`+quotaName+`"},`+
		`"spec":{"hard":{"pods":"999","services":"5"}}}`)
	applyAs(g, "intruder", true, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"namespace":"mike-dev","name":"`+ownersBindingName+`"},`+
		`"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"`+tenancyv1alpha1.TenantAdminClusterRole+`"},`+
		`"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"mallory"}]}`)
	applyAs(g, "intruder", true, `{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"namespace":"mike-dev","name":"`+networkPolicyName+`"},`+
		`"spec":{"podSelector":{},"ingress":[{}]}}`)

	g.Eventually(func(g Gomega) {
		var q corev1.ResourceQuota
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "mike-dev", Name: quotaName}, &q)).To(Succeed())
		g.Expect(q.Spec.Hard.Pods().String()).To(Equal("20"))
		g.Expect(q.Spec.Hard.Name(corev1.ResourceRequestsCPU, "").String()).To(Equal("4"))
		g.Expect(q.Spec.Hard.Name(corev1.ResourceServices, "").String()).To(Equal("5"), "a field only the other manager set is its own")
		var rb rbacv1.RoleBinding
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "mike-dev", Name: ownersBindingName}, &rb)).To(Succeed())
		g.Expect(rb.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "mia"}), "subjects are one list: Orderly's, whole")
		var np networkingv1.NetworkPolicy
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "mike-dev", Name: networkPolicyName}, &np)).To(Succeed())
		g.Expect(np.Spec.Ingress).To(HaveLen(1))
		g.Expect(np.Spec.Ingress[0].From).To(HaveLen(2))
		g.Expect(eventReasons(g, "mike")).To(ContainElement("Repaired"))
		g.Expect(testenv.SeriesOf(g, "orderly_tenant_drift_repairs_total", map[string]string{"tenant": "mike", "kind": kindResourceQuota})).To(Equal(1))
	}, timeout, poll).Should(Succeed())
	expectQuiet(t, "mike-dev", tn.Name)
}

// roleRef cannot change in place: a binding whose role changes is replaced, one whose
// subjects change is updated in place, and neither is written again once converged.
func TestTenantReplacesRoleBindingOnlyWhenRoleRefChanges(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := newTenant("november", "november-dev")
	b.t.Spec.AdditionalRoleBindings = []tenancyv1alpha1.TenantRoleBinding{{
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacAPIGroup, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "auditors"}},
	}}
	tn := b.create(t)
	waitReady(t, tn.Name)
	key := client.ObjectKey{Namespace: "november-dev", Name: extraBindingPrefix + "0"}
	var rb rbacv1.RoleBinding
	g.Expect(k.Get(ctx, key, &rb)).To(Succeed())
	first := rb.UID

	updateTenant(t, tn.Name, func(cur *tenancyv1alpha1.Tenant) {
		cur.Spec.AdditionalRoleBindings[0].Subjects = append(cur.Spec.AdditionalRoleBindings[0].Subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "readers"})
	})
	waitReady(t, tn.Name)
	g.Eventually(func(g Gomega) {
		var rb rbacv1.RoleBinding
		g.Expect(k.Get(ctx, key, &rb)).To(Succeed())
		g.Expect(rb.Subjects).To(HaveLen(2))
		g.Expect(rb.UID).To(Equal(first), "updated in place")
	}, timeout, poll).Should(Succeed())
	expectQuiet(t, "november-dev", tn.Name)

	updateTenant(t, tn.Name, func(cur *tenancyv1alpha1.Tenant) {
		cur.Spec.AdditionalRoleBindings[0].RoleRef.Name = "edit"
	})
	waitReady(t, tn.Name)
	g.Eventually(func(g Gomega) {
		var rb rbacv1.RoleBinding
		g.Expect(k.Get(ctx, key, &rb)).To(Succeed())
		g.Expect(rb.RoleRef.Name).To(Equal("edit"))
		g.Expect(rb.UID).NotTo(Equal(first), "replaced")
		g.Expect(rb.Subjects).To(HaveLen(2))
	}, timeout, poll).Should(Succeed())
	expectQuiet(t, "november-dev", tn.Name)
}

// A Tenant's series go when it goes: series of deleted Tenants do not pile up.
func TestTenantMetricSeriesGoWithTheTenant(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant("oscar", "oscar-dev").create(t)
	waitReady(t, tn.Name)
	g.Expect(k.Delete(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "oscar-dev", Name: networkPolicyName}})).To(Succeed())
	names := []string{"orderly_tenant_namespaces_ready", "orderly_tenant_namespaces", "orderly_tenant_drift_repairs_total"}
	g.Eventually(func(g Gomega) {
		for _, name := range names {
			g.Expect(testenv.SeriesOf(g, name, map[string]string{"tenant": "oscar"})).To(Equal(1), name)
		}
	}, timeout, poll).Should(Succeed())

	g.Expect(k.Delete(ctx, tn)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k.Get(ctx, client.ObjectKey{Name: tn.Name}, &tenancyv1alpha1.Tenant{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		for _, name := range names {
			g.Expect(testenv.SeriesOf(g, name, map[string]string{"tenant": "oscar"})).To(BeZero(), name)
		}
	}, timeout, poll).Should(Succeed())
}

// Creating a Tenant writes each object once: the namespace and every child are
// created whole, and not written again to move them onto server-side apply (the
// Tenant benchmark counts on it).
func TestTenantWritesEachObjectOnceWhenCreating(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())

	var mu sync.Mutex
	seen := map[string][]watch.EventType{}
	lists := map[client.ObjectList][]client.ListOption{
		&corev1.NamespaceList{}:           {client.MatchingFields{"metadata.name": "papa-dev"}},
		&rbacv1.RoleBindingList{}:         {client.InNamespace("papa-dev")},
		&corev1.ResourceQuotaList{}:       {client.InNamespace("papa-dev")},
		&corev1.LimitRangeList{}:          {client.InNamespace("papa-dev")},
		&networkingv1.NetworkPolicyList{}: {client.InNamespace("papa-dev")},
	}
	for list, opts := range lists {
		w, err := wc.Watch(ctx, list, opts...)
		g.Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		go func() {
			for ev := range w.ResultChan() {
				if obj, ok := ev.Object.(client.Object); ok {
					mu.Lock()
					key := fmt.Sprintf("%T %s", obj, obj.GetName())
					seen[key] = append(seen[key], ev.Type)
					mu.Unlock()
				}
			}
		}()
	}

	tn := newTenant("papa", "papa-dev").owners("pat").full().create(t)
	waitReady(t, tn.Name)
	writes := func() map[string][]watch.EventType {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(seen)
	}
	g.Eventually(writes, timeout, poll).Should(HaveLen(6), "the namespace, two RoleBindings, quota, limits and policy")
	g.Consistently(func(g Gomega) {
		for key, events := range writes() {
			g.Expect(events).To(Equal([]watch.EventType{watch.Added}), key)
		}
	}, "2s", "200ms").Should(Succeed())
}
