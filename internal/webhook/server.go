// Package webhook prepares Orderly's admission webhook server for the manager. Once,
// at start-up, it decides how the admission-enforcing controllers fill values in
// (natively with MutatingAdmissionPolicy, or through Orderly's webhook), whether this
// manager serves the webhook and with which certificate; then it registers the
// handlers on the manager. The packages below it hold the handlers and the
// certificate.
package webhook

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"slices"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/controller/policy/imagepolicy"
	"orderly.dev/orderly/internal/controller/policy/labelpolicy"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/webhook/certs"
	"orderly.dev/orderly/internal/webhook/conversion"
	imagepolicywebhook "orderly.dev/orderly/internal/webhook/imagepolicy"
	labelpolicywebhook "orderly.dev/orderly/internal/webhook/labelpolicy"
)

// Options are the manager's webhook flags, as given.
type Options struct {
	// Mutation is how LabelPolicy labels are filled in: auto, native, webhook or off
	// (--labelpolicy-mutation); empty is auto.
	Mutation string
	// Host is the address the webhook server listens on; empty for all (--webhook-host).
	Host string
	// Port is the webhook server's port (--webhook-port).
	Port int
	// URL is the https base URL the API server calls the webhook at, for a manager
	// outside the cluster; empty to go through Service (--webhook-url).
	URL string
	// Service is the Service in the manager's namespace in front of the webhook server,
	// on port 443 (--webhook-service).
	Service string
	// Secret is the Secret in the manager's namespace where Orderly keeps the webhook's
	// CA and serving certificate (--webhook-secret).
	Secret string
	// CertDir holds ca.crt, tls.crt and tls.key issued by someone else; when set,
	// Orderly manages no certificate (--webhook-cert-dir).
	CertDir string
	// FailurePolicy is what the API server does when the webhook cannot be reached:
	// Ignore or Fail (--webhook-failure-policy).
	FailurePolicy string
	// TimeoutSeconds is how long the API server waits for the webhook, 1 to 30
	// (--webhook-timeout-seconds).
	TimeoutSeconds int32
	// ImagePolicy serves the ImagePolicy webhook (the checks from scan results) when
	// the ImagePolicy controller runs (--imagepolicy-webhook).
	ImagePolicy bool
	// Conversion serves the conversion webhook of the kinds served in two versions
	// and points their CRDs at it (internal/webhook/conversion). The manager sets it
	// when the API server can reach it: in a pod (through Service), or with URL.
	Conversion bool
}

// Validate checks the options without talking to the cluster and returns the
// mutation mode.
func (o Options) Validate() (admission.Mode, error) {
	mode, err := admission.ParseMode(o.Mutation)
	if err != nil {
		return "", fmt.Errorf("unknown LabelPolicy mutation mode %q in --labelpolicy-mutation: use auto, native, webhook or off", o.Mutation)
	}
	switch admissionv1.FailurePolicyType(o.FailurePolicy) {
	case admissionv1.Ignore, admissionv1.Fail:
	default:
		return "", fmt.Errorf("unknown --webhook-failure-policy %q: use Ignore or Fail", o.FailurePolicy)
	}
	if o.TimeoutSeconds < 1 || o.TimeoutSeconds > 30 {
		return "", fmt.Errorf("--webhook-timeout-seconds %d: must be between 1 and 30", o.TimeoutSeconds)
	}
	if o.URL != "" {
		u, err := url.Parse(o.URL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return "", fmt.Errorf("--webhook-url %q: must be an https:// URL with a host", o.URL)
		}
	}
	return mode, nil
}

// Server is what Prepare decided: what the controllers are told, and the webhook
// server this manager runs, if any.
type Server struct {
	// Admission is kit.Deps.Admission for the controllers.
	Admission admission.Config
	// ServerOptions configure the manager's webhook server.
	ServerOptions webhook.Options

	serve bool
	// images is set when the ImagePolicy controller runs: its webhook is served.
	images bool
	// namespace is the manager's namespace, which the webhook never mutates in.
	namespace string
	// certs keeps Orderly's own certificate; nil when it comes from CertDir.
	certs *certs.Manager
	// conversion is set when the conversion webhook is served: how the API server
	// reaches it and the CA of its certificate.
	conversion *conversionEndpoint
}

type conversionEndpoint struct {
	endpoint *admission.Endpoint
	caBundle func() ([]byte, error)
}

// DisableHTTP2 makes a TLS server offer HTTP/1.1 only. HTTP/2's stream handling was
// the way into the 2023 "rapid reset" denial of service (CVE-2023-44487) and its kin;
// the API server speaks HTTP/1.1 to webhooks just as well, and a Prometheus scrape
// needs nothing more. A client that insists on h2 fails the TLS handshake; one that
// offers both gets HTTP/1.1.
func DisableHTTP2(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }

// serverOptions are the webhook server's options before a certificate is chosen.
func serverOptions(o Options) webhook.Options {
	return webhook.Options{Host: o.Host, Port: o.Port, TLSOpts: []func(*tls.Config){DisableHTTP2}}
}

// Prepare decides, once at start-up, how LabelPolicy labels are filled in and
// whether this manager serves Orderly's webhook: with mode webhook, or auto on an
// API server that does not serve MutatingAdmissionPolicy. It asks the API server
// only when the LabelPolicy controller is among controllers, and passes the answer
// on in Admission.MAPServed. When the webhook is served, its certificate is loaded
// (or issued, in the Secret o.Secret of namespace) here, before the server starts,
// so that the first request finds it.
func Prepare(ctx context.Context, cfg *rest.Config, o Options, namespace string, controllers []kit.Controller) (*Server, error) {
	mode, err := o.Validate()
	if err != nil {
		return nil, err
	}
	s := &Server{Admission: admission.Config{Mode: mode}, ServerOptions: serverOptions(o), namespace: namespace}
	// ImagePolicy decides from scan results in Orderly's webhook, whatever the
	// LabelPolicy mutation mode: asked to, with its controller, the manager serves it.
	s.images = o.ImagePolicy && slices.ContainsFunc(controllers, func(c kit.Controller) bool { return c.Name == imagepolicy.Name })
	labels := slices.ContainsFunc(controllers, func(c kit.Controller) bool { return c.Name == labelpolicy.Name })
	if labels {
		if s.Admission.MAPServed, err = admission.ServesMutatingAdmissionPolicy(cfg); err != nil {
			return nil, err
		}
	}
	// Admission webhooks: ImagePolicy's, and LabelPolicy's where labels are filled
	// in by Orderly's webhook.
	admissionWebhooks := s.images || (labels && servesWebhook(mode, s.Admission.MAPServed))
	if !admissionWebhooks && !o.Conversion {
		return s, nil
	}
	s.serve = true
	endpoint, dnsNames, ips := o.endpoint(namespace)
	if admissionWebhooks {
		s.Admission.Webhook = endpoint
	}
	var caBundle func() ([]byte, error)
	defer func() {
		if admissionWebhooks {
			s.Admission.CABundle = caBundle
		}
		if o.Conversion {
			s.conversion = &conversionEndpoint{endpoint: endpoint, caBundle: caBundle}
		}
	}()
	if o.CertDir != "" {
		s.ServerOptions.CertDir = o.CertDir
		caBundle = certs.FileCA{Dir: o.CertDir}.CABundle
		if _, err := caBundle(); err != nil {
			return nil, err
		}
		return s, nil
	}
	// The cache does not run yet: the Secret is read and written directly.
	direct, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	s.certs = &certs.Manager{Client: direct, Reader: direct, Namespace: namespace, Name: o.Secret, DNSNames: dnsNames, IPs: ips}
	if err := s.certs.Ensure(ctx); err != nil {
		return nil, fmt.Errorf("preparing the webhook's serving certificate: %w", err)
	}
	caBundle = s.certs.CABundle
	s.ServerOptions.TLSOpts = append(s.ServerOptions.TLSOpts, func(t *tls.Config) { t.GetCertificate = s.certs.GetCertificate })
	return s, nil
}

// servesWebhook says whether the manager serves Orderly's webhook for mutation mode
// on an API server that does (mapServed) or does not serve MutatingAdmissionPolicy.
// An auto manager that starts where it is served serves no webhook: should the API
// server stop serving it, the policies report that nothing fills labels in until the
// manager restarts.
func servesWebhook(mode admission.Mode, mapServed bool) bool {
	return mode == admission.Webhook || (mode == admission.Auto && !mapServed)
}

// endpoint is how the API server reaches the webhook, and the names its serving
// certificate must be valid for.
func (o Options) endpoint(namespace string) (*admission.Endpoint, []string, []net.IP) {
	e := &admission.Endpoint{
		URL:            o.URL,
		FailurePolicy:  admissionv1.FailurePolicyType(o.FailurePolicy),
		TimeoutSeconds: o.TimeoutSeconds,
	}
	if o.URL != "" {
		u, _ := url.Parse(o.URL) // Validate checked it
		if ip := net.ParseIP(u.Hostname()); ip != nil {
			return e, nil, []net.IP{ip}
		}
		return e, []string{u.Hostname()}, nil
	}
	e.Service = &admissionv1.ServiceReference{Namespace: namespace, Name: o.Service, Port: ptr.To(int32(443))}
	return e, []string{o.Service + "." + namespace + ".svc", o.Service + "." + namespace + ".svc.cluster.local"}, nil
}

// NewServer is the manager's webhook server (ctrl.Options.WebhookServer). It only
// runs when Register is called for a manager that serves the webhook.
func (s *Server) NewServer() webhook.Server { return webhook.NewServer(s.ServerOptions) }

// Register serves the webhook on mgr when Prepare decided so: the handlers, a readyz
// check that passes once the server listens, and the renewal of Orderly's
// certificate. Otherwise it does nothing, and mgr runs no webhook server.
func (s *Server) Register(ctx context.Context, mgr ctrl.Manager) error {
	if !s.serve {
		return nil
	}
	if s.Admission.Webhook != nil {
		if err := labelpolicywebhook.Register(ctx, mgr, s.namespace); err != nil {
			return err
		}
	}
	if s.conversion != nil {
		if err := registerConversion(mgr, s.conversion); err != nil {
			return err
		}
	}
	if s.images && s.Admission.Webhook != nil {
		if err := imagepolicywebhook.Register(ctx, mgr, s.namespace); err != nil {
			return err
		}
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return err
	}
	if s.certs != nil {
		return mgr.Add(s.certs)
	}
	return nil
}

// registerConversion serves the conversion webhook on mgr and adds the leader's
// writer of the CRDs' spec.conversion. The writer reads and patches CRDs directly,
// with a client of its own: the manager's cache holds no CRDs.
func registerConversion(mgr ctrl.Manager, c *conversionEndpoint) error {
	mgr.GetWebhookServer().Register(conversion.Path, conversion.Handler(mgr.GetScheme()))
	return addConversionWriter(mgr, &conversion.Writer{Endpoint: c.endpoint, CABundle: c.caBundle})
}

// RegisterNoConversion is for a manager that serves no conversion webhook: its
// leader sets the CRDs' conversion strategy None (conversion.Writer without an
// Endpoint).
func RegisterNoConversion(mgr ctrl.Manager) error {
	return addConversionWriter(mgr, &conversion.Writer{})
}

// addConversionWriter adds w, with a client of its own that reads and patches CRDs
// directly (the manager's cache holds no CRDs).
func addConversionWriter(mgr ctrl.Manager, w *conversion.Writer) error {
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return err
	}
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: s})
	if err != nil {
		return err
	}
	w.Client = direct
	return mgr.Add(w)
}
