//go:build e2e

package e2e

// The ServiceDomain end to end: the orderly binary (as its ServiceAccount) against the
// full local cluster, a real BIND taking TSIG-signed updates, and cert-manager's real
// controller (internal/standin/certmanager: built from the Go module proxy and
// cached) issuing from a CA
// ClusterIssuer. No data plane runs on kwok nodes, so the Gateway's address is written
// by the test, as a Gateway controller would.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"path/filepath"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/dnsupdate"
	"orderly.dev/orderly/internal/standin/certmanager"
	"orderly.dev/orderly/internal/testing/testdns"
)

const certManagerNamespace = "orderly-e2e-cert-manager"

var certManagerControllerOnce sync.Once

// runCertManagerController installs cert-manager's CRDs and runs its controller (the
// stand-in of internal/standin/certmanager, as `orderly dev up` runs it) against the
// run's cluster until the run ends.
func runCertManagerController(t *testing.T) {
	t.Helper()
	var err error
	certManagerControllerOnce.Do(func() { err = startCertManager(context.Background()) })
	if err != nil {
		t.Fatalf("installing cert-manager: %v", err)
	}
}

func startCertManager(ctx context.Context) error {
	crds, err := certmanager.CRDDir(ctx)
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(adminCfg, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true,
		// envtest waits 10 s for discovery by default; a loaded machine, with other CRDs
		// changing at the same moment, has taken longer.
		MaxTime: 2 * time.Minute}); err != nil {
		return fmt.Errorf("installing cert-manager's CRDs: %w", err)
	}
	if err := k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: certManagerNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	_, err = certmanager.Run(ctx, certmanager.Options{
		Kubeconfig: devcluster.KubeconfigPath(clusterName),
		Namespace:  certManagerNamespace,
		Dir:        filepath.Join(runDir, "cert-manager"),
	})
	return err
}

// caIssuer creates a CA key pair in cert-manager's namespace and a ClusterIssuer that
// signs with it, and returns the CA certificate.
func caIssuer(t *testing.T, name string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "orderly e2e CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	ca, _ := x509.ParseCertificate(der)
	keyDER, err := x509.MarshalECPrivateKey(key)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	NewWithT(t).Expect(k.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: certManagerNamespace, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		},
	})).To(Succeed())
	issuer := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"ca": map[string]any{"secretName": name}},
	}}
	NewWithT(t).Expect(k.Create(ctx, issuer)).To(Succeed())
	return ca
}

func sdCondition(g Gomega, ns, name, typ string) metav1.Condition {
	var sd networkv1alpha1.ServiceDomain
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &sd)).To(Succeed())
	c := meta.FindStatusCondition(sd.Status.Conditions, typ)
	g.Expect(c).NotTo(BeNil(), "no %s condition: %+v", typ, sd.Status)
	return *c
}

// TestServiceDomainEndToEnd: a ServiceDomain in a team's namespace gets its A record
// (the Gateway's address, resolvable with a real DNS query) with the ownership TXT,
// its HTTPRoute, and a certificate that cert-manager issues for the hostname from
// the CA; a second ServiceDomain for the hostname is refused; deleting the first
// removes record, route and Certificate.
func TestServiceDomainEndToEnd(t *testing.T) {
	ctx := context.Background()
	installGatewayAPI(t)
	runCertManagerController(t)
	const zone = "svc.e2e.test"
	dns, err := testdns.Start(zone)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(dns.Close)

	NewWithT(t).Expect(k.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: "e2e-tsig"},
		StringData: map[string]string{"name": testdns.KeyName, "algorithm": testdns.KeyAlgorithm, "secret": dns.KeySecret},
	})).To(Succeed())
	ca := caIssuer(t, "e2e-ca")
	for _, ns := range []string{"sd-gateways", "sd-shop", "sd-other"} {
		NewWithT(t).Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"e2e-domains": "yes"}}})).To(Succeed())
	}
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"namespace": "sd-gateways", "name": "internal"},
		"spec": map[string]any{"gatewayClassName": "e2e", "listeners": []any{
			map[string]any{"name": "https", "port": int64(443), "protocol": "HTTPS", "hostname": "*." + zone,
				"tls":           map[string]any{"certificateRefs": []any{map[string]any{"name": "wildcard"}}},
				"allowedRoutes": map[string]any{"namespaces": map[string]any{"from": "All"}}},
		}},
	}}
	NewWithT(t).Expect(k.Create(ctx, gw)).To(Succeed())
	NewWithT(t).Expect(unstructured.SetNestedSlice(gw.Object, []any{map[string]any{"type": "IPAddress", "value": "192.0.2.44"}}, "status", "addresses")).To(Succeed())
	NewWithT(t).Expect(k.Status().Update(ctx, gw)).To(Succeed())

	NewWithT(t).Expect(k.Create(ctx, &networkv1alpha1.DomainZone{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e"},
		Spec: networkv1alpha1.DomainZoneSpec{
			Zone:              zone,
			AllowedNamespaces: metav1.LabelSelector{MatchLabels: map[string]string{"e2e-domains": "yes"}},
			DNS: networkv1alpha1.DNS{Provider: networkv1alpha1.ProviderRFC2136, ResyncInterval: metav1.Duration{Duration: 5 * time.Second},
				RFC2136: &networkv1alpha1.RFC2136{Server: dns.Addr, TSIGSecretRef: networkv1alpha1.LocalSecretRef{Name: "e2e-tsig"}, TTL: 60}},
			Certificates: &networkv1alpha1.Certificates{IssuerRef: &networkv1alpha1.IssuerRef{Kind: "ClusterIssuer", Name: "e2e-ca"}},
			Route:        networkv1alpha1.ZoneRoute{Gateway: &networkv1alpha1.GatewayRef{Name: "internal", Namespace: "sd-gateways", SectionName: "https"}},
			Target:       networkv1alpha1.Target{From: networkv1alpha1.TargetFromRoute},
		},
	})).To(Succeed())
	t.Cleanup(func() {
		_ = k.Delete(context.Background(), &networkv1alpha1.DomainZone{ObjectMeta: metav1.ObjectMeta{Name: "e2e"}})
	})
	NewWithT(t).Expect(k.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "sd-shop", Name: "storefront"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}},
	})).To(Succeed())

	host := "shop." + zone
	sd := &networkv1alpha1.ServiceDomain{
		ObjectMeta: metav1.ObjectMeta{Namespace: "sd-shop", Name: "shop"},
		Spec: networkv1alpha1.ServiceDomainSpec{Hostname: host, Service: networkv1alpha1.ServiceRef{Name: "storefront", Port: 8080},
			Route: networkv1alpha1.RouteGateway, TLS: networkv1alpha1.TLSZone},
	}
	NewWithT(t).Expect(k.Create(ctx, sd)).To(Succeed())
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		c := sdCondition(g, "sd-shop", "shop", networkv1alpha1.ConditionReady)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s", c.Reason, c.Message)
	}, 3*time.Minute, time.Second).Should(Succeed())

	// The record, resolvable with a real query, and its owner.
	g.Expect(dns.Query(host, mdns.TypeA)).To(ConsistOf("192.0.2.44"))
	g.Expect(dns.Query(dnsupdate.OwnerName(host), mdns.TypeTXT)).To(ConsistOf(dnsupdate.OwnerValue("sd-shop", "shop")))

	// The route on the Gateway's listener.
	route := &unstructured.Unstructured{}
	route.SetAPIVersion("gateway.networking.k8s.io/v1")
	route.SetKind("HTTPRoute")
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "sd-shop", Name: "shop"}, route)).To(Succeed())
	hosts, _, _ := unstructured.NestedStringSlice(route.Object, "spec", "hostnames")
	g.Expect(hosts).To(ConsistOf(host))

	// The certificate cert-manager issued: the hostname as its only SAN, signed by the CA.
	var got networkv1alpha1.ServiceDomain
	g.Expect(k.Get(ctx, client.ObjectKeyFromObject(sd), &got)).To(Succeed())
	g.Expect(got.Status.Certificate.NotAfter).NotTo(BeNil())
	var secret corev1.Secret
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "sd-shop", Name: "shop-tls"}, &secret)).To(Succeed())
	block, _ := pem.Decode(secret.Data["tls.crt"])
	g.Expect(block).NotTo(BeNil())
	leaf, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(leaf.DNSNames).To(Equal([]string{host}))
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host})
	g.Expect(err).NotTo(HaveOccurred(), "the issued certificate does not chain to the CA")
	g.Expect(bytes.Contains(secret.Data["ca.crt"], pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}))).To(BeTrue())
	g.Expect(got.Status.Certificate.NotAfter.Time.Equal(leaf.NotAfter.Truncate(time.Second))).To(BeTrue(), "status notAfter %s, certificate %s", got.Status.Certificate.NotAfter, leaf.NotAfter)

	// A second claimant in another team's namespace: Conflict, nothing written.
	other := &networkv1alpha1.ServiceDomain{
		ObjectMeta: metav1.ObjectMeta{Namespace: "sd-other", Name: "shop"},
		Spec:       networkv1alpha1.ServiceDomainSpec{Hostname: host, Service: networkv1alpha1.ServiceRef{Name: "storefront", Port: 8080}},
	}
	g.Expect(k.Create(ctx, other)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := sdCondition(g, "sd-other", "shop", networkv1alpha1.ConditionReady)
		g.Expect(c.Reason).To(Equal("Conflict"), c.Message)
	}, time.Minute, time.Second).Should(Succeed())
	err = k.Get(ctx, client.ObjectKey{Namespace: "sd-other", Name: "shop"}, route.DeepCopy())
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the loser wrote an HTTPRoute: %v", err)
	g.Expect(k.Delete(ctx, other)).To(Succeed())

	// Deleting the first removes its record, TXT, route and Certificate.
	g.Expect(k.Delete(ctx, sd)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k.Get(ctx, client.ObjectKeyFromObject(sd), &networkv1alpha1.ServiceDomain{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}, time.Minute, time.Second).Should(Succeed())
	g.Expect(dns.Query(host, mdns.TypeA)).To(BeEmpty())
	g.Expect(dns.Query(dnsupdate.OwnerName(host), mdns.TypeTXT)).To(BeEmpty())
	err = k.Get(ctx, client.ObjectKey{Namespace: "sd-shop", Name: "shop"}, route)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the HTTPRoute is left: %v", err)
	cert := &unstructured.Unstructured{}
	cert.SetAPIVersion("cert-manager.io/v1")
	cert.SetKind("Certificate")
	err = k.Get(ctx, client.ObjectKey{Namespace: "sd-shop", Name: "shop"}, cert)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Certificate is left: %v", err)
}
