//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/controller/network/servicedomain"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/dnsupdate"
	"orderly.dev/orderly/internal/labels"
	"orderly.dev/orderly/internal/testing/testdns"
)

// BenchmarkServiceDomains: 500 ServiceDomains created at once, each with an A record
// (the Gateway's address) written by RFC 2136 to a real BIND and an HTTPRoute, until
// all are Ready. The baseline does the minimum by hand with as many writers as the
// controller has workers: the claim, the HTTPRoute, the four DNS reads and the one
// signed update per hostname, straight to the API server and BIND. Also: DNS updates
// per domain and the manager's peak memory. (No certificates: cert-manager's issuing
// would be measured, not Orderly.)
func BenchmarkServiceDomains(b *testing.B) {
	ctx := context.Background()
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	n := envInt("BENCH_SERVICEDOMAINS", 500)
	const perNamespace = 10
	const zone = "bench.example.test"
	const address = "192.0.2.80"
	kubeconfig := benchCluster(ctx, b, "orderly-bench-servicedomain", 1)
	cfg, c := adminClient(b, kubeconfig)
	saKubeconfig := managerKubeconfig(ctx, b, kubeconfig)
	writers := workersOf(servicedomain.Controller)
	dir, err := devcluster.GatewayAPICRDDir(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{dir}}); err != nil {
		b.Fatal(err)
	}
	srv, err := testdns.Start(zone)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	key := dnsupdate.Key{Name: testdns.KeyName, Algorithm: testdns.KeyAlgorithm, Secret: srv.KeySecret}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: "bench-tsig"},
		StringData: map[string]string{"name": key.Name, "algorithm": key.Algorithm, "secret": key.Secret}}); err != nil {
		b.Fatal(err)
	}
	ns := func(i int) string { return fmt.Sprintf("sd-%03d", i/perNamespace) }
	name := func(i int) string { return fmt.Sprintf("d%04d", i) }
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gateways"}}); err != nil {
		b.Fatal(err)
	}
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"namespace": "gateways", "name": "internal"},
		"spec":     map[string]any{"gatewayClassName": "bench", "listeners": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}}},
	}}
	if err := c.Create(ctx, gw); err != nil {
		b.Fatal(err)
	}
	_ = unstructured.SetNestedSlice(gw.Object, []any{map[string]any{"type": "IPAddress", "value": address}}, "status", "addresses")
	if err := c.Status().Update(ctx, gw); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i += perNamespace {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns(i)}}); err != nil {
			b.Fatal(err)
		}
		if err := c.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns(i), Name: "web"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}}); err != nil {
			b.Fatal(err)
		}
	}

	// Baseline: the minimum by hand, for hostnames of their own.
	dnsc := &dnsupdate.Client{Server: srv.Addr, Key: key}
	start := time.Now()
	if err := parallel(n, writers, func(i int) error {
		host := "base-" + name(i) + "." + zone
		if err := c.Create(ctx, &networkv1alpha1.HostnameClaim{ObjectMeta: metav1.ObjectMeta{Name: host},
			Spec: networkv1alpha1.HostnameClaimSpec{Hostname: host, Holder: networkv1alpha1.ClaimHolder{Namespace: ns(i), Name: "base-" + name(i), UID: "baseline"}}}); err != nil {
			return err
		}
		route := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
			"metadata": map[string]any{"namespace": ns(i), "name": "base-" + name(i), "labels": map[string]any{labels.ManagedBy: "bench"}},
			"spec": map[string]any{
				"parentRefs": []any{map[string]any{"name": "internal", "namespace": "gateways"}},
				"hostnames":  []any{host},
				"rules":      []any{map[string]any{"backendRefs": []any{map[string]any{"name": "web", "port": int64(8080)}}}},
			},
		}}
		if err := c.Create(ctx, route); err != nil {
			return err
		}
		d := dnsupdate.Desired{Zone: zone, Host: host, Owner: dnsupdate.OwnerValue(ns(i), "base-"+name(i)), Values: []string{address}, TTL: 60}
		if _, err := dnsc.Observe(ctx, host, dnsupdate.OwnerName(host)); err != nil {
			return err
		}
		m, err := dnsupdate.UpdateFor(dnsupdate.Create, d)
		if err != nil {
			return err
		}
		return dnsc.Update(ctx, m)
	}); err != nil {
		b.Fatal(err)
	}
	baseline := time.Since(start)

	if err := c.Create(ctx, &networkv1alpha1.DomainZone{
		ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec: networkv1alpha1.DomainZoneSpec{
			Zone: zone,
			DNS: networkv1alpha1.DNS{Provider: networkv1alpha1.ProviderRFC2136, ResyncInterval: metav1.Duration{Duration: 5 * time.Minute},
				RFC2136: &networkv1alpha1.RFC2136{Server: srv.Addr, TSIGSecretRef: networkv1alpha1.LocalSecretRef{Name: "bench-tsig"}, TTL: 60}},
			Route:  networkv1alpha1.ZoneRoute{Gateway: &networkv1alpha1.GatewayRef{Name: "internal", Namespace: "gateways"}},
			Target: networkv1alpha1.Target{From: networkv1alpha1.TargetFromRoute},
		},
	}); err != nil {
		b.Fatal(err)
	}
	mgr := startManager(b, saKubeconfig)
	start = time.Now()
	if err := parallel(n, writers, func(i int) error {
		return c.Create(ctx, &networkv1alpha1.ServiceDomain{ObjectMeta: metav1.ObjectMeta{Namespace: ns(i), Name: name(i)},
			Spec: networkv1alpha1.ServiceDomainSpec{Hostname: name(i) + "." + zone, Service: networkv1alpha1.ServiceRef{Name: "web", Port: 8080}, TLS: networkv1alpha1.TLSNone}})
	}); err != nil {
		b.Fatal(err)
	}
	for {
		var list networkv1alpha1.ServiceDomainList
		if err := c.List(ctx, &list); err != nil {
			b.Fatal(err)
		}
		ready := 0
		for i := range list.Items {
			if meta.IsStatusConditionTrue(list.Items[i].Status.Conditions, networkv1alpha1.ConditionReady) {
				ready++
			}
		}
		if ready == n {
			break
		}
		if time.Since(start) > 15*time.Minute {
			b.Fatalf("only %d of %d ServiceDomains Ready after 15 minutes; manager log: %s", ready, n, mgr.logPath)
		}
		time.Sleep(250 * time.Millisecond)
	}
	elapsed := time.Since(start)
	// Spot check: the records are in BIND.
	for _, i := range []int{0, n / 2, n - 1} {
		if got, err := srv.Query(name(i)+"."+zone, 1); err != nil || len(got) != 1 || got[0] != address {
			b.Fatalf("A %s.%s = %v, %v", name(i), zone, got, err)
		}
	}
	updates := scrapeCounter(mgr.metricsURL, "orderly_servicedomain_dns_updates_total{")
	created := scrapeCounter(mgr.metricsURL, "orderly_servicedomain_dns_updates_total{", `result="created"`)
	writes := 0.0
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		writes += scrapeCounter(mgr.metricsURL, `rest_client_requests_total{`, `method="`+m+`"`)
	}
	peak := peakRSS(mgr.pid)
	cpu := cpuSeconds(mgr.pid)
	reconciles := scrapeCounter(mgr.metricsURL, `controller_runtime_reconcile_total{controller="servicedomain"`)
	reads := scrapeCounter(mgr.metricsURL, `rest_client_requests_total{`, `method="GET"`)

	fmt.Printf("\nServiceDomain benchmark: %d ServiceDomains created at once (RFC 2136 to BIND, HTTPRoute on a Gateway, no certificates); Orderly at its default flags (%d workers), as its ServiceAccount\n", n, writers)
	fmt.Printf("  baseline: claim + HTTPRoute + DNS read and update    %8.2fs  (%d writers, straight to the API server and BIND)\n", baseline.Seconds(), writers)
	fmt.Printf("  orderly:  create until every ServiceDomain Ready     %8.2fs\n", elapsed.Seconds())
	fmt.Printf("  ratio orderly/baseline                               %8.2fx\n", elapsed.Seconds()/baseline.Seconds())
	fmt.Printf("  DNS updates per domain                               %8.2f  (created %.2f; minimum 1)\n", updates/float64(n), created/float64(n))
	fmt.Printf("  manager API writes per domain                        %8.2f  (claim, finalizer, route, status, Events)\n", writes/float64(n))
	fmt.Printf("  manager API reads per domain                         %8.2f  (GETs straight to the API server)\n", reads/float64(n))
	fmt.Printf("  reconciles per domain                                %8.2f\n", reconciles/float64(n))
	fmt.Printf("  manager CPU time                                     %8.2fs\n", cpu)
	fmt.Printf("  manager peak memory (VmHWM)                          %8.1f MiB\n", float64(peak)/(1<<20))
	b.ReportMetric(elapsed.Seconds()/baseline.Seconds(), "ratio")
	b.ReportMetric(updates/float64(n), "dns-updates/domain")
	b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
}
