//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

// policyClient is an admin client that knows the policy.orderly.dev types.
func policyClient(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(policyv1alpha1.AddToScheme(scheme))
	c, err := client.New(adminCfg, client.Options{Scheme: scheme})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return c
}

// labelPolicy is a cost-center policy for the namespaces labelled e2e-labelpolicy=<name>, so that
// it never touches the workloads of other tests.
func labelPolicy(name string, action policyv1alpha1.Action) *policyv1alpha1.LabelPolicy {
	return &policyv1alpha1.LabelPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1alpha1.LabelPolicySpec{
			Label:  "cost-center",
			Action: action,
			Match:  policyv1alpha1.LabelPolicyMatch{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e-labelpolicy": name}}},
		},
	}
}

func createNamespace(t *testing.T, name string, lbls map[string]string) {
	t.Helper()
	err := k.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_ = k.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
}

func waitPolicyReady(g Gomega, c client.Client, name string) *policyv1alpha1.LabelPolicy {
	var p policyv1alpha1.LabelPolicy
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(context.Background(), client.ObjectKey{Name: name}, &p)).To(Succeed())
		cond := meta.FindStatusCondition(p.Status.Conditions, policyv1alpha1.ConditionReady)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), cond.Message)
		g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
	}, timeout, poll).Should(Succeed())
	return &p
}

// TestLabelPolicyDenyLetsControllersCreatePods: a Deployment without the label is
// rejected with a message that says how to fix it; a labelled one is admitted and its
// ReplicaSet's pods (which carry no such label) still start, because only bare pods
// are checked. Deleting the policy removes its admission objects.
func TestLabelPolicyDenyLetsControllersCreatePods(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := policyClient(t)
	createNamespace(t, "e2e-lp-deny", map[string]string{"e2e-labelpolicy": "e2e-deny"})
	p := labelPolicy("e2e-deny", policyv1alpha1.ActionDeny)
	p.Spec.AllowedValues = []string{"cc-1", "cc-2"}
	g.Expect(c.Create(ctx, p)).To(Succeed())
	got := waitPolicyReady(g, c, p.Name)
	g.Expect(got.Status.AdmissionMode).To(Equal(policyv1alpha1.AdmissionModeNative))

	var rejected error
	g.Eventually(func() error {
		d := deployment("e2e-lp-deny", "unlabelled", 1)
		rejected = k.Create(ctx, d)
		if rejected == nil {
			_ = k.Delete(ctx, d)
		}
		return rejected
	}, timeout, poll).Should(HaveOccurred())
	for _, want := range []string{"LabelPolicy e2e-deny", "has no label cost-center", "one of [cc-1, cc-2]", "To fix"} {
		g.Expect(rejected.Error()).To(ContainSubstring(want))
	}

	d := deployment("e2e-lp-deny", "web", 2)
	d.Labels = map[string]string{"cost-center": "cc-1"}
	g.Expect(k.Create(ctx, d)).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(readyPods(g, "e2e-lp-deny", "web")).To(Equal(2)) }, timeout, poll).Should(Succeed())

	g.Expect(c.Delete(ctx, p)).To(Succeed())
	g.Eventually(func() bool {
		var vap admissionv1.ValidatingAdmissionPolicy
		return apierrors.IsNotFound(k.Get(ctx, client.ObjectKey{Name: "orderly-labelpolicy-e2e-deny"}, &vap))
	}, timeout, poll).Should(BeTrue(), "the garbage collector removes the admission objects with the policy")
	g.Eventually(func() error {
		d := deployment("e2e-lp-deny", "after", 0)
		return k.Create(ctx, d)
	}, timeout, poll).Should(Succeed())
}

// TestLabelPolicyDefaultFromNamespace: the label is filled in from the namespace and
// propagated to the pod template, so the pods carry it too.
func TestLabelPolicyDefaultFromNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := policyClient(t)
	createNamespace(t, "e2e-lp-default", map[string]string{"e2e-labelpolicy": "e2e-default", "cost-center": "cc-ns"})
	p := labelPolicy("e2e-default", policyv1alpha1.ActionDefault)
	p.Spec.DefaultValue = "cc-shared"
	p.Spec.PropagateToPodTemplate = true
	g.Expect(c.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	waitPolicyReady(g, c, p.Name)

	g.Eventually(func(g Gomega) {
		probe := deployment("e2e-lp-default", "", 0)
		probe.GenerateName = "probe-"
		g.Expect(k.Create(ctx, probe)).To(Succeed())
		_ = k.Delete(ctx, probe)
		g.Expect(probe.Labels).To(HaveKeyWithValue("cost-center", "cc-ns"))
	}, timeout, poll).Should(Succeed())

	d := deployment("e2e-lp-default", "api", 1)
	g.Expect(k.Create(ctx, d)).To(Succeed())
	g.Expect(d.Labels).To(HaveKeyWithValue("cost-center", "cc-ns"))
	g.Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(k.List(ctx, &pods, client.InNamespace("e2e-lp-default"), client.MatchingLabels{"app": "api"})).To(Succeed())
		g.Expect(pods.Items).NotTo(BeEmpty())
		g.Expect(pods.Items[0].Labels).To(HaveKeyWithValue("cost-center", "cc-ns"))
	}, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(readyPods(g, "e2e-lp-default", "api")).To(Equal(1)) }, timeout, poll).Should(Succeed())
}

// TestLabelPolicyRemediationDoesNotRollOut: remediate LabelOnly labels a running
// Deployment's metadata; its pod template, and so its ReplicaSet and pods, stay as
// they were: no rollout.
func TestLabelPolicyRemediationDoesNotRollOut(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := policyClient(t)
	createNamespace(t, "e2e-lp-remediate", map[string]string{"e2e-labelpolicy": "e2e-remediate", "cost-center": "cc-9"})
	d := deployment("e2e-lp-remediate", "batch", 2)
	g.Expect(k.Create(ctx, d)).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(readyPods(g, "e2e-lp-remediate", "batch")).To(Equal(2)) }, timeout, poll).Should(Succeed())
	rsBefore := replicaSets(g, "e2e-lp-remediate")
	g.Expect(rsBefore).To(HaveLen(1))
	hash := rsBefore[0].Labels["pod-template-hash"]

	p := labelPolicy("e2e-remediate", policyv1alpha1.ActionAudit)
	p.Spec.Remediate = policyv1alpha1.RemediateLabelOnly
	g.Expect(c.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })

	g.Eventually(func(g Gomega) {
		var got appsv1.Deployment
		g.Expect(k.Get(ctx, client.ObjectKeyFromObject(d), &got)).To(Succeed())
		g.Expect(got.Labels).To(HaveKeyWithValue("cost-center", "cc-9"))
		var lp policyv1alpha1.LabelPolicy
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), &lp)).To(Succeed())
		g.Expect(lp.Status.Remediated).To(BeNumerically(">=", 1))
		g.Expect(lp.Status.Violations).To(BeZero())
	}, timeout, poll).Should(Succeed())
	// Give the Deployment controller time to react, were it going to.
	g.Consistently(func(g Gomega) {
		rs := replicaSets(g, "e2e-lp-remediate")
		g.Expect(rs).To(HaveLen(1), "no new ReplicaSet")
		g.Expect(rs[0].Labels["pod-template-hash"]).To(Equal(hash))
		g.Expect(readyPods(g, "e2e-lp-remediate", "batch")).To(Equal(2))
	}, "5s", "500ms").Should(Succeed())

	g.Eventually(func(g Gomega) {
		body, err := httpGet(metricsURL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(body)).To(ContainSubstring(`orderly_labelpolicy_remediated_total{labelpolicy="e2e-remediate"}`))
	}, timeout, poll).Should(Succeed())
}

// TestLabelPolicyAuditReportsExistingWorkloads: Audit admits and reports.
func TestLabelPolicyAuditReportsExistingWorkloads(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := policyClient(t)
	createNamespace(t, "e2e-lp-audit", map[string]string{"e2e-labelpolicy": "e2e-audit"})
	g.Expect(k.Create(ctx, deployment("e2e-lp-audit", "old", 0))).To(Succeed())
	p := labelPolicy("e2e-audit", policyv1alpha1.ActionAudit)
	g.Expect(c.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	lp := waitPolicyReady(g, c, p.Name)
	g.Expect(lp.Status.Violations).To(Equal(int32(1)), "%+v", lp.Status)
	g.Expect(lp.Status.TopViolations).To(ConsistOf(policyv1alpha1.Violation{Kind: "Deployment", Namespace: "e2e-lp-audit", Name: "old", Reason: "Missing"}))
	g.Expect(k.Create(ctx, deployment("e2e-lp-audit", "new", 0))).To(Succeed(), "Audit admits")

	g.Eventually(func(g Gomega) {
		body, err := httpGet(metricsURL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(body)).To(ContainSubstring(`orderly_labelpolicy_violations{labelpolicy="e2e-audit",namespace="e2e-lp-audit"} 1`))
	}, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		var evs corev1.EventList
		g.Expect(k.List(ctx, &evs, client.InNamespace("default"))).To(Succeed())
		found := false
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == "e2e-audit" && e.Reason == "ViolationsFound" && strings.Contains(e.Message, "e2e-lp-audit/old") {
				found = true
			}
		}
		g.Expect(found).To(BeTrue())
	}, timeout, poll).Should(Succeed())
}

func replicaSets(g Gomega, ns string) []appsv1.ReplicaSet {
	var list appsv1.ReplicaSetList
	g.Expect(k.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}

// TestLabelPolicyWebhookFallback runs the manager with --labelpolicy-mutation=webhook,
// as on an API server without MutatingAdmissionPolicy: the label is filled in and
// propagated by Orderly's webhook (with Orderly's own certificate); with the webhook
// down, the validating policy still rejects a workload without the label; back in the
// default mode the policy moves to native admission and the webhook configuration goes.
func TestLabelPolicyWebhookFallback(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := policyClient(t)
	port := freePort()
	restartManager(t, "--labelpolicy-mutation=webhook", "--webhook-host=127.0.0.1",
		fmt.Sprintf("--webhook-port=%d", port), fmt.Sprintf("--webhook-url=https://127.0.0.1:%d", port))

	createNamespace(t, "e2e-lp-webhook", map[string]string{"e2e-labelpolicy": "e2e-webhook", "cost-center": "cc-ns"})
	createNamespace(t, "e2e-lp-webhook-plain", map[string]string{"e2e-labelpolicy": "e2e-webhook"})
	p := labelPolicy("e2e-webhook", policyv1alpha1.ActionDefault)
	p.Spec.AllowedPattern = "cc-[a-z]+"
	p.Spec.PropagateToPodTemplate = true
	g.Expect(c.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	got := waitPolicyReady(g, c, p.Name)
	g.Expect(got.Status.AdmissionMode).To(Equal(policyv1alpha1.AdmissionModeWebhook))

	name := client.ObjectKey{Name: "orderly-labelpolicy-e2e-webhook"}
	var wc admissionv1.MutatingWebhookConfiguration
	g.Expect(k.Get(ctx, name, &wc)).To(Succeed())
	g.Expect(*wc.Webhooks[0].ClientConfig.URL).To(Equal(fmt.Sprintf("https://127.0.0.1:%d/labelpolicy/e2e-webhook", port)))
	var mp admissionv1.MutatingAdmissionPolicy
	g.Expect(apierrors.IsNotFound(k.Get(ctx, name, &mp))).To(BeTrue(), "webhook mode compiles no MutatingAdmissionPolicy")
	var tlsSecret corev1.Secret
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: "orderly-webhook-tls"}, &tlsSecret)).To(Succeed())

	g.Eventually(func(g Gomega) {
		probe := deployment("e2e-lp-webhook", "", 0)
		probe.GenerateName = "probe-"
		g.Expect(k.Create(ctx, probe)).To(Succeed())
		_ = k.Delete(ctx, probe)
		g.Expect(probe.Labels).To(HaveKeyWithValue("cost-center", "cc-ns"))
	}, timeout, poll).Should(Succeed())
	d := deployment("e2e-lp-webhook", "api", 1)
	g.Expect(k.Create(ctx, d)).To(Succeed())
	g.Expect(d.Labels).To(HaveKeyWithValue("cost-center", "cc-ns"))
	g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue("cost-center", "cc-ns"))
	g.Eventually(func(g Gomega) { g.Expect(readyPods(g, "e2e-lp-webhook", "api")).To(Equal(1)) }, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		body, err := httpGet(metricsURL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(body)).To(ContainSubstring(`orderly_labelpolicy_webhook_requests_total{labelpolicy="e2e-webhook",result="mutated"}`))
	}, timeout, poll).Should(Succeed())

	// Webhook down: failurePolicy Ignore admits the request unmutated, and the
	// validating policy rejects it with its message.
	stopManager()
	// Polled: in two full runs on a loaded machine the first write was admitted right
	// after the manager stopped (cause not known; the likeliest is the API server's
	// admission policy cache catching up after the restart into webhook mode). A write
	// that got through is removed before the next try.
	refused := func(g Gomega, d *appsv1.Deployment) error {
		err := k.Create(ctx, d)
		if err == nil {
			_ = k.Delete(ctx, d)
		}
		g.Expect(err).To(HaveOccurred(), "%s/%s was admitted while the webhook is down", d.Namespace, d.Name)
		return err
	}
	g.Eventually(func(g Gomega) {
		err := refused(g, deployment("e2e-lp-webhook-plain", "while-down", 0))
		g.Expect(err.Error()).To(ContainSubstring("has no label cost-center"))
		// The namespace's label cannot be filled in while the webhook is down.
		_ = refused(g, deployment("e2e-lp-webhook", "labelled-while-down", 0))
	}, timeout, poll).Should(Succeed())

	// The default manager (auto on a server that serves MutatingAdmissionPolicy)
	// moves the policy to native admission.
	stop, err := startManager(managerBin, managerKubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	stopManager = stop
	g.Eventually(func(g Gomega) {
		var lp policyv1alpha1.LabelPolicy
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), &lp)).To(Succeed())
		g.Expect(lp.Status.AdmissionMode).To(Equal(policyv1alpha1.AdmissionModeNative))
		g.Expect(k.Get(ctx, name, &mp)).To(Succeed())
		g.Expect(apierrors.IsNotFound(k.Get(ctx, name, &wc))).To(BeTrue())
	}, timeout, poll).Should(Succeed())
}

// TestLabelPolicyNeverBlocksProtectedNamespaces plays the careless platform admin with
// policies that match every namespace: a Deny policy (native admission), then a
// Default policy served by Orderly's webhook with --webhook-failure-policy=Fail and
// the webhook down. Each is enforced in an ordinary namespace, but a Deployment in the
// manager's namespace (where Orderly's own Deployment lives), in kube-system or in
// another kube-* namespace is admitted and left as it was.
func TestLabelPolicyNeverBlocksProtectedNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := policyClient(t)
	createNamespace(t, "e2e-lp-protect", nil)
	createNamespace(t, "kube-e2e-lp-protect", nil)
	protected := []string{managerNamespace, "kube-system", "kube-e2e-lp-protect"}
	admittedUntouched := func(step string) {
		t.Helper()
		for _, ns := range protected {
			d := deployment(ns, "", 0)
			d.GenerateName = "e2e-lp-protect-"
			g.Expect(k.Create(ctx, d)).To(Succeed(), "%s: a Deployment in %s was rejected", step, ns)
			g.Expect(d.Labels).NotTo(HaveKey("e2e-protect"), "%s: a label was filled in in %s", step, ns)
			_ = k.Delete(ctx, d)
		}
	}

	deny := &policyv1alpha1.LabelPolicy{ObjectMeta: metav1.ObjectMeta{Name: "e2e-protect-deny"},
		Spec: policyv1alpha1.LabelPolicySpec{Label: "e2e-protect", Action: policyv1alpha1.ActionDeny}}
	g.Expect(c.Create(ctx, deny)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), deny) })
	got := waitPolicyReady(g, c, deny.Name)
	g.Expect(got.Status.ProtectedNamespaces).To(Equal([]string{"kube-*", managerNamespace}))
	g.Eventually(func() error {
		d := deployment("e2e-lp-protect", "", 0)
		d.GenerateName = "probe-"
		err := k.Create(ctx, d)
		if err == nil {
			_ = k.Delete(ctx, d)
		}
		return err
	}, timeout, poll).Should(MatchError(ContainSubstring("has no label e2e-protect")))
	admittedUntouched("Deny")
	g.Expect(c.Delete(ctx, deny)).To(Succeed())
	g.Eventually(func() bool {
		var vap admissionv1.ValidatingAdmissionPolicy
		return apierrors.IsNotFound(k.Get(ctx, client.ObjectKey{Name: "orderly-labelpolicy-e2e-protect-deny"}, &vap))
	}, timeout, poll).Should(BeTrue())

	port := freePort()
	restartManager(t, "--labelpolicy-mutation=webhook", "--webhook-failure-policy=Fail", "--webhook-host=127.0.0.1",
		fmt.Sprintf("--webhook-port=%d", port), fmt.Sprintf("--webhook-url=https://127.0.0.1:%d", port))
	def := &policyv1alpha1.LabelPolicy{ObjectMeta: metav1.ObjectMeta{Name: "e2e-protect-default"},
		Spec: policyv1alpha1.LabelPolicySpec{Label: "e2e-protect", Action: policyv1alpha1.ActionDefault, DefaultValue: "cc-shared"}}
	g.Expect(c.Create(ctx, def)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), def) })
	got = waitPolicyReady(g, c, def.Name)
	g.Expect(got.Status.AdmissionMode).To(Equal(policyv1alpha1.AdmissionModeWebhook))
	g.Eventually(func(g Gomega) {
		d := deployment("e2e-lp-protect", "", 0)
		d.GenerateName = "probe-"
		g.Expect(k.Create(ctx, d)).To(Succeed())
		_ = k.Delete(ctx, d)
		g.Expect(d.Labels).To(HaveKeyWithValue("e2e-protect", "cc-shared"))
	}, timeout, poll).Should(Succeed())
	admittedUntouched("Default, webhook up")

	// The webhook down, with failurePolicy Fail: every matched request is rejected,
	// except in the protected namespaces, which the configuration does not match.
	stopManager()
	err := k.Create(ctx, deployment("e2e-lp-protect", "while-down", 0))
	g.Expect(err).To(HaveOccurred(), "the webhook is down and its failure policy is Fail")
	g.Expect(err.Error()).To(ContainSubstring("e2e-protect-default.labelpolicy.orderly.dev"))
	admittedUntouched("Default, webhook down")
}
