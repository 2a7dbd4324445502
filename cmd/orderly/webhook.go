package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"

	"github.com/spf13/pflag"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/controller/policy/labelpolicy"
	"orderly.dev/orderly/internal/webhook/certs"
	labelpolicywebhook "orderly.dev/orderly/internal/webhook/labelpolicy"
)

// webhookOptions configure Orderly's own admission webhook, the fallback that fills
// LabelPolicy labels in where the API server does not serve MutatingAdmissionPolicy.
type webhookOptions struct {
	mutation       string
	host           string
	port           int
	url            string
	service        string
	secret         string
	certDir        string
	failurePolicy  string
	timeoutSeconds int32
}

func addWebhookFlags(f *pflag.FlagSet, o *webhookOptions) {
	f.StringVar(&o.mutation, "labelpolicy-mutation", string(admission.Auto),
		"how LabelPolicy labels are filled in: auto (MutatingAdmissionPolicy where served, else Orderly's webhook), native, webhook or off")
	f.StringVar(&o.host, "webhook-host", "", "address the webhook server listens on (default: all)")
	f.IntVar(&o.port, "webhook-port", webhook.DefaultPort, "port of the webhook server")
	f.StringVar(&o.url, "webhook-url", "", "base URL the API server calls the webhook at, e.g. https://127.0.0.1:9443, when the manager runs outside the cluster (default: through --webhook-service)")
	f.StringVar(&o.service, "webhook-service", "orderly-webhook", "Service in the manager's namespace in front of the webhook server (port 443)")
	f.StringVar(&o.secret, "webhook-secret", "orderly-webhook-tls", "Secret in the manager's namespace where Orderly keeps the webhook's CA and serving certificate (unless --webhook-cert-dir is set)")
	f.StringVar(&o.certDir, "webhook-cert-dir", "", "directory with ca.crt, tls.crt and tls.key issued by someone else, e.g. a mounted cert-manager Certificate Secret; Orderly then manages no certificate")
	f.StringVar(&o.failurePolicy, "webhook-failure-policy", string(admissionv1.Ignore),
		"what the API server does when the webhook cannot be reached: Ignore (admit unmutated; the validating policy still rejects a missing label) or Fail (reject every matched request)")
	f.Int32Var(&o.timeoutSeconds, "webhook-timeout-seconds", 5, "how long the API server waits for the webhook (1-30)")
}

// labelPolicyWebhook is what the LabelPolicy controller needs to use the webhook.
type labelPolicyWebhook struct {
	endpoint *admission.Endpoint
	caBundle func() ([]byte, error)
	// certs is nil when the certificate comes from --webhook-cert-dir.
	certs *certs.Manager
}

// validate checks the webhook flags before anything talks to the cluster.
func (o *webhookOptions) validate() (admission.Mode, error) {
	mode, err := admission.ParseMode(o.mutation)
	if err != nil {
		return "", fmt.Errorf("unknown LabelPolicy mutation mode %q in --labelpolicy-mutation: use auto, native, webhook or off", o.mutation)
	}
	switch admissionv1.FailurePolicyType(o.failurePolicy) {
	case admissionv1.Ignore, admissionv1.Fail:
	default:
		return "", fmt.Errorf("unknown --webhook-failure-policy %q: use Ignore or Fail", o.failurePolicy)
	}
	if o.timeoutSeconds < 1 || o.timeoutSeconds > 30 {
		return "", fmt.Errorf("--webhook-timeout-seconds %d: must be between 1 and 30", o.timeoutSeconds)
	}
	if o.url != "" {
		u, err := url.Parse(o.url)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return "", fmt.Errorf("--webhook-url %q: must be an https:// URL with a host", o.url)
		}
	}
	return mode, nil
}

// prepareLabelPolicyWebhook decides whether this manager serves the webhook: with
// --labelpolicy-mutation=webhook, or auto on an API server without
// MutatingAdmissionPolicy. It returns nil when it does not. The certificate is loaded
// (or issued) here, before the server starts, so the first request finds it.
func prepareLabelPolicyWebhook(ctx context.Context, cfg *rest.Config, c client.Client, mode admission.Mode, o *webhookOptions, namespace string) (*labelPolicyWebhook, webhook.Options, error) {
	wo := webhook.Options{Host: o.host, Port: o.port}
	switch mode {
	case admission.Webhook:
	case admission.Auto:
		served, err := admission.ServesMutatingAdmissionPolicy(cfg)
		if err != nil {
			return nil, wo, err
		}
		if served {
			return nil, wo, nil
		}
	default:
		return nil, wo, nil
	}
	e := &admission.Endpoint{
		URL:            o.url,
		FailurePolicy:  admissionv1.FailurePolicyType(o.failurePolicy),
		TimeoutSeconds: o.timeoutSeconds,
	}
	var dnsNames []string
	var ips []net.IP
	if o.url != "" {
		u, _ := url.Parse(o.url)
		if ip := net.ParseIP(u.Hostname()); ip != nil {
			ips = append(ips, ip)
		} else {
			dnsNames = append(dnsNames, u.Hostname())
		}
	} else {
		e.Service = &admissionv1.ServiceReference{Namespace: namespace, Name: o.service, Port: ptr.To(int32(443))}
		dnsNames = []string{o.service + "." + namespace + ".svc", o.service + "." + namespace + ".svc.cluster.local"}
	}
	w := &labelPolicyWebhook{endpoint: e}
	if o.certDir != "" {
		wo.CertDir = o.certDir
		w.caBundle = certs.FileCA{Dir: o.certDir}.CABundle
		if _, err := w.caBundle(); err != nil {
			return nil, wo, err
		}
		return w, wo, nil
	}
	w.certs = &certs.Manager{Client: c, Reader: c, Namespace: namespace, Name: o.secret, DNSNames: dnsNames, IPs: ips}
	if err := w.certs.Ensure(ctx); err != nil {
		return nil, wo, fmt.Errorf("preparing the webhook's serving certificate: %w", err)
	}
	w.caBundle = w.certs.CABundle
	wo.TLSOpts = []func(*tls.Config){func(t *tls.Config) { t.GetCertificate = w.certs.GetCertificate }}
	return w, wo, nil
}

// register serves the LabelPolicy webhook on mgr and keeps its certificate renewed.
func (w *labelPolicyWebhook) register(mgr ctrl.Manager) error {
	mgr.GetWebhookServer().Register(labelpolicy.WebhookPathPrefix, (&labelpolicywebhook.Handler{Reader: mgr.GetClient()}).Webhook())
	if w.certs != nil {
		return mgr.Add(w.certs)
	}
	return nil
}
