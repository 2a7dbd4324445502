//go:build integration

package labelpolicy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
	lpcontroller "orderly.dev/orderly/internal/controller/policy/labelpolicy"
	"orderly.dev/orderly/internal/controller/policy/labelpolicy/labelpolicytest"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
	"orderly.dev/orderly/internal/testing/testenv"
	orderlywebhook "orderly.dev/orderly/internal/webhook"
	"orderly.dev/orderly/internal/webhook/certs"
	"orderly.dev/orderly/internal/webhook/tlstest"
)

// These tests run the fallback as the manager does on an API server that does not
// serve MutatingAdmissionPolicy: internal/webhook prepares the webhook (auto mode,
// Orderly's certificate in a Secret, the server on loopback that the API server
// calls) and the LabelPolicy controller writes the configurations that point at it.

const (
	timeout    = 30 * time.Second
	poll       = 200 * time.Millisecond
	webhookNS  = "orderly-system"
	webhookTLS = "orderly-webhook-tls"
)

var (
	k client.Client
	// server is what internal/webhook prepared, as for `orderly manager`.
	server *orderlywebhook.Server
	// webhookAddr is where it listens.
	webhookAddr string
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) (func(), error) {
		k = e.Client
		ctx := context.Background()
		if err := k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: webhookNS}}); err != nil {
			return nil, err
		}
		port := freePort()
		webhookAddr = fmt.Sprintf("127.0.0.1:%d", port)
		lp := lpcontroller.Controller
		opts := orderlywebhook.Options{
			Mutation: string(admission.Auto), Host: "127.0.0.1", Port: port, URL: fmt.Sprintf("https://127.0.0.1:%d", port),
			Service: "orderly-webhook", Secret: webhookTLS, FailurePolicy: string(admissionv1.Ignore), TimeoutSeconds: 5,
		}
		var err error
		if server, err = orderlywebhook.Prepare(ctx, e.Config, opts, webhookNS, []kit.Controller{lp}); err != nil {
			return nil, err
		}
		if server.Admission.Webhook == nil || server.Admission.MAPServed {
			return nil, fmt.Errorf("auto mode on an API server without MutatingAdmissionPolicy serves no webhook: %+v", server.Admission)
		}
		lp.Setup = func(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
			if err := server.Register(ctx, mgr); err != nil {
				return err
			}
			r := lpcontroller.NewReconciler(mgr, deps)
			r.AuditInterval = 2 * time.Second
			return r.SetupWithManager(ctx, mgr, deps.Options)
		}
		return e.StartManager(kit.Deps{Admission: server.Admission, Namespace: webhookNS}, []kit.Controller{lp}, func(o *ctrl.Options) {
			o.WebhookServer = server.NewServer()
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

// TestMutationCases runs the admission cases that every mutation path must pass (the
// controller's suite runs the same table through the native MutatingAdmissionPolicy)
// through Orderly's webhook.
func TestMutationCases(t *testing.T) {
	labelpolicytest.Run(t, labelpolicytest.Path{Client: k, Timeout: timeout, Poll: poll,
		Enforced: func(g Gomega, p *policyv1alpha1.LabelPolicy) {
			g.Expect(p.Status.AdmissionMode).To(Equal(policyv1alpha1.AdmissionModeWebhook))
			c := meta.FindStatusCondition(p.Status.Conditions, policyv1alpha1.ConditionDefaultingAvailable)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(lpcontroller.ReasonWebhook))
			ready := meta.FindStatusCondition(p.Status.Conditions, policyv1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)

			var wc admissionv1.MutatingWebhookConfiguration
			g.Expect(k.Get(context.Background(), client.ObjectKey{Name: "orderly-labelpolicy-" + p.Name}, &wc)).To(Succeed())
			g.Expect(wc.Labels).To(HaveKeyWithValue(labels.ManagedBy, labels.ManagedByValue))
			ca, err := server.Admission.CABundle()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wc.Webhooks[0].ClientConfig.CABundle).To(Equal(ca))
		}})
}

// TestRequestSeriesGoWithThePolicy: the webhook's series of a policy are removed with
// it (they used to stay for ever, one set per policy ever deleted).
func TestRequestSeriesGoWithThePolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNS(t, "wh-series", map[string]string{"test": "wh-series"})
	p := newPolicy("wh-series", "cc-series", policyv1alpha1.ActionDefault)
	p.Spec.DefaultValue = "x"
	g.Expect(k.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), p) })

	const metric = "orderly_labelpolicy_webhook_requests_total"
	g.Eventually(func(g Gomega) {
		d := deployment("wh-series", "", nil)
		d.GenerateName = "web-"
		g.Expect(k.Create(ctx, d)).To(Succeed())
		_ = k.Delete(ctx, d)
		g.Expect(d.Labels).To(HaveKeyWithValue("cc-series", "x"))
	}, timeout, poll).Should(Succeed())
	g.Expect(labelpolicytest.SeriesOf(g, metric, lpcontroller.MetricLabel, "wh-series")).NotTo(BeZero())

	g.Expect(k.Delete(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) int {
		return labelpolicytest.SeriesOf(g, metric, lpcontroller.MetricLabel, "wh-series")
	}, timeout, poll).Should(BeZero())
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

	wc.Webhooks[0].ClientConfig.URL = ptr.To("https://127.0.0.1:1/elsewhere")
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

	// The Secret was written when the suite prepared the webhook, as by a first replica.
	first := &certs.Manager{Client: k, Reader: k, Namespace: webhookNS, Name: webhookTLS, IPs: []net.IP{net.ParseIP("127.0.0.1")}}
	g.Expect(first.Ensure(ctx)).To(Succeed())
	replica := &certs.Manager{Client: k, Reader: k, Namespace: webhookNS, Name: webhookTLS, IPs: []net.IP{net.ParseIP("127.0.0.1")}}
	g.Expect(replica.Ensure(ctx)).To(Succeed())
	a, _ := server.Admission.CABundle()
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
	g.Expect(first.Ensure(ctx)).To(Succeed(), "the first replica reloads the renewed certificate")

	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: webhookNS, Name: "someone-elses"}, StringData: map[string]string{"tls.crt": "x"}}
	g.Expect(k.Create(ctx, foreign)).To(Succeed())
	m := &certs.Manager{Client: k, Reader: k, Namespace: webhookNS, Name: "someone-elses"}
	g.Expect(m.Ensure(ctx)).To(MatchError(ContainSubstring("was not created by Orderly")))
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: webhookNS, Name: "someone-elses"}, foreign)).To(Succeed())
	g.Expect(string(foreign.Data["tls.crt"])).To(Equal("x"))
}

// TestDefaultPolicyNeverBlocksProtectedNamespaces: a Default policy that matches every
// namespace, with nothing to fill in where a namespace has no label, is enforced
// everywhere else, but a Deployment in the manager's namespace (Orderly's own), in
// kube-system or in another kube-* namespace is admitted, and the webhook does not
// touch it: the configuration does not send it there.
func TestDefaultPolicyNeverBlocksProtectedNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNS(t, "wh-protect", nil)
	createNS(t, "wh-protect-labelled", map[string]string{"cc-protect": "from-ns"})
	createNS(t, "kube-wh-protect", nil)
	p := &policyv1alpha1.LabelPolicy{ObjectMeta: metav1.ObjectMeta{Name: "wh-everywhere"},
		Spec: policyv1alpha1.LabelPolicySpec{Label: "cc-protect", Action: policyv1alpha1.ActionDefault}}
	g.Expect(k.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { deleteWithAdmissionObjects(t, p) })

	// Enforced elsewhere: filled in from the namespace by the webhook, or rejected.
	g.Eventually(func(g Gomega) {
		d := deployment("wh-protect-labelled", "", nil)
		d.GenerateName = "probe-"
		g.Expect(k.Create(ctx, d)).To(Succeed())
		_ = k.Delete(ctx, d)
		g.Expect(d.Labels).To(HaveKeyWithValue("cc-protect", "from-ns"))
	}, timeout, poll).Should(Succeed())
	// The validating policy may take a moment longer to load than the webhook.
	g.Eventually(func() error {
		d := deployment("wh-protect", "", nil)
		d.GenerateName = "probe-"
		err := k.Create(ctx, d)
		if err == nil {
			_ = k.Delete(ctx, d)
		}
		return err
	}, timeout, poll).Should(MatchError(ContainSubstring("has no label cc-protect")))

	for _, ns := range []string{webhookNS, "kube-system", "kube-wh-protect"} {
		// Labelled as Orderly's own Deployment is (config/manager/manager.yaml).
		d := deployment(ns, "wh-orderly-manager", map[string]string{"app.kubernetes.io/name": "orderly"})
		g.Expect(k.Create(ctx, d)).To(Succeed(), "the policy blocked a Deployment in %s", ns)
		g.Expect(d.Labels).NotTo(HaveKey("cc-protect"))
		t.Cleanup(func() { _ = k.Delete(context.Background(), d) })
	}
	var wc admissionv1.MutatingWebhookConfiguration
	g.Expect(k.Get(ctx, client.ObjectKey{Name: "orderly-labelpolicy-wh-everywhere"}, &wc)).To(Succeed())
	g.Expect(wc.Webhooks[0].NamespaceSelector.MatchExpressions).To(ContainElement(HaveField("Values", ContainElement(webhookNS))))
	g.Expect(wc.Webhooks[0].MatchConditions).To(ContainElement(HaveField("Expression", ContainSubstring(`startsWith("kube-")`))))
	g.Eventually(func(g Gomega) {
		g.Expect(getPolicy(g, p.Name).Status.ProtectedNamespaces).To(Equal([]string{"kube-*", webhookNS}))
	}, timeout, poll).Should(Succeed())
}

// deleteWithAdmissionObjects deletes a policy and then the admission objects it had,
// which the garbage collector would remove in a real cluster, and envtest has none.
func deleteWithAdmissionObjects(t *testing.T, p *policyv1alpha1.LabelPolicy) {
	ctx := context.Background()
	_ = k.Delete(ctx, p)
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(k.Get(ctx, client.ObjectKeyFromObject(p), &policyv1alpha1.LabelPolicy{}))
	}, timeout, poll).Should(BeTrue())
	name := metav1.ObjectMeta{Name: "orderly-labelpolicy-" + p.Name}
	for _, o := range []client.Object{
		&admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: name},
		&admissionv1.ValidatingAdmissionPolicy{ObjectMeta: name},
		&admissionv1.MutatingWebhookConfiguration{ObjectMeta: name},
	} {
		_ = k.Delete(ctx, o)
	}
}

// TestWebhookServerSpeaksHTTP1Only: the server the manager runs refuses HTTP/2.
func TestWebhookServerSpeaksHTTP1Only(t *testing.T) {
	ca, err := server.Admission.CABundle()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	NewWithT(t).Expect(pool.AppendCertsFromPEM(ca)).To(BeTrue())
	tlstest.AssertHTTP1Only(t, webhookAddr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}, lpcontroller.WebhookPathPrefix+"none")
}
