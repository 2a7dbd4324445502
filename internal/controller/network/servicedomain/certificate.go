package servicedomain

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
)

// wantsCertificate is true when sd gets a certificate: it asks for one, and its zone
// names an issuer.
func wantsCertificate(sd *networkv1alpha1.ServiceDomain, zone *networkv1alpha1.DomainZone) bool {
	return sd.Spec.TLS != networkv1alpha1.TLSNone && zone.Spec.Certificates != nil && zone.Spec.Certificates.IssuerRef != nil
}

// secretName is the Secret cert-manager writes sd's key pair to.
func secretName(sd *networkv1alpha1.ServiceDomain) string { return sd.Name + "-tls" }

// reconcileCertificate writes sd's cert-manager Certificate and reads its readiness
// and expiry.
func (r *Reconciler) reconcileCertificate(ctx context.Context, sd *networkv1alpha1.ServiceDomain, zone *networkv1alpha1.DomainZone, obs *observation) error {
	if !wantsCertificate(sd, zone) {
		if sd.Spec.TLS == networkv1alpha1.TLSNone {
			obs.cert.ok("NotRequested", "no certificate: tls is None")
		} else {
			obs.cert.ok("ZoneIssuesNone", fmt.Sprintf("no certificate: DomainZone %s names no issuer", zone.Name))
		}
		return nil
	}
	gvk, existing, ok, err := r.ownChild(ctx, sd, certificateKind, &obs.cert, "CertManagerMissing",
		"cert-manager is not installed (no cert-manager.io/v1 Certificate kind); install cert-manager and this ServiceDomain goes on by itself")
	if !ok {
		return err
	}
	obs.certName, obs.certSecret = sd.Name, secretName(sd)
	issuer := zone.Spec.Certificates.IssuerRef
	kind := issuer.Kind
	if kind == "" {
		kind = "ClusterIssuer"
	}
	labels := map[string]any{}
	for k, v := range childLabels(sd) {
		labels[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"secretName": secretName(sd),
			"dnsNames":   []any{sd.Spec.Hostname},
			"issuerRef":  map[string]any{"group": "cert-manager.io", "kind": kind, "name": issuer.Name},
			// The Secret carries the ServiceDomain's labels, so that it can be told apart.
			"secretTemplate": map[string]any{"labels": labels},
		},
	}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(sd.Namespace)
	u.SetName(sd.Name)
	u.SetLabels(childLabels(sd))
	u.SetOwnerReferences([]metav1.OwnerReference{ownerRef(sd)})
	if err := r.apply(ctx, u); err != nil {
		obs.cert.fail("CertificateWriteFailed", err.Error())
		return err
	}
	watched := r.watch.isWatching(certificateKind)
	if existing == nil {
		obs.cert.wait("Issuing", fmt.Sprintf("Certificate %s is written; waiting for cert-manager to issue it from %s %s", sd.Name, kind, issuer.Name), watched)
		return nil
	}
	if s, _, _ := unstructured.NestedString(existing.Object, "status", "notAfter"); s != "" {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			mt := metav1.NewTime(t)
			obs.certNotAfter = &mt
		}
	}
	status, reason, message := readyCondition(existing)
	switch status {
	case "True":
		msg := fmt.Sprintf("Certificate %s is issued by %s %s", sd.Name, kind, issuer.Name)
		if obs.certNotAfter != nil {
			msg += ", valid until " + obs.certNotAfter.UTC().Format(time.RFC3339)
		}
		obs.cert.ok("Issued", msg)
	case "":
		obs.cert.wait("Issuing", fmt.Sprintf("Certificate %s is written; waiting for cert-manager to issue it from %s %s (no Ready condition yet: is cert-manager running?)", sd.Name, kind, issuer.Name), watched)
	default:
		obs.cert.wait("CertificateNotReady", fmt.Sprintf("cert-manager reports Certificate %s not ready (%s): %s", sd.Name, reason, message), watched)
	}
	return nil
}

// readyCondition is the Ready condition of a cert-manager object.
func readyCondition(u *unstructured.Unstructured) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
			return status, reason, message
		}
	}
	return "", "", ""
}
