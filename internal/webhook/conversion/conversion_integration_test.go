//go:build integration

package conversion_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	datav1beta1 "orderly.dev/orderly/api/data/v1beta1"
	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	powerv1beta1 "orderly.dev/orderly/api/power/v1beta1"
	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/testing/testenv"
	"orderly.dev/orderly/internal/testing/testtls"
	orderlywebhook "orderly.dev/orderly/internal/webhook"
	"orderly.dev/orderly/internal/webhook/conversion"
)

// TestConversionThroughTheWebhook runs the manager's webhook server as `orderly
// manager --webhook-url` does (the loopback URL of `make run`), with Orderly's own
// certificate: the manager points the CRDs at it, and objects written in one version
// are stored in v1alpha1 and read back in both, converted by the webhook.
func TestConversionThroughTheWebhook(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := testenv.StartForTest(t)
	k := e.Client
	const ns = "orderly-system"
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())

	port := freePort(t)
	opts := orderlywebhook.Options{
		Mutation: string(admission.Auto), Host: "127.0.0.1", Port: port, URL: fmt.Sprintf("https://127.0.0.1:%d", port),
		Service: "orderly-webhook", Secret: "orderly-webhook-tls", FailurePolicy: string(admissionv1.Ignore), TimeoutSeconds: 5,
		Conversion: true,
	}
	// No controller needs an admission webhook: the server runs for conversion only.
	server, err := orderlywebhook.Prepare(ctx, e.Config, opts, ns, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(server.Admission.Webhook).To(BeNil(), "no admission webhook is configured for conversion alone")
	serve := kit.Controller{Name: "conversion", Setup: func(ctx context.Context, mgr ctrl.Manager, _ kit.Deps) error {
		return server.Register(ctx, mgr)
	}}
	e.StartManagerForTest(t, kit.Deps{Namespace: ns}, []kit.Controller{serve}, func(o *ctrl.Options) {
		o.WebhookServer = server.NewServer()
	})

	// The CRDs point at the webhook, with the CA of its certificate.
	ax := apiextensionsClient(t, e)
	for _, name := range conversion.CRDs {
		g.Eventually(func(g Gomega) {
			var crd apiextensionsv1.CustomResourceDefinition
			g.Expect(ax.Get(ctx, types.NamespacedName{Name: name}, &crd)).To(Succeed())
			c := crd.Spec.Conversion
			g.Expect(c.Strategy).To(Equal(apiextensionsv1.WebhookConverter))
			g.Expect(ptr.Deref(c.Webhook.ClientConfig.URL, "")).To(Equal(opts.URL + "/convert"))
			g.Expect(string(c.Webhook.ClientConfig.CABundle)).To(ContainSubstring("BEGIN CERTIFICATE"))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), name)
	}

	// A v1beta1 SleepSchedule, read as v1alpha1 (what the controllers read) and back.
	beta := &powerv1beta1.SleepSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "nights"},
		Spec: powerv1beta1.SleepScheduleSpec{
			Namespaces: []string{"dev"}, TimeZone: "Europe/Berlin", Suspend: true,
			Awake: []powerv1beta1.AwakeWindow{{Days: "Mon-Fri", From: "07:30", To: "19:00"}},
		},
	}
	// The API server may ask the webhook before the server listens; retry briefly.
	g.Eventually(func() error { return k.Create(ctx, beta) }, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	var alpha powerv1alpha1.SleepSchedule
	g.Expect(k.Get(ctx, client.ObjectKey{Name: "nights"}, &alpha)).To(Succeed())
	g.Expect(alpha.APIVersion).To(BeEmpty()) // the typed client does not keep it; the kind's version is the Go type's
	g.Expect(jsonOf(t, alpha.Spec)).To(MatchJSON(jsonOf(t, beta.Spec)))
	g.Expect(alpha.Spec.Suspend).To(BeTrue())
	// status written in v1alpha1 (as the controller does) reads the same in v1beta1.
	alpha.Status.ObservedGeneration = alpha.Generation
	alpha.Status.State = powerv1alpha1.StateAwake
	g.Expect(k.Status().Update(ctx, &alpha)).To(Succeed())
	var again powerv1beta1.SleepSchedule
	g.Expect(k.Get(ctx, client.ObjectKey{Name: "nights"}, &again)).To(Succeed())
	g.Expect(jsonOf(t, again.Spec)).To(MatchJSON(jsonOf(t, beta.Spec)))
	g.Expect(jsonOf(t, again.Status)).To(MatchJSON(jsonOf(t, alpha.Status)))

	// A v1alpha1 DevDatabase read as v1beta1.
	dev := &datav1alpha1.DevDatabase{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"},
		Spec:       datav1alpha1.DevDatabaseSpec{ServerRef: "shared", TTL: metav1.Duration{Duration: 2 * time.Hour}},
	}
	g.Expect(k.Create(ctx, dev)).To(Succeed())
	var devBeta datav1beta1.DevDatabase
	g.Expect(k.Get(ctx, client.ObjectKeyFromObject(dev), &devBeta)).To(Succeed())
	g.Expect(jsonOf(t, devBeta.Spec)).To(MatchJSON(jsonOf(t, dev.Spec)))

	// Both kinds are stored in v1alpha1 in this release, and the webhook did the work.
	for _, name := range conversion.CRDs {
		var crd apiextensionsv1.CustomResourceDefinition
		g.Expect(ax.Get(ctx, types.NamespacedName{Name: name}, &crd)).To(Succeed())
		g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1alpha1"}), name)
	}
	g.Expect(testenv.Series("controller_runtime_webhook_requests_total", map[string]string{"webhook": "/convert", "code": "200"})).To(BeNumerically(">", 0))
}

// TestWriterWithoutWebhookSetsNone: CRDs that a manager with a webhook pointed at
// itself, the manager gone, are set back to None by a manager that serves none, and
// v1beta1 objects can be written again (with the dead webhook they could not).
func TestWriterWithoutWebhookSetsNone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := testenv.StartForTest(t)
	ax := apiextensionsClient(t, e)
	ca, err := testtls.OtherCA()
	g.Expect(err).NotTo(HaveOccurred())
	gone := &conversion.Writer{Client: ax, Endpoint: &admission.Endpoint{URL: fmt.Sprintf("https://127.0.0.1:%d", freePort(t))},
		CABundle: func() ([]byte, error) { return ca, nil }}
	g.Expect(gone.Ensure(ctx)).To(Succeed())
	beta := func(name string) *powerv1beta1.SleepSchedule {
		return &powerv1beta1.SleepSchedule{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: powerv1beta1.SleepScheduleSpec{
			Namespaces: []string{"dev"}, TimeZone: "Europe/Berlin",
			Awake: []powerv1beta1.AwakeWindow{{Days: "Mon-Fri", From: "07:30", To: "19:00"}},
		}}
	}
	g.Eventually(func() error { return e.Client.Create(ctx, beta("refused"), client.DryRunAll) }, 10*time.Second, 200*time.Millisecond).
		Should(MatchError(ContainSubstring("conversion webhook")))

	none := &conversion.Writer{Client: ax}
	g.Expect(none.Ensure(ctx)).To(Succeed())
	for _, name := range conversion.CRDs {
		var crd apiextensionsv1.CustomResourceDefinition
		g.Expect(ax.Get(ctx, types.NamespacedName{Name: name}, &crd)).To(Succeed())
		g.Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.NoneConverter), name)
		g.Expect(crd.Spec.Conversion.Webhook).To(BeNil(), name)
	}
	g.Eventually(func() error { return e.Client.Create(ctx, beta("accepted"), client.DryRunAll) }, 10*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(none.Ensure(ctx)).To(Succeed(), "a second run writes nothing and fails nothing")
}

func apiextensionsClient(t *testing.T, e *testenv.Env) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(e.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
