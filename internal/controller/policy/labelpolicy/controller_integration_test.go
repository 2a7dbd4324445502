//go:build integration

package labelpolicy

import (
	"context"
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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
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

	// Bare pods are checked; pods a controller creates are not.
	g.Expect(k.Create(ctx, pod("deny-a", "bare"))).NotTo(Succeed())
	owned := pod("deny-a", "owned")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "1234"}}
	g.Expect(k.Create(ctx, owned)).To(Succeed())

	// An update that keeps an existing violation as it was is admitted (controllers
	// must keep working); removing an allowed label is not.
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

func TestDefaultFillsLabelFromNamespaceThenDefaultValue(t *testing.T) {
	if !mapServed {
		t.Fatal("the test API server does not serve MutatingAdmissionPolicy")
	}
	g := NewWithT(t)
	ctx := context.Background()
	createNS(t, "def-ns", map[string]string{"test": "default", "cc-def": "from-ns"})
	createNS(t, "def-plain", map[string]string{"test": "default"})
	// A workload that predates the policy.
	legacy := deployment("def-plain", "legacy", map[string]string{"cc-def": "shared"})
	g.Expect(k.Create(ctx, legacy)).To(Succeed())
	p := newPolicy("default", "cc-def", policyv1alpha1.ActionDefault)
	p.Spec.DefaultValue = "shared"
	p.Spec.PropagateToPodTemplate = true
	createPolicy(t, p)

	// Wait until mutation happens.
	var d appsv1.Deployment
	g.Eventually(func(g Gomega) {
		probe := deployment("def-ns", "probe", nil)
		probe.GenerateName, probe.Name = "probe-", ""
		g.Expect(k.Create(ctx, probe)).To(Succeed())
		_ = k.Delete(ctx, probe)
		g.Expect(probe.Labels).To(HaveKeyWithValue("cc-def", "from-ns"))
	}, timeout, poll).Should(Succeed())

	d = *deployment("def-ns", "web", nil)
	g.Expect(k.Create(ctx, &d)).To(Succeed())
	g.Expect(d.Labels).To(HaveKeyWithValue("cc-def", "from-ns"))
	g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue("cc-def", "from-ns"), "propagateToPodTemplate")
	g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue("app", "web"))

	d2 := deployment("def-plain", "web", nil)
	g.Expect(k.Create(ctx, d2)).To(Succeed())
	g.Expect(d2.Labels).To(HaveKeyWithValue("cc-def", "shared"))

	// A label that is already set is left alone.
	d3 := deployment("def-plain", "own", map[string]string{"cc-def": "mine"})
	g.Expect(k.Create(ctx, d3)).To(Succeed())
	g.Expect(d3.Labels).To(HaveKeyWithValue("cc-def", "mine"))
	g.Expect(d3.Spec.Template.Labels).To(HaveKeyWithValue("cc-def", "mine"))

	// An update that leaves the pod template alone does not label it (that alone would
	// roll the workload out); one that changes the template anyway does.
	legacy.Spec.Replicas = ptr(int32(3))
	g.Expect(k.Update(ctx, legacy)).To(Succeed())
	g.Expect(legacy.Spec.Template.Labels).NotTo(HaveKey("cc-def"), "a replicas change must not touch the template")
	legacy.Spec.Template.Spec.Containers[0].Image = "registry.example/app:2"
	g.Expect(k.Update(ctx, legacy)).To(Succeed())
	g.Expect(legacy.Spec.Template.Labels).To(HaveKeyWithValue("cc-def", "shared"))

	// Bare pods are labelled too.
	bp := pod("def-plain", "bare")
	g.Expect(k.Create(ctx, bp)).To(Succeed())
	g.Expect(bp.Labels).To(HaveKeyWithValue("cc-def", "shared"))

	g.Eventually(func(g Gomega) {
		p := getPolicy(g, "default")
		c := cond(p, policyv1alpha1.ConditionDefaultingAvailable)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	}, timeout, poll).Should(Succeed())
}

func TestDefaultWithoutAnyValueDenies(t *testing.T) {
	g := NewWithT(t)
	createNS(t, "nodef-a", map[string]string{"test": "nodefault"})
	p := newPolicy("nodefault", "cc-nodef", policyv1alpha1.ActionDefault)
	p.Spec.AllowedPattern = "cc-[0-9]+"
	createPolicy(t, p)
	err := waitEnforced(t, func() client.Object { return deployment("nodef-a", "web", nil) })
	g.Expect(err.Error()).To(ContainSubstring("has no label cc-nodef"))
	g.Expect(err.Error()).To(ContainSubstring("label the namespace with cc-nodef="))
	g.Expect(k.Create(context.Background(), deployment("nodef-a", "ok", map[string]string{"cc-nodef": "cc-42"}))).To(Succeed())
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
	owned := pod("audit-a", "owned")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "1234"}}
	g.Expect(k.Create(ctx, owned)).To(Succeed())

	p := newPolicy("audit", "cc-audit", policyv1alpha1.ActionAudit)
	p.Spec.AllowedPattern = "cc-[0-9]+"
	createPolicy(t, p)

	g.Eventually(func(g Gomega) {
		p := getPolicy(g, "audit")
		g.Expect(p.Status.LastAuditTime).NotTo(BeNil())
		g.Expect(p.Status.Violations).To(Equal(int32(4)))
		g.Expect(p.Status.TopViolations).To(ConsistOf(
			policyv1alpha1.Violation{Kind: "Deployment", Namespace: "audit-a", Name: "missing-1", Reason: "Missing"},
			policyv1alpha1.Violation{Kind: "Deployment", Namespace: "audit-a", Name: "missing-2", Reason: "Missing"},
			policyv1alpha1.Violation{Kind: "Pod", Namespace: "audit-a", Name: "bare", Reason: "Missing"},
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
