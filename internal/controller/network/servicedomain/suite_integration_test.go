//go:build integration

package servicedomain

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

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
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/testing/testdns"
	"orderly.dev/orderly/internal/testing/testenv"
)

// The suite runs the controller against a real API server and etcd (envtest) with
// the Gateway API CRDs installed (cert-manager's and external-dns's are installed by
// the tests that need them, to see the controller go on without a restart), and a
// real BIND serving the test zones, which takes updates signed with its TSIG key.
var (
	k   client.Client
	env *testenv.Env
	dns *testdns.Server
	seq atomic.Int32
	// stopManager stops the suite's manager; restartManager starts a new one.
	stopManager func()
)

func restartManager() error {
	stopManager()
	stop, err := env.StartManager(kit.Deps{Namespace: managerNamespace}, []kit.Controller{Controller})
	if err != nil {
		return err
	}
	stopManager = stop
	return nil
}

const (
	timeout          = 60 * time.Second
	poll             = 100 * time.Millisecond
	managerNamespace = "orderly-test-system"
	tsigSecret       = "tsig"
	gatewayNamespace = "gateways"
	gatewayName      = "shared"
)

// The zones of the suite, one per concern, each a zone of its own in BIND.
const (
	zoneFixed  = "fixed.example.test" // records point at a fixed address
	zoneRoute  = "route.example.test" // records point at the Gateway's address
	zoneTLS    = "tls.example.test"   // certificates from a ClusterIssuer
	zoneTeam   = "team.example.test"  // only namespaces labelled team=blue
	zoneEDNS   = "edns.example.test"  // DNSEndpoints for external-dns
	zoneBadKey = "key.example.test"   // a TSIG Secret with a wrong key
	fixedAddr  = "192.0.2.10"
	lateGW     = "late"
	wrongKey   = "d3JvbmctYnV0LXdlbGwtZm9ybWVkLWtleS0wMTIzNDU2Nzg5"
	issuerName = "test-ca"
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) (func(), error) {
		env, k = e, e.Client
		dir, err := devcluster.GatewayAPICRDDir(context.Background())
		if err != nil {
			return nil, err
		}
		if _, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{Paths: []string{dir}}); err != nil {
			return nil, fmt.Errorf("installing the Gateway API CRDs: %w", err)
		}
		if dns, err = testdns.Start(zoneFixed, zoneRoute, zoneTLS, zoneTeam, zoneEDNS, zoneBadKey); err != nil {
			return nil, err
		}
		if err := setupCluster(context.Background()); err != nil {
			dns.Close()
			return nil, err
		}
		stop, err := e.StartManager(kit.Deps{Namespace: managerNamespace}, []kit.Controller{Controller})
		stopManager = stop
		return func() {
			if stopManager != nil {
				stopManager()
			}
			dns.Close()
		}, err
	})
}

// setupCluster creates the manager's namespace with the TSIG Secret, the shared
// Gateway, and the suite's DomainZones.
func setupCluster(ctx context.Context) error {
	for _, ns := range []string{managerNamespace, gatewayNamespace} {
		if err := k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	if err := k.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: tsigSecret},
		StringData: map[string]string{"name": testdns.KeyName, "algorithm": testdns.KeyAlgorithm, "secret": dns.KeySecret},
	}); err != nil {
		return err
	}
	if err := k.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: "bad-tsig"},
		StringData: map[string]string{"name": testdns.KeyName, "secret": wrongKey},
	}); err != nil {
		return err
	}
	if err := k.Create(ctx, gateway(gatewayName)); err != nil {
		return err
	}
	rfc := func(resync string) networkv1alpha1.DNS {
		d, _ := time.ParseDuration(resync)
		return networkv1alpha1.DNS{
			Provider:       networkv1alpha1.ProviderRFC2136,
			RFC2136:        &networkv1alpha1.RFC2136{Server: dns.Addr, TSIGSecretRef: networkv1alpha1.LocalSecretRef{Name: tsigSecret}, TTL: 60},
			ResyncInterval: metav1.Duration{Duration: d},
		}
	}
	gw := networkv1alpha1.ZoneRoute{Gateway: &networkv1alpha1.GatewayRef{Name: gatewayName, Namespace: gatewayNamespace}, IngressClassName: "nginx"}
	fixed := networkv1alpha1.Target{From: networkv1alpha1.TargetFromFixed, Addresses: []string{fixedAddr}}
	// The route and tls zones resync every 10 minutes, longer than any wait here:
	// their ServiceDomains move on when a Gateway gets an address or cert-manager
	// reports a Certificate issued only because those are watched.
	zones := []networkv1alpha1.DomainZone{
		{ObjectMeta: metav1.ObjectMeta{Name: "fixed"}, Spec: networkv1alpha1.DomainZoneSpec{Zone: zoneFixed, DNS: rfc("1s"), Route: gw, Target: fixed}},
		{ObjectMeta: metav1.ObjectMeta{Name: "route"}, Spec: networkv1alpha1.DomainZoneSpec{Zone: zoneRoute, DNS: rfc("10m"),
			Route:  networkv1alpha1.ZoneRoute{Gateway: &networkv1alpha1.GatewayRef{Name: lateGW, Namespace: gatewayNamespace, SectionName: "http"}},
			Target: networkv1alpha1.Target{From: networkv1alpha1.TargetFromRoute}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "tls"}, Spec: networkv1alpha1.DomainZoneSpec{Zone: zoneTLS, DNS: rfc("10m"), Route: gw, Target: fixed,
			Certificates: &networkv1alpha1.Certificates{IssuerRef: &networkv1alpha1.IssuerRef{Kind: "ClusterIssuer", Name: issuerName}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Spec: networkv1alpha1.DomainZoneSpec{Zone: zoneTeam, DNS: rfc("2s"), Route: gw, Target: fixed,
			AllowedNamespaces: metav1.LabelSelector{MatchLabels: map[string]string{"team": "blue"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "badkey"}, Spec: networkv1alpha1.DomainZoneSpec{Zone: zoneBadKey, Route: gw, Target: fixed,
			DNS: networkv1alpha1.DNS{Provider: networkv1alpha1.ProviderRFC2136, ResyncInterval: metav1.Duration{Duration: 2 * time.Second},
				RFC2136: &networkv1alpha1.RFC2136{Server: dns.Addr, TSIGSecretRef: networkv1alpha1.LocalSecretRef{Name: "bad-tsig"}, TTL: 60}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "edns"}, Spec: networkv1alpha1.DomainZoneSpec{Zone: zoneEDNS, Route: gw, Target: fixed,
			DNS: networkv1alpha1.DNS{Provider: networkv1alpha1.ProviderExternalDNS, ResyncInterval: metav1.Duration{Duration: 2 * time.Second}}}},
	}
	for i := range zones {
		if err := k.Create(ctx, &zones[i]); err != nil {
			return fmt.Errorf("creating DomainZone %s: %w", zones[i].Name, err)
		}
	}
	return nil
}

// gateway is a Gateway in the gateways namespace with one HTTP listener.
func gateway(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"namespace": gatewayNamespace, "name": name},
		"spec": map[string]any{
			"gatewayClassName": "test",
			"listeners":        []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}},
		},
	}}
	return u
}

// moduleDir downloads a Go module (outside any module, so that no go.mod changes)
// and returns its directory.
func moduleDir(ctx context.Context, module string) (string, error) {
	tmp, err := os.MkdirTemp("", "orderly-module-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	var dl struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &dl); jerr == nil && dl.Error != "" {
		return "", fmt.Errorf("downloading %s: %s", module, dl.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	if dl.Dir == "" {
		return "", fmt.Errorf("go mod download %s returned no directory", module)
	}
	return dl.Dir, nil
}

// installCRDs installs the CRD files paths of module (relative to its root).
func installCRDs(t *testing.T, module string, paths ...string) {
	t.Helper()
	dir, err := moduleDir(context.Background(), module)
	if err != nil {
		t.Fatal(err)
	}
	var full []string
	for _, p := range paths {
		full = append(full, filepath.Join(dir, p))
	}
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: full, ErrorIfPathMissing: true}); err != nil {
		t.Fatalf("installing CRDs of %s: %v", module, err)
	}
}

func eventually(t *testing.T, f func(g Gomega)) {
	t.Helper()
	NewWithT(t).Eventually(f, timeout, poll).Should(Succeed())
}

// consistently checks that f holds for a while: what must not change does not.
func consistently(t *testing.T, d time.Duration, f func(g Gomega)) {
	t.Helper()
	NewWithT(t).Consistently(f, d, poll).Should(Succeed())
}

// newNamespace creates a namespace of the test's own, with labels.
func newNamespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	name := fmt.Sprintf("sd-%d", seq.Add(1))
	NewWithT(t).Expect(k.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})).To(Succeed())
	return name
}

// newService creates a Service named web in ns.
func newService(t *testing.T, ns string) {
	t.Helper()
	NewWithT(t).Expect(k.Create(context.Background(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}},
	})).To(Succeed())
}

// newDomain creates a ServiceDomain for host in ns, routing to Service web:8080.
func newDomain(t *testing.T, ns, name, host string, modify ...func(*networkv1alpha1.ServiceDomain)) *networkv1alpha1.ServiceDomain {
	t.Helper()
	sd := &networkv1alpha1.ServiceDomain{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkv1alpha1.ServiceDomainSpec{
			Hostname: host, Service: networkv1alpha1.ServiceRef{Name: "web", Port: 8080},
			Route: networkv1alpha1.RouteGateway, TLS: networkv1alpha1.TLSNone,
		},
	}
	for _, m := range modify {
		m(sd)
	}
	NewWithT(t).Expect(k.Create(context.Background(), sd)).To(Succeed())
	return sd
}

// condition is sd's condition t as the API server holds it.
func condition(g Gomega, sd *networkv1alpha1.ServiceDomain, t string) metav1.Condition {
	var got networkv1alpha1.ServiceDomain
	g.Expect(k.Get(context.Background(), client.ObjectKeyFromObject(sd), &got)).To(Succeed())
	c := meta.FindStatusCondition(got.Status.Conditions, t)
	g.Expect(c).NotTo(BeNil(), "no condition %s; status: %+v", t, got.Status)
	g.Expect(c.ObservedGeneration).To(Equal(got.Generation))
	return *c
}

func expectCondition(t *testing.T, sd *networkv1alpha1.ServiceDomain, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	eventually(t, func(g Gomega) {
		c := condition(g, sd, typ)
		g.Expect(c.Status).To(Equal(status), "%s: %s", c.Reason, c.Message)
		g.Expect(c.Reason).To(Equal(reason), c.Message)
	})
}

// query is what BIND answers for name and type.
func query(g Gomega, name string, t uint16) []string {
	got, err := dns.Query(name, t)
	g.Expect(err).NotTo(HaveOccurred())
	return got
}

func deleteAndWait(t *testing.T, obj client.Object) {
	t.Helper()
	NewWithT(t).Expect(k.Delete(context.Background(), obj)).To(Succeed())
	eventually(t, func(g Gomega) {
		err := k.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "still there: %v", err)
	})
}
