// Package admission is what Orderly's admission-enforcing controllers share: whether
// the API server serves MutatingAdmissionPolicy, how mutation is done (natively or
// through Orderly's own webhook), and how the API server reaches that webhook.
package admission

import (
	"fmt"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// Mode says how objects are mutated at admission (the manager's
// --labelpolicy-mutation flag).
type Mode string

const (
	// Auto uses MutatingAdmissionPolicy where the API server serves it, else Orderly's
	// webhook when one is configured, else validates only.
	Auto Mode = "auto"
	// Native always uses MutatingAdmissionPolicy.
	Native Mode = "native"
	// Webhook always uses Orderly's webhook, even where MutatingAdmissionPolicy is
	// served (for benchmarks, and for clusters that keep it switched off).
	Webhook Mode = "webhook"
	// Off mutates nothing.
	Off Mode = "off"
)

// ParseMode checks a mode flag's value; empty is Auto.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Auto, Native, Webhook, Off:
		return m, nil
	case "":
		return Auto, nil
	default:
		return "", fmt.Errorf("mutation mode %q is unknown: use auto, native, webhook or off", s)
	}
}

// ServesMutatingAdmissionPolicy asks the API server's discovery whether it serves
// MutatingAdmissionPolicy at admissionregistration.k8s.io/v1.
func ServesMutatingAdmissionPolicy(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	list, err := dc.ServerResourcesForGroupVersion(admissionv1.SchemeGroupVersion.String())
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("discovering admissionregistration.k8s.io/v1: %w", err)
	}
	for _, r := range list.APIResources {
		if r.Name == "mutatingadmissionpolicies" {
			return true, nil
		}
	}
	return false, nil
}

// Endpoint says how the API server reaches Orderly's webhook server and what it does
// when it cannot.
type Endpoint struct {
	// URL is the webhook server's base URL (https://host:port) when the manager runs
	// outside the cluster; empty to go through Service.
	URL string
	// Service is the Service in front of the manager's webhook server; its Path is
	// ignored (each object has its own).
	Service *admissionv1.ServiceReference
	// CABundle is the PEM CA certificate that signed the webhook's serving certificate.
	CABundle []byte
	// FailurePolicy applies when the webhook cannot be reached or errs.
	FailurePolicy admissionv1.FailurePolicyType
	// TimeoutSeconds bounds one call; at most 30.
	TimeoutSeconds int32
}

// Config is what the manager tells admission-enforcing controllers.
type Config struct {
	// Mode is how mutation is done; Auto when empty.
	Mode Mode
	// MAPServed is whether the API server served MutatingAdmissionPolicy when the
	// manager started.
	MAPServed bool
	// Webhook is Orderly's webhook server, nil when the manager serves none.
	Webhook *Endpoint
	// CABundle returns the CA certificate of the webhook's serving certificate, read at
	// every reconcile so that a renewed CA reaches the configurations. Set with Webhook.
	CABundle func() ([]byte, error)
}
