//go:build integration

package tenant

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

func extra(name, manifest string) tenancyv1alpha1.TenantResource {
	return tenancyv1alpha1.TenantResource{Name: name, Object: &runtime.RawExtension{Raw: []byte(manifest)}}
}

const settingsCM = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"team-settings","labels":{"team":"platform"}},
	"data":{"namespace":"{{ .Namespace }}","tenant":"{{ .Tenant }}","region":"eu-1"}}`

func configMap(g Gomega, ns, name string) *corev1.ConfigMap {
	var cm corev1.ConfigMap
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm)).To(Succeed())
	return &cm
}

func resourcesCondition(g Gomega, name string) *metav1.Condition {
	got := getTenant(g, name)
	g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	c := condition(got, tenancyv1alpha1.ConditionExtraResourcesApplied)
	g.Expect(c).NotTo(BeNil())
	return c
}

// touchNamespace changes a label of ns, which brings a reconcile of its Tenant: what
// ResourcesResync does on its own, minutes later. Only for what no watch reports
// (someone else's object going away): the tests of what the watches report must
// pass without it, within a timeout far below ResourcesResync.
func touchNamespace(t *testing.T, ns, value string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		cur := getNS(g, ns)
		cur.Labels["touched"] = value
		g.Expect(k.Update(context.Background(), cur)).To(Succeed())
	}, timeout, poll).Should(Succeed())
}

// The user story of spec.resources: a ConfigMap and a ServiceAccount with templates go
// into every namespace of the tenant; a ConfigMap of the same name that someone else
// made is left alone and reported; a hand edit is repaired; a field taken out of the
// entry goes from the objects; an entry taken out of the list takes its objects with
// it, and so does a namespace that leaves the tenant — never the foreign ConfigMap.
func TestTenantResourcesInEveryNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// Someone else's ConfigMap of the same name, in a namespace the tenant adopts.
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "res-c", Annotations: map[string]string{tenancyv1alpha1.AdoptAnnotation: "res"}}})).To(Succeed())
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "res-c", Name: "team-settings"}, Data: map[string]string{"mine": "yes"}}
	g.Expect(k.Create(ctx, foreign)).To(Succeed())

	b := newTenant("res", "res-a", "res-b", "res-c")
	b.t.Spec.Resources = []tenancyv1alpha1.TenantResource{
		extra("settings", settingsCM),
		extra("deployer", `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"deployer","annotations":{"owner":"{{ .Tenant }}-{{ .Namespace }}"}}}`),
	}
	tn := b.create(t)

	g.Eventually(func(g Gomega) {
		c := resourcesCondition(g, tn.Name)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(ReasonResourceConflict))
		g.Expect(c.Message).To(ContainSubstring("ConfigMap team-settings exists in res-c and was not applied by this Tenant"))
		got := getTenant(g, tn.Name)
		g.Expect(got.Status.Resources).To(ConsistOf(
			And(HaveField("Name", "deployer"), HaveField("Kind", "ServiceAccount"), HaveField("Applied", BeEquivalentTo(3)), HaveField("Message", "")),
			And(HaveField("Name", "settings"), HaveField("ObjectName", "team-settings"), HaveField("Applied", BeEquivalentTo(2)), HaveField("Message", ContainSubstring("res-c"))),
		))
		g.Expect(eventReasons(g, tn.Name)).To(ContainElement(ReasonResourceConflict))
		g.Expect(testutil.ToFloat64(resourcesMissing.WithLabelValues(tn.Name))).To(Equal(1.0))
	}, timeout, poll).Should(Succeed())
	for _, ns := range []string{"res-a", "res-b"} {
		cm := configMap(g, ns, "team-settings")
		g.Expect(cm.Data).To(Equal(map[string]string{"namespace": ns, "tenant": "res", "region": "eu-1"}))
		g.Expect(cm.Labels).To(HaveKeyWithValue("team", "platform"))
		g.Expect(cm.Labels).To(HaveKeyWithValue(tenancyv1alpha1.ResourceLabel, "settings"))
		g.Expect(cm.Labels).To(HaveKeyWithValue(labels.ManagedBy, labels.ManagedByValue))
		g.Expect(metav1.IsControlledBy(cm, tn)).To(BeTrue())
		var sa corev1.ServiceAccount
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "deployer"}, &sa)).To(Succeed())
		g.Expect(sa.Annotations).To(HaveKeyWithValue("owner", "res-"+ns))
	}
	g.Expect(configMap(g, "res-c", "team-settings").Data).To(Equal(map[string]string{"mine": "yes"}), "someone else's ConfigMap was changed")

	// The foreign one goes: Orderly applies its own there at the next look.
	g.Expect(k.Delete(ctx, foreign)).To(Succeed())
	touchNamespace(t, "res-c", "1")
	g.Eventually(func(g Gomega) {
		g.Expect(resourcesCondition(g, tn.Name).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(configMap(g, "res-c", "team-settings").Data).To(HaveKeyWithValue("namespace", "res-c"))
	}, timeout, poll).Should(Succeed())

	// A hand edit is repaired at once (the copies are watched); a key someone added
	// is kept (not Orderly's field).
	cm := configMap(g, "res-a", "team-settings")
	cm.Data["region"] = "us-2"
	cm.Data["added"] = "by hand"
	g.Expect(k.Update(ctx, cm)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(configMap(g, "res-a", "team-settings").Data).To(Equal(map[string]string{"namespace": "res-a", "tenant": "res", "region": "eu-1", "added": "by hand"}))
		g.Expect(eventReasons(g, tn.Name)).To(ContainElement("ResourceRepaired"))
		g.Expect(testutil.ToFloat64(driftRepairs.WithLabelValues(tn.Name, "ConfigMap"))).To(Equal(1.0))
	}, timeout, poll).Should(Succeed())

	// A copy deleted by hand comes back at once.
	var deployer corev1.ServiceAccount
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "res-b", Name: "deployer"}, &deployer)).To(Succeed())
	g.Expect(k.Delete(ctx, &deployer)).To(Succeed())
	g.Eventually(func(g Gomega) {
		var again corev1.ServiceAccount
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "res-b", Name: "deployer"}, &again)).To(Succeed())
		g.Expect(again.UID).NotTo(Equal(deployer.UID))
	}, timeout, poll).Should(Succeed())

	// A key taken out of the entry goes from every object, the one created by Orderly
	// included (its fields were recorded as applied).
	updateTenant(t, tn.Name, func(cur *tenancyv1alpha1.Tenant) {
		cur.Spec.Resources[0] = extra("settings", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"team-settings"},"data":{"namespace":"{{ .Namespace }}"}}`)
	})
	g.Eventually(func(g Gomega) {
		for _, ns := range []string{"res-b", "res-c"} {
			cm := configMap(g, ns, "team-settings")
			g.Expect(cm.Data).To(Equal(map[string]string{"namespace": ns}), ns)
			g.Expect(cm.Labels).NotTo(HaveKey("team"), ns)
		}
	}, timeout, poll).Should(Succeed())

	// A namespace leaves the tenant (released): the objects go, the namespace stays.
	updateTenant(t, tn.Name, func(cur *tenancyv1alpha1.Tenant) { cur.Spec.Namespaces = cur.Spec.Namespaces[:2] })
	g.Eventually(func(g Gomega) {
		err := k.Get(ctx, client.ObjectKey{Namespace: "res-c", Name: "team-settings"}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		err = k.Get(ctx, client.ObjectKey{Namespace: "res-c", Name: "deployer"}, &corev1.ServiceAccount{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	}, timeout, poll).Should(Succeed())
	getNS(g, "res-c")

	// An entry taken out of the list: its objects go from every namespace, but a
	// ConfigMap of its name that is not Orderly's stays.
	g.Expect(k.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "res-c", Name: "team-settings"}, Data: map[string]string{"mine": "again"}})).To(Succeed())
	updateTenant(t, tn.Name, func(cur *tenancyv1alpha1.Tenant) { cur.Spec.Resources = cur.Spec.Resources[1:] })
	g.Eventually(func(g Gomega) {
		for _, ns := range []string{"res-a", "res-b"} {
			err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "team-settings"}, &corev1.ConfigMap{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s: %v", ns, err)
		}
		got := getTenant(g, tn.Name)
		g.Expect(got.Status.Resources).To(HaveLen(1))
		g.Expect(condition(got, tenancyv1alpha1.ConditionExtraResourcesApplied).Status).To(Equal(metav1.ConditionTrue))
	}, timeout, poll).Should(Succeed())
	g.Expect(configMap(g, "res-c", "team-settings").Data).To(Equal(map[string]string{"mine": "again"}))
	var sa corev1.ServiceAccount
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "res-a", Name: "deployer"}, &sa)).To(Succeed())
}

// What cannot be applied is reported in the condition, by reason, and does not stop
// the rest of the Tenant (or the other entries); what the API can tell is refused at
// once.
func TestTenantResourcesProblems(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, manifest, reason, message string
	}{
		{"not-served", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}}`, ReasonKindNotFound, "does not serve Widget example.com/v1"},
		{"cluster-scoped", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"x"}}`, ReasonInvalidResource, "ClusterRole is cluster-scoped"},
		{"bad-template", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"{{ .Cluster }}"}}`, ReasonInvalidResource, "object.data.a"},
		{"namespaced", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"elsewhere"}}`, ReasonInvalidResource, "metadata.namespace must be left out"},
		{"our-label", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","labels":{"tenancy.orderly.dev/tenant":"other"}}}`, ReasonInvalidResource, "may not set tenancy.orderly.dev/tenant"},
		{"refused", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":1}}`, ReasonInvalidResource, "the API server refused the object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := newTenant("resp-"+tc.name, "resp-"+tc.name)
			b.t.Spec.Resources = []tenancyv1alpha1.TenantResource{extra("bad", tc.manifest), extra("good", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"good"}}`)}
			tn := b.create(t)
			waitReady(t, tn.Name)
			g.Eventually(func(g Gomega) {
				c := resourcesCondition(g, tn.Name)
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(c.Reason).To(Equal(tc.reason))
				g.Expect(c.Message).To(ContainSubstring(tc.message))
				configMap(g, "resp-"+tc.name, "good")
			}, timeout, poll).Should(Succeed())
		})
	}

	for name, entry := range map[string]tenancyv1alpha1.TenantResource{
		"set exactly one of object and from": {Name: "x", Object: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`)},
			From: &tenancyv1alpha1.TenantResourceSource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "b"}},
		"declared in its own fields": {Name: "x", From: &tenancyv1alpha1.TenantResourceSource{APIVersion: "v1", Kind: "Namespace", Namespace: "a", Name: "b"}},
		"from needs exactly one of name and selector": {Name: "x", From: &tenancyv1alpha1.TenantResourceSource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "b",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}},
	} {
		t.Run("api refuses: "+name, func(t *testing.T) {
			tn := newTenant("respv", "respv").t
			tn.Spec.Resources = []tenancyv1alpha1.TenantResource{entry}
			err := k.Create(ctx, tn)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			g.Expect(err.Error()).To(ContainSubstring(name))
		})
	}
	for _, tc := range []struct{ name, manifest, want string }{
		{"no-kind", `{"apiVersion":"v1","metadata":{"name":"x"}}`, "kind"},
		{"no-name", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}`, "object needs metadata.name"},
		{"generate-name", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","generateName":"x-"}}`, "generateName is not supported"},
		{"namespace-kind", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}`, "declared in its own fields"},
	} {
		t.Run("api refuses "+tc.name, func(t *testing.T) {
			tn := newTenant("respv", "respv").t
			tn.Spec.Resources = []tenancyv1alpha1.TenantResource{extra("x", tc.manifest)}
			err := k.Create(ctx, tn)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}
}

// namespaceSelector and from: an entry only in the namespaces its selector matches
// (moved when the selector changes), and copies of shared objects that follow their
// source; a source its owner did not label shareable is not copied, and a source that
// goes away leaves its copies as they are.
func TestTenantResourcesSelectAndCopy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shared-src"}})).To(Succeed())
	ca := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shared-src", Name: "company-ca",
		Labels: map[string]string{tenancyv1alpha1.ShareableLabel: "true", "purpose": "trust"}}, Data: map[string]string{"ca.crt": "one"}}
	pull := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shared-src", Name: "registry-pull"},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"token": []byte("s3cret")}}
	g.Expect(k.Create(ctx, ca)).To(Succeed())
	g.Expect(k.Create(ctx, pull)).To(Succeed())

	b := newTenant("sel", "sel-dev", "sel-prod")
	b.t.Spec.Namespaces[0].Labels = map[string]string{"env": "dev"}
	b.t.Spec.Namespaces[1].Labels = map[string]string{"env": "prod"}
	b.t.Spec.Resources = []tenancyv1alpha1.TenantResource{
		{Name: "prod-only", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
			Object: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"prod-settings"},"data":{"replicas":"3"}}`)}},
		{Name: "ca", From: &tenancyv1alpha1.TenantResourceSource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shared-src", Name: "company-ca"}},
		{Name: "pull", From: &tenancyv1alpha1.TenantResourceSource{APIVersion: "v1", Kind: "Secret", Namespace: "shared-src", Name: "registry-pull"}},
	}
	tn := b.create(t)

	g.Eventually(func(g Gomega) {
		c := resourcesCondition(g, tn.Name)
		g.Expect(c.Reason).To(Equal(ReasonSourceNotShared), c.Message)
		g.Expect(c.Message).To(ContainSubstring("Secret shared-src/registry-pull is not labelled tenancy.orderly.dev/shareable=true"))
		configMap(g, "sel-prod", "prod-settings")
		for _, ns := range []string{"sel-dev", "sel-prod"} {
			cp := configMap(g, ns, "company-ca")
			g.Expect(cp.Data).To(Equal(map[string]string{"ca.crt": "one"}))
			g.Expect(cp.Labels).To(HaveKeyWithValue("purpose", "trust"))
			g.Expect(cp.Labels).NotTo(HaveKey(tenancyv1alpha1.ShareableLabel))
		}
		got := getTenant(g, tn.Name)
		g.Expect(got.Status.Resources).To(ContainElement(And(HaveField("Name", "prod-only"), HaveField("Namespaces", BeEquivalentTo(1)), HaveField("Applied", BeEquivalentTo(1)))))
	}, timeout, poll).Should(Succeed())
	err := k.Get(ctx, client.ObjectKey{Namespace: "sel-dev", Name: "prod-settings"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the prod-only entry reached sel-dev: %v", err)
	for _, ns := range []string{"sel-dev", "sel-prod"} {
		err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "registry-pull"}, &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a Secret not shared was copied to %s: %v", ns, err)
	}

	// Its owner shares the Secret, and changes the CA: the copies follow.
	pull.Labels = map[string]string{tenancyv1alpha1.ShareableLabel: "true"}
	g.Expect(k.Update(ctx, pull)).To(Succeed())
	ca.Data["ca.crt"] = "two"
	g.Expect(k.Update(ctx, ca)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(resourcesCondition(g, tn.Name).Status).To(Equal(metav1.ConditionTrue))
		for _, ns := range []string{"sel-dev", "sel-prod"} {
			g.Expect(configMap(g, ns, "company-ca").Data).To(HaveKeyWithValue("ca.crt", "two"))
			var s corev1.Secret
			g.Expect(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "registry-pull"}, &s)).To(Succeed())
			g.Expect(s.Data).To(HaveKeyWithValue("token", []byte("s3cret")))
			g.Expect(s.Type).To(Equal(corev1.SecretTypeOpaque))
		}
	}, timeout, poll).Should(Succeed())

	// Its owner stops sharing the Secret: the copies are withdrawn.
	pull.Labels = nil
	g.Expect(k.Update(ctx, pull)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(resourcesCondition(g, tn.Name).Reason).To(Equal(ReasonSourceNotShared))
		for _, ns := range []string{"sel-dev", "sel-prod"} {
			err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "registry-pull"}, &corev1.Secret{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s: %v", ns, err)
		}
	}, timeout, poll).Should(Succeed())

	// The selector moves to dev: the object goes from prod and comes to dev.
	updateTenant(t, tn.Name, func(cur *tenancyv1alpha1.Tenant) {
		cur.Spec.Resources[0].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}
	})
	g.Eventually(func(g Gomega) {
		configMap(g, "sel-dev", "prod-settings")
		err := k.Get(ctx, client.ObjectKey{Namespace: "sel-prod", Name: "prod-settings"}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	}, timeout, poll).Should(Succeed())

	// The source goes: reported, and the copies stay as they were.
	g.Expect(k.Delete(ctx, ca)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := resourcesCondition(g, tn.Name)
		g.Expect(c.Reason).To(Equal(ReasonSourceNotFound), c.Message)
	}, timeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(configMap(g, "sel-prod", "company-ca").Data).To(HaveKeyWithValue("ca.crt", "two"))
	}, 2*time.Second, poll).Should(Succeed())
}

// from.selector: every shareable object the selector matches is copied, and the
// copies follow the selection (through the sources' watch: nothing else wakes the
// Tenant here); someone else's object of a copy's name is left alone and reported;
// removing the entry removes only Orderly's copies.
func TestTenantResourcesCopyBySelector(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bundle-src"}})).To(Succeed())
	source := func(name string, labels map[string]string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "bundle-src", Name: name, Labels: labels}, Data: map[string]string{"from": name}}
		g.Expect(k.Create(ctx, cm)).To(Succeed())
		return cm
	}
	shared := map[string]string{tenancyv1alpha1.ShareableLabel: "true", "bundle": "obs"}
	a := source("alerts-a", shared)
	b := source("alerts-b", shared)
	c := source("alerts-c", map[string]string{"bundle": "obs"}) // not shared (yet)
	source("other", map[string]string{tenancyv1alpha1.ShareableLabel: "true", "bundle": "x"})

	bt := newTenant("bun", "bun-one", "bun-two")
	bt.t.Spec.Resources = []tenancyv1alpha1.TenantResource{{Name: "obs", From: &tenancyv1alpha1.TenantResourceSource{
		APIVersion: "v1", Kind: "ConfigMap", Namespace: "bundle-src", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"bundle": "obs"}}}}}
	tn := bt.create(t)
	absent := func(g Gomega, ns, name string) {
		err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s/%s: %v", ns, name, err)
	}
	row := func(g Gomega) tenancyv1alpha1.TenantResourceStatus {
		got := getTenant(g, tn.Name)
		g.Expect(got.Status.Resources).To(HaveLen(1))
		return got.Status.Resources[0]
	}
	g.Eventually(func(g Gomega) {
		g.Expect(resourcesCondition(g, tn.Name).Status).To(Equal(metav1.ConditionTrue))
		for _, ns := range []string{"bun-one", "bun-two"} {
			g.Expect(configMap(g, ns, "alerts-a").Data).To(HaveKeyWithValue("from", "alerts-a"))
			g.Expect(configMap(g, ns, "alerts-b").Data).To(HaveKeyWithValue("from", "alerts-b"))
			absent(g, ns, "alerts-c")
			absent(g, ns, "other")
		}
		st := row(g)
		g.Expect(st.ObjectNames).To(Equal([]string{"alerts-a", "alerts-b"}))
		g.Expect(st.Namespaces).To(BeEquivalentTo(2))
		g.Expect(st.Applied).To(BeEquivalentTo(2))
	}, timeout, poll).Should(Succeed())

	// alerts-c is shared, but bun-two already has a ConfigMap of that name that is
	// not Orderly's: copied to bun-one only, reported, the other left as it is.
	g.Expect(k.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "bun-two", Name: "alerts-c"}, Data: map[string]string{"mine": "yes"}})).To(Succeed())
	c.Labels[tenancyv1alpha1.ShareableLabel] = "true"
	g.Expect(k.Update(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cond := resourcesCondition(g, tn.Name)
		g.Expect(cond.Reason).To(Equal(ReasonResourceConflict), cond.Message)
		g.Expect(cond.Message).To(ContainSubstring("alerts-c exists in bun-two"))
		g.Expect(configMap(g, "bun-one", "alerts-c").Data).To(HaveKeyWithValue("from", "alerts-c"))
		g.Expect(row(g).Applied).To(BeEquivalentTo(1))
	}, timeout, poll).Should(Succeed())
	g.Expect(configMap(g, "bun-two", "alerts-c").Data).To(Equal(map[string]string{"mine": "yes"}))

	// alerts-a leaves the selection and alerts-b is deleted: their copies go.
	a.Labels["bundle"] = "retired"
	g.Expect(k.Update(ctx, a)).To(Succeed())
	g.Expect(k.Delete(ctx, b)).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, ns := range []string{"bun-one", "bun-two"} {
			absent(g, ns, "alerts-a")
			absent(g, ns, "alerts-b")
		}
		g.Expect(row(g).ObjectNames).To(Equal([]string{"alerts-c"}))
	}, timeout, poll).Should(Succeed())

	// The entry goes: Orderly's copy goes, the hand-made one stays.
	updateTenant(t, tn.Name, func(cur *tenancyv1alpha1.Tenant) { cur.Spec.Resources = nil })
	g.Eventually(func(g Gomega) { absent(g, "bun-one", "alerts-c") }, timeout, poll).Should(Succeed())
	g.Expect(configMap(g, "bun-two", "alerts-c").Data).To(Equal(map[string]string{"mine": "yes"}))
}

// An entry of a kind that is not served waits for it: once its CRD is installed the
// CRD watch brings the Tenant back and the objects are applied, within a timeout far
// below conflictRecheck (which was the only way back before).
func TestTenantResourcesKindInstalledLater(t *testing.T) {
	g := NewWithT(t)
	g.Expect(timeout).To(BeNumerically("<", conflictRecheck))
	b := newTenant("res-later", "res-later")
	b.t.Spec.Resources = []tenancyv1alpha1.TenantResource{extra("gizmo", `{"apiVersion":"later.tenant.test/v1","kind":"Gizmo","metadata":{"name":"g"},"spec":{"size":3}}`)}
	tn := b.create(t)
	g.Eventually(func(g Gomega) {
		c := resourcesCondition(g, tn.Name)
		g.Expect(c.Reason).To(Equal(ReasonKindNotFound))
	}, timeout, poll).Should(Succeed())

	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "gizmo.yaml"), []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.later.tenant.test
spec:
  group: later.tenant.test
  names: {kind: Gizmo, listKind: GizmoList, plural: gizmos, singular: gizmo}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`), 0o600)).To(Succeed())
	_, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{dir}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		c := resourcesCondition(g, tn.Name)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "later.tenant.test", Version: "v1", Kind: "Gizmo"})
		g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: "res-later", Name: "g"}, u)).To(Succeed())
	}, timeout, poll).Should(Succeed())
}
