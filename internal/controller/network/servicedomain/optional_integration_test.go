//go:build integration

package servicedomain

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
)

// The CRDs of cert-manager and external-dns are installed while the manager runs:
// ServiceDomains report them missing, then go on without a restart. These tests
// install CRDs for the whole suite, and the others do not depend on their absence.

// cert-manager missing → CertManagerMissing; installed → the Certificate is written
// for the hostname with the zone's issuer; its Ready condition and notAfter (set
// here as cert-manager would) become CertificateReady and the expiry.
func TestCertificateWhenCertManagerArrives(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	newService(t, ns)
	host := "secure." + zoneTLS
	sd := newDomain(t, ns, "secure", host, func(sd *networkv1alpha1.ServiceDomain) { sd.Spec.TLS = networkv1alpha1.TLSZone })
	expectCondition(t, sd, networkv1alpha1.ConditionCertificateReady, metav1.ConditionFalse, "CertManagerMissing")
	expectCondition(t, sd, networkv1alpha1.ConditionDNSReady, metav1.ConditionTrue, "Published")

	installCRDs(t, "github.com/cert-manager/cert-manager@v1.21.2", "deploy/crds/cert-manager.io_certificates.yaml")
	cert := &unstructured.Unstructured{}
	cert.SetAPIVersion("cert-manager.io/v1")
	cert.SetKind("Certificate")
	eventually(t, func(g Gomega) {
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "secure"}, cert)).To(Succeed())
	})
	names, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	NewWithT(t).Expect(names).To(ConsistOf(host))
	issuer, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "issuerRef")
	NewWithT(t).Expect(issuer).To(Equal(map[string]string{"group": "cert-manager.io", "kind": "ClusterIssuer", "name": issuerName}))
	secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	NewWithT(t).Expect(secret).To(Equal("secure-tls"))
	NewWithT(t).Expect(metav1.IsControlledBy(cert, sd)).To(BeTrue())
	expectCondition(t, sd, networkv1alpha1.ConditionCertificateReady, metav1.ConditionFalse, "Issuing")

	notAfter := time.Now().Add(90 * 24 * time.Hour).UTC().Truncate(time.Second)
	NewWithT(t).Expect(unstructured.SetNestedField(cert.Object, map[string]any{
		"notAfter":   notAfter.Format(time.RFC3339),
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "message": "issued", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}},
	}, "status")).To(Succeed())
	NewWithT(t).Expect(k.Status().Update(ctx, cert)).To(Succeed())
	expectCondition(t, sd, networkv1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")
	var got networkv1alpha1.ServiceDomain
	NewWithT(t).Expect(k.Get(ctx, client.ObjectKeyFromObject(sd), &got)).To(Succeed())
	NewWithT(t).Expect(got.Status.Certificate.NotAfter).NotTo(BeNil())
	NewWithT(t).Expect(got.Status.Certificate.NotAfter.Time.Equal(notAfter)).To(BeTrue())

	deleteAndWait(t, sd)
	eventually(t, func(g Gomega) {
		err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "secure"}, cert)
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "the Certificate is left")
	})
}

// external-dns missing → ExternalDNSMissing; its CRD installed → a DNSEndpoint with
// the record; Published once external-dns (here: the test) reports it processed.
func TestDNSEndpointWhenExternalDNSArrives(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	newService(t, ns)
	host := "ext." + zoneEDNS
	sd := newDomain(t, ns, "ext", host)
	expectCondition(t, sd, networkv1alpha1.ConditionDNSReady, metav1.ConditionFalse, "ExternalDNSMissing")

	installCRDs(t, "sigs.k8s.io/external-dns@v0.15.1", "charts/external-dns/crds/dnsendpoint.yaml")
	ep := &unstructured.Unstructured{}
	ep.SetAPIVersion("externaldns.k8s.io/v1alpha1")
	ep.SetKind("DNSEndpoint")
	eventually(t, func(g Gomega) {
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ext"}, ep)).To(Succeed())
	})
	eps, _, _ := unstructured.NestedSlice(ep.Object, "spec", "endpoints")
	NewWithT(t).Expect(eps).To(ConsistOf(And(
		HaveKeyWithValue("dnsName", host), HaveKeyWithValue("recordType", "A"),
		HaveKeyWithValue("targets", ConsistOf(fixedAddr)), HaveKeyWithValue("recordTTL", BeNumerically("==", 300)),
	)))
	expectCondition(t, sd, networkv1alpha1.ConditionDNSReady, metav1.ConditionFalse, "WaitingForExternalDNS")
	NewWithT(t).Expect(unstructured.SetNestedField(ep.Object, ep.GetGeneration(), "status", "observedGeneration")).To(Succeed())
	NewWithT(t).Expect(k.Status().Update(ctx, ep)).To(Succeed())
	expectCondition(t, sd, networkv1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")
	deleteAndWait(t, sd)
	eventually(t, func(g Gomega) {
		err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ext"}, ep)
		g.Expect(err).To(HaveOccurred(), "the DNSEndpoint is left")
	})
}
