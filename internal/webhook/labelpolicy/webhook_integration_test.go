//go:build integration

package labelpolicy

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
	lpcontroller "orderly.dev/orderly/internal/controller/policy/labelpolicy"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
	"orderly.dev/orderly/internal/testenv"
	"orderly.dev/orderly/internal/webhook/certs"
)

// These tests run the fallback as the manager does on an API server that does not
// serve MutatingAdmissionPolicy: the LabelPolicy controller in auto mode, Orderly's
// certificate in a Secret, and the webhook server on loopback that the API server calls.

const (
	timeout      = 30 * time.Second
	poll         = 200 * time.Millisecond
	webhookNS    = "orderly-system"
	webhookTLS   = "orderly-webhook-tls"
	fieldTimeout = 5
)

var (
	k       client.Client
	certMgr *certs.Manager
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) (func(), error) {
		k = e.Client
		ctx := context.Background()
		if err := k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: webhookNS}}); err != nil {
			return nil, err
		}
		port := freePort()
		certMgr = &certs.Manager{Client: k, Reader: k, Namespace: webhookNS, Name: webhookTLS, IPs: []net.IP{net.ParseIP("127.0.0.1")}}
		if err := certMgr.Ensure(ctx); err != nil {
			return nil, err
		}
		deps := kit.Deps{Admission: admission.Config{
			Mode:     admission.Auto,
			Webhook:  &admission.Endpoint{URL: fmt.Sprintf("https://127.0.0.1:%d", port), FailurePolicy: admissionv1.Ignore, TimeoutSeconds: fieldTimeout},
			CABundle: certMgr.CABundle,
		}}
		lp := lpcontroller.Controller
		lp.Setup = func(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
			mgr.GetWebhookServer().Register(lpcontroller.WebhookPathPrefix, (&Handler{Reader: mgr.GetClient()}).Webhook())
			r := &lpcontroller.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: kit.NewRecorder(mgr.GetEventRecorder("orderly-labelpolicy")),
				Mutation: deps.Admission.Mode, AuditInterval: 2 * time.Second, Webhook: deps.Admission.Webhook, WebhookCABundle: deps.Admission.CABundle}
			return r.SetupWithManager(ctx, mgr, deps.Options)
		}
		return e.StartManager(deps, []kit.Controller{lp}, func(o *ctrl.Options) {
			o.WebhookServer = webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port,
				TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = certMgr.GetCertificate }}})
		})
	}, testenv.WithoutMutatingAdmissionPolicy())
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func newPolicy(name, label string, action policyv1alpha1.Action) *policyv1alpha1.LabelPolicy {
	return &policyv1alpha1.LabelPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1alpha1.LabelPolicySpec{
			Label: label, Action: action,
			Match: policyv1alpha1.LabelPolicyMatch{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"test": name}}},
		},
	}
}

func createNS(t *testing.T, name string, lbls map[string]string) {
	t.Helper()
	NewWithT(t).Expect(k.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}})).To(Succeed())
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

func getPolicy(g Gomega, name string) *policyv1alpha1.LabelPolicy {
	var p policyv1alpha1.LabelPolicy
	g.Expect(k.Get(context.Background(), client.ObjectKey{Name: name}, &p)).To(Succeed())
	return &p
}

// TestWebhookFillsLabelsIn: the same behaviour as the native MutatingAdmissionPolicy
// (see the controller's TestDefaultFillsLabelFromNamespaceThenDefaultValue), by webhook.
func TestWebhookFillsLabelsIn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNS(t, "wh-ns", map[string]string{"test": "wh-default", "cc-wh": "from-ns"})
	createNS(t, "wh-plain", map[string]string{"test": "wh-default"})
	legacy := deployment("wh-plain", "legacy", map[string]string{"cc-wh": "shared"})
	g.Expect(k.Create(ctx, legacy)).To(Succeed())
	p := newPolicy("wh-default", "cc-wh", policyv1alpha1.ActionDefault)
	p.Spec.DefaultValue = "shared"
	p.Spec.PropagateToPodTemplate = true
	g.Expect(k.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), p) })

	g.Eventually(func(g Gomega) {
		p := getPolicy(g, "wh-default")
		g.Expect(p.Status.AdmissionMode).To(Equal(policyv1alpha1.AdmissionModeWebhook))
		c := meta.FindStatusCondition(p.Status.Conditions, policyv1alpha1.ConditionDefaultingAvailable)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(lpcontroller.ReasonWebhook))
		ready := meta.FindStatusCondition(p.Status.Conditions, policyv1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
	}, timeout, poll).Should(Succeed())

	var wc admissionv1.MutatingWebhookConfiguration
	g.Expect(k.Get(ctx, client.ObjectKey{Name: "orderly-labelpolicy-wh-default"}, &wc)).To(Succeed())
	g.Expect(wc.Labels).To(HaveKeyWithValue(labels.ManagedBy, labels.ManagedByValue))
	ca, err := certMgr.CABundle()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wc.Webhooks[0].ClientConfig.CABundle).To(Equal(ca))

	// The configuration is in place; wait until the API server calls it.
	g.Eventually(func(g Gomega) {
		probe := deployment("wh-ns", "", nil)
		probe.GenerateName = "probe-"
		g.Expect(k.Create(ctx, probe)).To(Succeed())
		_ = k.Delete(ctx, probe)
		g.Expect(probe.Labels).To(HaveKeyWithValue("cc-wh", "from-ns"))
	}, timeout, poll).Should(Succeed())

	d := deployment("wh-ns", "web", nil)
	g.Expect(k.Create(ctx, d)).To(Succeed())
	g.Expect(d.Labels).To(HaveKeyWithValue("cc-wh", "from-ns"))
	g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue("cc-wh", "from-ns"), "propagateToPodTemplate")
	g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue("app", "web"))

	d2 := deployment("wh-plain", "web", nil)
	g.Expect(k.Create(ctx, d2)).To(Succeed())
	g.Expect(d2.Labels).To(HaveKeyWithValue("cc-wh", "shared"))

	d3 := deployment("wh-plain", "own", map[string]string{"cc-wh": "mine"})
	g.Expect(k.Create(ctx, d3)).To(Succeed())
	g.Expect(d3.Labels).To(HaveKeyWithValue("cc-wh", "mine"))
	g.Expect(d3.Spec.Template.Labels).To(HaveKeyWithValue("cc-wh", "mine"))

	// An update that leaves the pod template alone does not label it; one that
	// changes the template anyway does.
	legacy.Spec.Replicas = ptr(int32(3))
	g.Expect(k.Update(ctx, legacy)).To(Succeed())
	g.Expect(legacy.Spec.Template.Labels).NotTo(HaveKey("cc-wh"), "a replicas change must not touch the template")
	legacy.Spec.Template.Spec.Containers[0].Image = "registry.example/app:2"
	g.Expect(k.Update(ctx, legacy)).To(Succeed())
	g.Expect(legacy.Spec.Template.Labels).To(HaveKeyWithValue("cc-wh", "shared"))

	// Bare pods are labelled; pods with an owner are never sent to the webhook.
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "wh-plain", Name: "bare"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}
	g.Expect(k.Create(ctx, bare)).To(Succeed())
	g.Expect(bare.Labels).To(HaveKeyWithValue("cc-wh", "shared"))
	owned := bare.DeepCopy()
	owned.ObjectMeta = metav1.ObjectMeta{Namespace: "wh-plain", Name: "owned", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "00000000-0000-0000-0000-000000000001"}}}
	g.Expect(k.Create(ctx, owned)).To(Succeed())
	g.Expect(owned.Labels).NotTo(HaveKey("cc-wh"))
}

// TestWebhookWithoutAnyValueStillDenies: the webhook fills nothing in when there is
// nothing to fill in, and the validating policy rejects with its message.
func TestWebhookWithoutAnyValueStillDenies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNS(t, "wh-none", map[string]string{"test": "wh-none"})
	p := newPolicy("wh-none", "cc-none", policyv1alpha1.ActionDefault)
	g.Expect(k.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), p) })
	g.Eventually(func() error {
		d := deployment("wh-none", "", nil)
		d.GenerateName = "web-"
		err := k.Create(ctx, d)
		if err == nil {
			_ = k.Delete(ctx, d)
		}
		return err
	}, timeout, poll).Should(MatchError(ContainSubstring("has no label cc-none")))
}

// TestWebhookConfigurationIsRepaired: an edited or deleted MutatingWebhookConfiguration
// is restored, and one the policy no longer needs is removed.
func TestWebhookConfigurationIsRepaired(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNS(t, "wh-drift", map[string]string{"test": "wh-drift"})
	p := newPolicy("wh-drift", "cc-drift", policyv1alpha1.ActionDefault)
	p.Spec.DefaultValue = "x"
	g.Expect(k.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), p) })

	name := client.ObjectKey{Name: "orderly-labelpolicy-wh-drift"}
	var wc admissionv1.MutatingWebhookConfiguration
	g.Eventually(func() error { return k.Get(ctx, name, &wc) }, timeout, poll).Should(Succeed())
	want := wc.Webhooks[0].DeepCopy()

	wc.Webhooks[0].ClientConfig.URL = ptr("https://127.0.0.1:1/elsewhere")
	wc.Webhooks[0].Rules = wc.Webhooks[0].Rules[:1]
	g.Expect(k.Update(ctx, &wc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k.Get(ctx, name, &wc)).To(Succeed())
		g.Expect(wc.Webhooks[0].ClientConfig).To(Equal(want.ClientConfig))
		g.Expect(wc.Webhooks[0].Rules).To(Equal(want.Rules))
	}, timeout, poll).Should(Succeed())

	uid := wc.UID
	g.Expect(k.Delete(ctx, &wc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k.Get(ctx, name, &wc)).To(Succeed())
		g.Expect(wc.UID).NotTo(Equal(uid))
	}, timeout, poll).Should(Succeed())

	// A Deny policy fills nothing in: the configuration goes.
	latest := getPolicy(g, "wh-drift")
	latest.Spec.Action = policyv1alpha1.ActionDeny
	latest.Spec.DefaultValue = ""
	g.Expect(k.Update(ctx, latest)).To(Succeed())
	g.Eventually(func() bool { return apierrors.IsNotFound(k.Get(ctx, name, &wc)) }, timeout, poll).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		g.Expect(getPolicy(g, "wh-drift").Status.AdmissionMode).To(Equal(policyv1alpha1.AdmissionModeNative))
	}, timeout, poll).Should(Succeed())
}

// TestCertificateSecret: every replica uses the certificate in the Secret, and a Secret
// of that name that Orderly did not create is never overwritten.
func TestCertificateSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	var s corev1.Secret
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: webhookNS, Name: webhookTLS}, &s)).To(Succeed())
	g.Expect(s.Labels).To(HaveKeyWithValue(labels.ManagedBy, labels.ManagedByValue))
	g.Expect(s.Type).To(Equal(corev1.SecretTypeTLS))

	replica := &certs.Manager{Client: k, Reader: k, Namespace: webhookNS, Name: webhookTLS, IPs: []net.IP{net.ParseIP("127.0.0.1")}}
	g.Expect(replica.Ensure(ctx)).To(Succeed())
	a, _ := certMgr.CABundle()
	b, _ := replica.CABundle()
	g.Expect(b).To(Equal(a), "a second replica issued its own CA")
	var after corev1.Secret
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: webhookNS, Name: webhookTLS}, &after)).To(Succeed())
	g.Expect(after.ResourceVersion).To(Equal(s.ResourceVersion), "a second replica rewrote a valid certificate")

	// A replica that must also serve another name renews the serving certificate but keeps the CA.
	renew := &certs.Manager{Client: k, Reader: k, Namespace: webhookNS, Name: webhookTLS, IPs: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"orderly-webhook.orderly-system.svc"}}
	g.Expect(renew.Ensure(ctx)).To(Succeed())
	c, _ := renew.CABundle()
	g.Expect(c).To(Equal(a))
	g.Expect(certMgr.Ensure(ctx)).To(Succeed(), "the first replica reloads the renewed certificate")

	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: webhookNS, Name: "someone-elses"}, StringData: map[string]string{"tls.crt": "x"}}
	g.Expect(k.Create(ctx, foreign)).To(Succeed())
	m := &certs.Manager{Client: k, Reader: k, Namespace: webhookNS, Name: "someone-elses"}
	g.Expect(m.Ensure(ctx)).To(MatchError(ContainSubstring("was not created by Orderly")))
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: webhookNS, Name: "someone-elses"}, foreign)).To(Succeed())
	g.Expect(string(foreign.Data["tls.crt"])).To(Equal("x"))
}

func ptr[T any](v T) *T { return &v }
