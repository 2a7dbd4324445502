package main

import (
	"github.com/spf13/pflag"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"orderly.dev/orderly/internal/admission"
	orderlywebhook "orderly.dev/orderly/internal/webhook"
)

// webhookOptions are the flags of Orderly's own admission webhook, the fallback that
// fills LabelPolicy labels in where the API server does not serve
// MutatingAdmissionPolicy. internal/webhook decides what to do with them.
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

// options are the flags as internal/webhook takes them.
func (o *webhookOptions) options() orderlywebhook.Options {
	return orderlywebhook.Options{
		Mutation:       o.mutation,
		Host:           o.host,
		Port:           o.port,
		URL:            o.url,
		Service:        o.service,
		Secret:         o.secret,
		CertDir:        o.certDir,
		FailurePolicy:  o.failurePolicy,
		TimeoutSeconds: o.timeoutSeconds,
	}
}
