//go:build integration

package labelpolicy

import (
	"context"
	"maps"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/controller/policy/labelpolicy/labelpolicytest"
	"orderly.dev/orderly/internal/labels"
)

// Every test has its own label key and namespaces, selected by namespaceSelector, so
// the cluster-scoped policies of tests running one after another never overlap.

func newPolicy(name, label string, action policyv1alpha1.Action) *policyv1alpha1.LabelPolicy {
	return &policyv1alpha1.LabelPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1alpha1.LabelPolicySpec{
			Label:  label,
			Action: action,
			Match: policyv1alpha1.LabelPolicyMatch{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"test": name}},
			},
		},
	}
}

func createPolicy(t *testing.T, p *policyv1alpha1.LabelPolicy) {
	t.Helper()
	NewWithT(t).Expect(k.Create(context.Background(), p)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), p) })
}

func createNS(t *testing.T, name string, lbls map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
	NewWithT(t).Expect(k.Create(context.Background(), ns)).To(Succeed())
}

func deployment(ns, name string, lbls map[string]string) *appsv1.Deployment {
	sel := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
			},
		},
	}
}

// replicaSet is a ReplicaSet whose pod template carries tmpl as labels (besides its
// selector's).
func replicaSet(ns, name string, tmpl map[string]string) *appsv1.ReplicaSet {
	sel := map[string]string{"app": name}
	labels := map[string]string{"app": name}
	maps.Copy(labels, tmpl)
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
			},
		},
	}
}

// pod is a bare pod without labels.
func pod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
}

func getPolicy(g Gomega, name string) *policyv1alpha1.LabelPolicy {
	var p policyv1alpha1.LabelPolicy
	g.Expect(k.Get(context.Background(), client.ObjectKey{Name: name}, &p)).To(Succeed())
	return &p
}

func cond(p *policyv1alpha1.LabelPolicy, typ string) *metav1.Condition {
	return meta.FindStatusCondition(p.Status.Conditions, typ)
}

// waitEnforced waits until a probe object is rejected, i.e. the API server has loaded
// the policy, then deletes nothing: the probe was never created.
func waitEnforced(t *testing.T, probe func() client.Object) error {
	t.Helper()
	var lastErr error
	NewWithT(t).Eventually(func() bool {
		o := probe()
		lastErr = k.Create(context.Background(), o)
		if lastErr == nil {
			_ = k.Delete(context.Background(), o)
			return false
		}
		return true
	}, timeout, poll).Should(BeTrue(), "the policy was never enforced")
	return lastErr
}

func TestDenyRejectsMissingAndNotAllowedLabels(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNS(t, "deny-a", map[string]string{"test": "deny"})
	createNS(t, "deny-excluded", map[string]string{"test": "deny"})
	// Workloads that predate the policy and violate it.
	g.Expect(k.Create(ctx, deployment("deny-a", "legacy-missing", nil))).To(Succeed())
	g.Expect(k.Create(ctx, deployment("deny-a", "legacy-wrong", map[string]string{"cc-deny": "hr"}))).To(Succeed())
	p := newPolicy("deny", "cc-deny", policyv1alpha1.ActionDeny)
	p.Spec.AllowedValues = []string{"finance", "sales"}
	p.Spec.Match.ExcludedNamespaces = []string{"deny-excluded"}
	createPolicy(t, p)

	err := waitEnforced(t, func() client.Object { return deployment("deny-a", "nolabel", nil) })
	msg := err.Error()
	t.Log(msg)
	for _, want := range []string{"LabelPolicy deny", "Deployment deny-a/nolabel", "has no label cc-deny", "one of [finance, sales]", "To fix"} {
		g.Expect(msg).To(ContainSubstring(want))
	}
	err = k.Create(ctx, deployment("deny-a", "wrong", map[string]string{"cc-deny": "hr"}))
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("has label cc-deny=hr, which is not allowed"))

	g.Expect(k.Create(ctx, deployment("deny-a", "good", map[string]string{"cc-deny": "sales"}))).To(Succeed())
	g.Expect(k.Create(ctx, deployment("deny-excluded", "nolabel", nil))).To(Succeed(), "excluded namespaces are not subject to the policy")

	// Bare pods are checked, and so is every pod that no trusted controller created,
	// whatever its ownerReferences; pods of a trusted controller are not.
	g.Expect(k.Create(ctx, pod("deny-a", "bare"))).NotTo(Succeed())
	for name, refs := range map[string][]metav1.OwnerReference{
		"configmap-owned":      {{APIVersion: "v1", Kind: "ConfigMap", Name: "mine", UID: "1234"}},
		"configmap-controlled": {{APIVersion: "v1", Kind: "ConfigMap", Name: "mine", UID: "1234", Controller: ptr.To(true)}},
		"replicaset-owned":     {{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "1234"}},
		"operator-controlled":  {{APIVersion: "postgresql.cnpg.io/v1", Kind: "Cluster", Name: "db", UID: "1234", Controller: ptr.To(true)}},
	} {
		dressed := pod("deny-a", name)
		dressed.OwnerReferences = refs
		err := k.Create(ctx, dressed)
		g.Expect(err).To(HaveOccurred(), "pod %s", name)
		g.Expect(err.Error()).To(ContainSubstring("Pod deny-a/" + name + " has no label cc-deny"))
	}
	owned := pod("deny-a", "owned")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "1234", Controller: ptr.To(true)}}
	g.Expect(k.Create(ctx, owned)).To(Succeed())
	// An operator that creates pods itself: once the platform lists its kind, its
	// pods are judged through it.
	g.Expect(k.Patch(ctx, getPolicy(g, "deny"), client.RawPatch(types.MergePatchType,
		[]byte(`{"spec":{"match":{"podOwners":[{"apiVersion":"postgresql.cnpg.io/v1","kind":"Cluster"}]}}}`)))).To(Succeed())
	g.Eventually(func() error {
		op := pod("deny-a", "operator-controlled")
		op.OwnerReferences = []metav1.OwnerReference{{APIVersion: "postgresql.cnpg.io/v1", Kind: "Cluster", Name: "db", UID: "1234", Controller: ptr.To(true)}}
		return k.Create(ctx, op, client.DryRunAll)
	}, timeout, poll).Should(Succeed())

	// An update that keeps an existing violation as it was is admitted (controllers
	// must keep working); removing an allowed label is not.
	for name, want := range map[string]string{"legacy-missing": "", "legacy-wrong": "hr"} {
		var d appsv1.Deployment
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "deny-a", Name: name}, &d)).To(Succeed())
		d.Spec.Replicas = ptr.To(int32(2))
		g.Expect(k.Update(ctx, &d)).To(Succeed(), "an update of %s that leaves its label as it was", name)
		g.Expect(d.Labels["cc-deny"]).To(Equal(want))
		g.Expect(*d.Spec.Replicas).To(Equal(int32(2)))
	}
	var wrong appsv1.Deployment
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "deny-a", Name: "legacy-missing"}, &wrong)).To(Succeed())
	wrong.Labels = map[string]string{"cc-deny": "hr"}
	g.Expect(k.Update(ctx, &wrong)).NotTo(Succeed(), "an update that changes a violating label to another value that is not allowed")
	var good appsv1.Deployment
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "deny-a", Name: "good"}, &good)).To(Succeed())
	delete(good.Labels, "cc-deny")
	g.Expect(k.Update(ctx, &good)).NotTo(Succeed())

	// Status and owned objects.
	g.Eventually(func(g Gomega) {
		p := getPolicy(g, "deny")
		g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
		g.Expect(p.Status.AdmissionMode).To(Equal(policyv1alpha1.AdmissionModeNative))
		g.Expect(cond(p, policyv1alpha1.ConditionReady)).NotTo(BeNil())
		g.Expect(cond(p, policyv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
	}, timeout, poll).Should(Succeed())
	var vap admissionv1.ValidatingAdmissionPolicy
	g.Expect(k.Get(ctx, client.ObjectKey{Name: "orderly-labelpolicy-deny"}, &vap)).To(Succeed())
	g.Expect(vap.OwnerReferences).To(HaveLen(1))
	g.Expect(vap.OwnerReferences[0].Name).To(Equal("deny"))
	g.Expect(vap.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "orderly"))
	g.Expect(vap.Labels).To(HaveKeyWithValue(policyv1alpha1.PolicyLabel, "deny"))
	var mp admissionv1.MutatingAdmissionPolicy
	g.Expect(client.IgnoreNotFound(k.Get(ctx, client.ObjectKey{Name: "orderly-labelpolicy-deny"}, &mp))).To(Succeed())
	g.Expect(mp.Name).To(BeEmpty(), "Deny without propagation needs no mutating policy")
}

// TestMutationCases runs the admission cases that every mutation path must pass
// through the native MutatingAdmissionPolicy (the webhook's suite runs the same table
// through Orderly's webhook).
func TestMutationCases(t *testing.T) {
	if !mapServed {
		t.Fatal("the test API server does not serve MutatingAdmissionPolicy")
	}
	labelpolicytest.Run(t, labelpolicytest.Path{Client: k, Timeout: timeout, Poll: poll,
		Enforced: func(g Gomega, p *policyv1alpha1.LabelPolicy) {
			g.Expect(p.Status.AdmissionMode).To(Equal(policyv1alpha1.AdmissionModeNative))
			c := cond(p, policyv1alpha1.ConditionDefaultingAvailable)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(ReasonMutatingPolicyServed))
			var mp admissionv1.MutatingAdmissionPolicy
			g.Expect(k.Get(context.Background(), client.ObjectKey{Name: objectName(p)}, &mp)).To(Succeed())
		}})
}

func TestAuditReportsAndAdmits(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNS(t, "audit-a", map[string]string{"test": "audit"})
	createNS(t, "audit-b", map[string]string{"test": "audit"})
	for _, d := range []*appsv1.Deployment{
		deployment("audit-a", "missing-1", nil),
		deployment("audit-a", "missing-2", nil),
		deployment("audit-b", "wrong", map[string]string{"cc-audit": "nope"}),
		deployment("audit-b", "fine", map[string]string{"cc-audit": "cc-1"}),
	} {
		g.Expect(k.Create(ctx, d)).To(Succeed())
	}
	g.Expect(k.Create(ctx, pod("audit-a", "bare"))).To(Succeed())
	// A ReplicaSet's pods are left to it (its template has no label: nor do they);
	// pods it does not vouch for are judged as bare pods: a reference to a
	// ReplicaSet that does not exist, a pod without the label its ReplicaSet's
	// template carries, a pod some other object owns.
	rs := replicaSet("audit-a", "rs", nil)
	g.Expect(k.Create(ctx, rs)).To(Succeed())
	labelled := replicaSet("audit-a", "labelled-rs", map[string]string{"cc-audit": "cc-1"})
	g.Expect(k.Create(ctx, labelled)).To(Succeed())
	controlledBy := func(kind, name string, uid types.UID) []metav1.OwnerReference {
		apiVersion := "apps/v1"
		if kind == "ConfigMap" {
			apiVersion = "v1"
		}
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(kind != "ConfigMap")}}
	}
	for name, refs := range map[string][]metav1.OwnerReference{
		"owned":           controlledBy("ReplicaSet", rs.Name, rs.UID),
		"forged":          controlledBy("ReplicaSet", "ghost", "1234"),
		"unlike-template": controlledBy("ReplicaSet", labelled.Name, labelled.UID),
		"configmap-owned": controlledBy("ConfigMap", "mine", "5678"),
	} {
		dressed := pod("audit-a", name)
		dressed.OwnerReferences = refs
		g.Expect(k.Create(ctx, dressed)).To(Succeed())
	}

	p := newPolicy("audit", "cc-audit", policyv1alpha1.ActionAudit)
	p.Spec.AllowedPattern = "cc-[0-9]+"
	createPolicy(t, p)

	g.Eventually(func(g Gomega) {
		p := getPolicy(g, "audit")
		g.Expect(p.Status.LastAuditTime).NotTo(BeNil())
		g.Expect(p.Status.Violations).To(Equal(int32(7)))
		g.Expect(p.Status.TopViolations).To(ConsistOf(
			policyv1alpha1.Violation{Kind: "Deployment", Namespace: "audit-a", Name: "missing-1", Reason: "Missing"},
			policyv1alpha1.Violation{Kind: "Deployment", Namespace: "audit-a", Name: "missing-2", Reason: "Missing"},
			policyv1alpha1.Violation{Kind: "Pod", Namespace: "audit-a", Name: "bare", Reason: "Missing"},
			policyv1alpha1.Violation{Kind: "Pod", Namespace: "audit-a", Name: "forged", Reason: "Missing"},
			policyv1alpha1.Violation{Kind: "Pod", Namespace: "audit-a", Name: "unlike-template", Reason: "Missing"},
			policyv1alpha1.Violation{Kind: "Pod", Namespace: "audit-a", Name: "configmap-owned", Reason: "Missing"},
			policyv1alpha1.Violation{Kind: "Deployment", Namespace: "audit-b", Name: "wrong", Reason: "NotAllowed", Value: "nope"},
		))
		c := cond(p, policyv1alpha1.ConditionCompliant)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(ReasonViolationsFound))
	}, timeout, poll).Should(Succeed())

	// Audit admits what it reports: a workload without the label is created.
	d := deployment("audit-a", "created-anyway", nil)
	g.Expect(k.Create(ctx, d)).To(Succeed())
	var vb admissionv1.ValidatingAdmissionPolicyBinding
	g.Expect(k.Get(ctx, client.ObjectKey{Name: "orderly-labelpolicy-audit"}, &vb)).To(Succeed())
	g.Expect(vb.Spec.ValidationActions).To(Equal([]admissionv1.ValidationAction{admissionv1.Warn, admissionv1.Audit}))
}

func TestRemediateLabelsMetadataOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNS(t, "rem-ns", map[string]string{"test": "remediate", "cc-rem": "from-ns"})
	createNS(t, "rem-plain", map[string]string{"test": "remediate"})
	before := deployment("rem-ns", "web", nil)
	g.Expect(k.Create(ctx, before)).To(Succeed())
	g.Expect(k.Create(ctx, deployment("rem-plain", "web", nil))).To(Succeed())
	g.Expect(k.Create(ctx, deployment("rem-plain", "chosen", map[string]string{"cc-rem": "not-allowed"}))).To(Succeed())

	p := newPolicy("remediate", "cc-rem", policyv1alpha1.ActionAudit)
	p.Spec.AllowedValues = []string{"from-ns", "fallback"}
	p.Spec.DefaultValue = "fallback"
	p.Spec.Remediate = policyv1alpha1.RemediateLabelOnly
	createPolicy(t, p)

	g.Eventually(func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "rem-ns", Name: "web"}, &d)).To(Succeed())
		g.Expect(d.Labels).To(HaveKeyWithValue("cc-rem", "from-ns"))
		// Only metadata changed: the spec (and so the pod template and its hash) did not,
		// which is what the Deployment controller's rollout depends on.
		g.Expect(d.Generation).To(Equal(before.Generation))
		g.Expect(d.Spec.Template).To(Equal(before.Spec.Template))
		g.Expect(d.Spec.Template.Labels).NotTo(HaveKey("cc-rem"))
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "rem-plain", Name: "web"}, &d)).To(Succeed())
		g.Expect(d.Labels).To(HaveKeyWithValue("cc-rem", "fallback"))
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "rem-plain", Name: "chosen"}, &d)).To(Succeed())
		g.Expect(d.Labels).To(HaveKeyWithValue("cc-rem", "not-allowed"), "a chosen value is never overwritten")

		p := getPolicy(g, "remediate")
		g.Expect(p.Status.Violations).To(Equal(int32(1)))
		g.Expect(p.Status.TopViolations).To(ConsistOf(policyv1alpha1.Violation{Kind: "Deployment", Namespace: "rem-plain", Name: "chosen", Reason: "NotAllowed", Value: "not-allowed"}))
	}, timeout, poll).Should(Succeed())
}

func TestGeneratedAdmissionObjectsAreRepaired(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNS(t, "drift-a", map[string]string{"test": "drift"})
	p := newPolicy("drift", "cc-drift", policyv1alpha1.ActionDeny)
	p.Spec.PropagateToPodTemplate = true
	createPolicy(t, p)
	name := client.ObjectKey{Name: "orderly-labelpolicy-drift"}
	var vap admissionv1.ValidatingAdmissionPolicy
	g.Eventually(func() error { return k.Get(ctx, name, &vap) }, timeout, poll).Should(Succeed())
	want := vap.Spec.DeepCopy()

	// Someone weakens the policy ...
	vap.Spec.Validations[0].Expression = "true"
	g.Expect(k.Update(ctx, &vap)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k.Get(ctx, name, &vap)).To(Succeed())
		g.Expect(vap.Spec.Validations).To(Equal(want.Validations))
	}, timeout, poll).Should(Succeed())

	// ... or deletes the binding.
	var b admissionv1.ValidatingAdmissionPolicyBinding
	g.Expect(k.Get(ctx, name, &b)).To(Succeed())
	uid := b.UID
	g.Expect(k.Delete(ctx, &b)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k.Get(ctx, name, &b)).To(Succeed())
		g.Expect(b.UID).NotTo(Equal(uid))
	}, timeout, poll).Should(Succeed())

	if mapServed {
		var mb admissionv1.MutatingAdmissionPolicyBinding
		g.Eventually(func() error { return k.Get(ctx, name, &mb) }, timeout, poll).Should(Succeed())
		g.Expect(k.Delete(ctx, &mb)).To(Succeed())
		g.Eventually(func(g Gomega) {
			var again admissionv1.MutatingAdmissionPolicyBinding
			g.Expect(k.Get(ctx, name, &again)).To(Succeed())
			g.Expect(again.UID).NotTo(Equal(mb.UID))
		}, timeout, poll).Should(Succeed())

		// Turning propagation off removes the mutating policy.
		latest := getPolicy(g, "drift")
		latest.Spec.PropagateToPodTemplate = false
		g.Expect(k.Update(ctx, latest)).To(Succeed())
		g.Eventually(func() bool {
			var mp admissionv1.MutatingAdmissionPolicy
			return apierrors.IsNotFound(k.Get(ctx, name, &mp))
		}, timeout, poll).Should(BeTrue())
	}
}

// TestSeriesGoWithThePolicy: every series of a policy is removed with it, so deleted
// policies do not pile up in the metrics.
func TestSeriesGoWithThePolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNS(t, "series-a", map[string]string{"test": "series"})
	g.Expect(k.Create(ctx, deployment("series-a", "missing", nil))).To(Succeed())
	g.Expect(k.Create(ctx, deployment("series-a", "wrong", map[string]string{"cc-series": "nope"}))).To(Succeed())
	p := newPolicy("series", "cc-series", policyv1alpha1.ActionAudit)
	p.Spec.AllowedValues = []string{"fallback"}
	p.Spec.DefaultValue = "fallback"
	p.Spec.Remediate = policyv1alpha1.RemediateLabelOnly
	createPolicy(t, p)

	metricNames := []string{"orderly_labelpolicy_violations", "orderly_labelpolicy_remediated_total", "orderly_labelpolicy_audit_duration_seconds", "orderly_labelpolicy_admission_ready"}
	g.Eventually(func(g Gomega) {
		for _, m := range metricNames {
			g.Expect(labelpolicytest.SeriesOf(g, m, MetricLabel, "series")).To(Equal(1), m)
		}
	}, timeout, poll).Should(Succeed())

	g.Expect(k.Delete(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, m := range metricNames {
			g.Expect(labelpolicytest.SeriesOf(g, m, MetricLabel, "series")).To(BeZero(), m)
		}
	}, timeout, poll).Should(Succeed())
}

// TestForeignObjectsAreNeverDeleted: an object with the name and the labels of one
// Orderly generates for a policy, but not created for it (it is not controlled by the
// policy), is left alone when the policy does not need that object: labels anyone can
// write never decide a deletion.
func TestForeignObjectsAreNeverDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	foreign := &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{
		Name:   "orderly-labelpolicy-foreign",
		Labels: map[string]string{labels.ManagedBy: labels.ManagedByValue, policyv1alpha1.PolicyLabel: "foreign"},
	}}
	g.Expect(k.Create(ctx, foreign)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), foreign) })
	createNS(t, "foreign-a", map[string]string{"test": "foreign"})
	// Deny fills nothing in: a MutatingWebhookConfiguration of Orderly's would go.
	createPolicy(t, newPolicy("foreign", "cc-foreign", policyv1alpha1.ActionDeny))

	// Every reconcile removes the mutating objects the policy does not need, and audits
	// every two seconds in this suite: after two audits, the controller has seen the
	// object in its cache.
	var first metav1.Time
	g.Eventually(func(g Gomega) {
		p := getPolicy(g, "foreign")
		g.Expect(p.Status.LastAuditTime).NotTo(BeNil())
		first = *p.Status.LastAuditTime
	}, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		p := getPolicy(g, "foreign")
		g.Expect(p.Status.LastAuditTime.After(first.Time)).To(BeTrue())
	}, timeout, poll).Should(Succeed())

	var after admissionv1.MutatingWebhookConfiguration
	g.Expect(k.Get(ctx, client.ObjectKeyFromObject(foreign), &after)).To(Succeed(), "a configuration Orderly did not create was deleted")
	g.Expect(after.UID).To(Equal(foreign.UID))
}

func TestLabelPolicyValidation(t *testing.T) {
	cases := []struct {
		name, spec, wantErr string
	}{
		{"empty label", `label: ""`, "spec.label"},
		{"bad label", `label: "not a label!"`, "label must be a valid label key"},
		{"unknown action", "label: cost-center\naction: Block", "Unsupported value: \"Block\""},
		{"invalid regex", "label: cost-center\nallowedPattern: \"cc-(\"", "error parsing regexp: missing closing ): `cc-(` evaluating rule: allowedPattern must be a valid RE2 regular expression"},
		{"default not matching pattern", "label: cost-center\nallowedPattern: \"cc-[0-9]+\"\ndefaultValue: shared", "defaultValue must be one of allowedValues or match allowedPattern"},
		{"unknown kind", "label: cost-center\nmatch:\n  kinds: [ReplicaSet]", "Unsupported value: \"ReplicaSet\""},
		{"unknown remediation", "label: cost-center\nremediate: Everything", "Unsupported value: \"Everything\""},
		{"default not allowed", "label: cost-center\naction: Default\nallowedValues: [a]\ndefaultValue: b", "defaultValue must be one of allowedValues"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			raw := "apiVersion: policy.orderly.dev/v1alpha1\nkind: LabelPolicy\nmetadata:\n  name: invalid\nspec:\n  " +
				strings.ReplaceAll(tc.spec, "\n", "\n  ") + "\n"
			u := &unstructured.Unstructured{}
			g.Expect(yaml.Unmarshal([]byte(raw), &u.Object)).To(Succeed())
			err := k.Create(context.Background(), u)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.wantErr))
			t.Log(err)
		})
	}

	// Defaults.
	g := NewWithT(t)
	p := &policyv1alpha1.LabelPolicy{ObjectMeta: metav1.ObjectMeta{Name: "defaults"}, Spec: policyv1alpha1.LabelPolicySpec{Label: "cost-center"}}
	p.Spec.Match.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"test": "never-matches"}}
	createPolicy(t, p)
	g.Expect(p.Spec.Action).To(Equal(policyv1alpha1.ActionDeny))
	g.Expect(p.Spec.Remediate).To(Equal(policyv1alpha1.RemediateNone))
	g.Expect(p.Spec.Match.Kinds).To(ConsistOf(policyv1alpha1.KindDeployment, policyv1alpha1.KindStatefulSet, policyv1alpha1.KindDaemonSet,
		policyv1alpha1.KindJob, policyv1alpha1.KindCronJob, policyv1alpha1.KindPod))
	g.Expect(p.Spec.Match.ExcludedNamespaces).To(ConsistOf("kube-system", "kube-public", "kube-node-lease"))
}
