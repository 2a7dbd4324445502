//go:build bench

package bench

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/config"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/standin/canaryapp"
	"orderly.dev/orderly/internal/testing/testprom"
)

// BenchmarkCanaries analyses BENCH_CANARIES (default 200) Canaries at once, each with
// three 10 s steps judged on the error ratio (canary against primary, two queries per
// analysis) read from a real Prometheus that scrapes canaryapp. It prints the
// analysis lag (how late each step's analysis ran after its scheduled time, p50 and
// p99), the queries Orderly sent to Prometheus per second against the minimum the
// analyses need (the baseline: two queries per Canary per interval), the time to
// deliver every revision against the steps' own time, and the manager's memory.
func BenchmarkCanaries(b *testing.B) {
	ctx := context.Background()
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	n := envInt("BENCH_CANARIES", 200)
	const (
		interval = 10 * time.Second
		steps    = 3
		perStep  = 2 // queries per analysis: the canary's and the primary's
	)
	kubeconfig := canaryBenchCluster(ctx, b, "orderly-bench-canary", 2)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	dir, err := devcluster.GatewayAPICRDDir(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := envtest.InstallCRDs(unlimited(cfg), envtest.CRDInstallOptions{Paths: []string{dir}}); err != nil {
		b.Fatal(err)
	}
	c, err := newBenchClient(cfg)
	if err != nil {
		b.Fatal(err)
	}
	app, err := canaryapp.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(app.Close)
	prom, err := testprom.Start(testprom.Options{Targets: []string{app.Address}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(prom.Close)
	m := startManager(b, managerKubeconfig(ctx, b, kubeconfig))

	ns := "bench-canary"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	name := func(i int) string { return fmt.Sprintf("svc-%03d", i) }
	for i := range n {
		for _, v := range []string{deliveryv1alpha1.VariantPrimary, deliveryv1alpha1.VariantCanary} {
			// Healthy and alike: every analysis passes (no rollback by chance), so every
			// Canary runs all its steps.
			app.Set(ns, name(i), v, canaryapp.Behaviour{RPS: 50, ErrorRatio: 0.001})
		}
	}
	// Each Canary's route carries a hostname its namespace holds, claimed by a
	// ServiceDomain (records to external-dns, which does not run here), before the
	// measurement starts.
	if err := claimCanaryHostnames(ctx, c, ns, n, name); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	if err := parallel(n, 16, func(i int) error {
		if err := c.Create(ctx, benchTarget(ns, name(i), "registry.invalid/app:1")); err != nil {
			return err
		}
		return c.Create(ctx, benchCanary(ns, name(i), prom.URL, interval, steps))
	}); err != nil {
		b.Fatal(err)
	}
	waitAll(ctx, b, c, ns, n, "registry.invalid/app:1", 10*time.Minute)
	initialized := time.Since(start)
	queriesBefore := scrapeCounter(m.metricsURL, "orderly_canary_prometheus_queries_total")

	// Every target gets a new template at once: n analyses of three steps each.
	analysisStart := time.Now()
	if err := parallel(n, 16, func(i int) error {
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name(i)}, &d); err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[0].Image = "registry.invalid/app:2"
		return c.Update(ctx, &d)
	}); err != nil {
		b.Fatal(err)
	}
	waitAll(ctx, b, c, ns, n, "registry.invalid/app:2", 15*time.Minute)
	delivered := time.Since(analysisStart)
	b.StopTimer()

	queries := scrapeCounter(m.metricsURL, "orderly_canary_prometheus_queries_total") - queriesBefore
	unavailable := scrapeCounter(m.metricsURL, "orderly_canary_prometheus_queries_total", `result="unavailable"`)
	lag := scrapeHistogram(m.metricsURL, "orderly_canary_analysis_lag_seconds")
	minQueries := float64(n * steps * perStep)
	ideal := time.Duration(steps) * interval
	analyses := lag.count
	b.ReportMetric(lag.quantile(0.5)*1000, "lag-p50-ms")
	b.ReportMetric(lag.quantile(0.99)*1000, "lag-p99-ms")
	b.ReportMetric(queries/delivered.Seconds(), "queries/s")
	b.ReportMetric(float64(peakRSS(m.pid))/(1<<20), "peak-rss-MiB")
	fmt.Printf("\nBenchmarkCanaries: %d Canaries, %d steps of %s, 1 metric (canary vs primary)\n", n, steps, interval)
	fmt.Printf("  initialized (primary created, target scaled down, route created): %s\n", initialized.Round(time.Millisecond))
	fmt.Printf("  every revision promoted after %s; the steps alone take %s: ratio %.2f\n", delivered.Round(time.Millisecond), ideal, delivered.Seconds()/ideal.Seconds())
	fmt.Printf("  analyses run: %d (want %d); lag after the scheduled time: p50 %.0f ms, p99 %.0f ms, max bucket %s\n",
		analyses, n*steps, lag.quantile(0.5)*1000, lag.quantile(0.99)*1000, lag.maxBucket())
	fmt.Printf("  Prometheus queries: %.0f (minimum %0.f: ratio %.2f), %.1f/s against the minimum rate %.1f/s (%d Canaries × %d queries / %s); unavailable %.0f\n",
		queries, minQueries, queries/minQueries, queries/delivered.Seconds(), float64(n*perStep)/interval.Seconds(), n, perStep, interval, unavailable)
	fmt.Printf("  manager: peak RSS %.1f MiB, RSS now %.1f MiB, CPU %.1f s\n", float64(peakRSS(m.pid))/(1<<20), float64(rss(m.pid))/(1<<20), cpuSeconds(m.pid))
}

// canaryBenchCluster is benchCluster with a Service IP range of 10.96.0.0/16: each
// Canary has two Services, and the local cluster's default range (10.0.0.0/24) holds
// only 254, so 200 Canaries would find it full.
func canaryBenchCluster(ctx context.Context, b *testing.B, prefix string, nodes int) string {
	b.Helper()
	manifests, err := config.DevManifests()
	if err != nil {
		b.Fatal(err)
	}
	name := devcluster.RunName(prefix)
	kubeconfig, err := devcluster.Up(ctx, devcluster.Options{
		Name: name, Nodes: nodes, Manifests: manifests,
		ExtraArgs: []string{"kube-apiserver=service-cluster-ip-range=10.96.0.0/16"},
	}, os.Stderr)
	b.Cleanup(func() {
		if os.Getenv(keepEnv) != "" {
			fmt.Fprintf(os.Stderr, "%s is set: kept cluster %q; remove it with `bin/orderly dev down --name %s`\n", keepEnv, name, name)
			return
		}
		_ = devcluster.Down(context.Background(), name, os.Stderr)
	})
	if err != nil {
		b.Fatal(err)
	}
	return kubeconfig
}

func benchTarget(ns, name, image string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers:  []corev1.Container{{Name: "app", Image: image}},
					Tolerations: []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
				},
			},
		},
	}
}

// canaryBenchZone is the zone of the benchmark Canaries' hostnames.
const canaryBenchZone = "canary.bench.test"

// claimCanaryHostnames has a ServiceDomain in ns claim <name(i)>.canaryBenchZone for
// each of the n Canaries, and waits for the claims.
func claimCanaryHostnames(ctx context.Context, c client.Client, ns string, n int, name func(int) string) error {
	if err := c.Create(ctx, &networkv1alpha1.DomainZone{ObjectMeta: metav1.ObjectMeta{Name: "bench-canary"}, Spec: networkv1alpha1.DomainZoneSpec{
		Zone:  canaryBenchZone,
		DNS:   networkv1alpha1.DNS{Provider: networkv1alpha1.ProviderExternalDNS, ResyncInterval: metav1.Duration{Duration: 10 * time.Minute}},
		Route: networkv1alpha1.ZoneRoute{IngressClassName: "bench"}, Target: networkv1alpha1.Target{From: networkv1alpha1.TargetFromFixed, Addresses: []string{"192.0.2.1"}},
	}}); err != nil {
		return err
	}
	if err := parallel(n, 16, func(i int) error {
		return c.Create(ctx, &networkv1alpha1.ServiceDomain{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)}, Spec: networkv1alpha1.ServiceDomainSpec{
			Hostname: name(i) + "." + canaryBenchZone, Service: networkv1alpha1.ServiceRef{Name: name(i) + "-primary", Port: 8080},
			Route: networkv1alpha1.RouteIngress, TLS: networkv1alpha1.TLSNone}})
	}); err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var claims networkv1alpha1.HostnameClaimList
		if err := c.List(ctx, &claims); err == nil && len(claims.Items) >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the %d hostnames are not all claimed after 5 minutes", n)
		}
		time.Sleep(time.Second) //nolint:forbidigo // polling with a deadline
	}
}

func benchCanary(ns, name, prometheus string, interval time.Duration, steps int) *deliveryv1alpha1.Canary {
	var ss []deliveryv1alpha1.Step
	for i := range steps {
		ss = append(ss, deliveryv1alpha1.Step{Weight: ptr.To(int32(100 * (i + 1) / steps)), Interval: &metav1.Duration{Duration: interval}})
	}
	return &deliveryv1alpha1.Canary{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: deliveryv1alpha1.CanarySpec{
			TargetRef: deliveryv1alpha1.TargetRef{Name: name},
			Service:   deliveryv1alpha1.CanaryService{Port: 8080},
			Traffic: deliveryv1alpha1.Traffic{HTTPRoute: &deliveryv1alpha1.HTTPRouteTraffic{
				Name: name, Create: true, ParentRefs: []deliveryv1alpha1.ParentRef{{Name: "public", Namespace: "infra"}},
				Hostnames: []string{name + "." + canaryBenchZone},
			}},
			Steps: ss,
			Analysis: deliveryv1alpha1.Analysis{
				Provider:   deliveryv1alpha1.Provider{Address: prometheus},
				Resolution: metav1.Duration{Duration: 2 * time.Second},
				Metrics: []deliveryv1alpha1.Metric{{
					Name: "error-ratio", Query: canaryapp.ErrorRatioQuery("5s"), MinSamples: 4,
					Baseline: &deliveryv1alpha1.BaselineComparison{MaxAbsoluteShift: "0.02"},
				}},
			},
		},
	}
}

// waitAll waits until every Canary of ns is Succeeded with its primary on image.
func waitAll(ctx context.Context, b *testing.B, c client.Client, ns string, n int, image string, within time.Duration) {
	b.Helper()
	deadline := time.Now().Add(within)
	for {
		var list deliveryv1alpha1.CanaryList
		var primaries appsv1.DeploymentList
		done, phases := 0, map[deliveryv1alpha1.CanaryPhase]int{}
		if err := c.List(ctx, &list, client.InNamespace(ns)); err == nil {
			if err := c.List(ctx, &primaries, client.InNamespace(ns), client.MatchingLabels{deliveryv1alpha1.VariantLabel: deliveryv1alpha1.VariantPrimary}); err == nil {
				images := map[string]string{}
				for _, d := range primaries.Items {
					images[d.Labels[deliveryv1alpha1.CanaryLabel]] = d.Spec.Template.Spec.Containers[0].Image
				}
				for _, cn := range list.Items {
					phases[cn.Status.Phase]++
					if cn.Status.Phase == deliveryv1alpha1.PhaseSucceeded && images[cn.Name] == image {
						done++
					}
				}
			}
		}
		if done == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d Canaries delivered %s after %s; phases %v", done, n, image, within, phases)
		}
		time.Sleep(time.Second) //nolint:forbidigo // polling with a deadline
	}
}

// histogram is one Prometheus histogram read from a text exposition.
type histogram struct {
	bounds []float64 // upper bounds, ascending, +Inf last
	counts []float64 // cumulative
	count  int
}

func scrapeHistogram(url, name string) histogram {
	var h histogram
	resp, err := http.Get(url) //nolint:gosec,noctx // loopback URL built by the benchmark
	if err != nil {
		return h
	}
	defer resp.Body.Close()
	type bucket struct{ le, n float64 }
	var buckets []bucket
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, name+"_bucket{") {
			continue
		}
		i := strings.Index(line, `le="`)
		j := strings.Index(line[i+4:], `"`)
		le, err := strconv.ParseFloat(line[i+4:i+4+j], 64)
		if err != nil {
			le = math.Inf(1)
		}
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		buckets = append(buckets, bucket{le, v})
	}
	sort.Slice(buckets, func(a, b int) bool { return buckets[a].le < buckets[b].le })
	for _, bk := range buckets {
		h.bounds = append(h.bounds, bk.le)
		h.counts = append(h.counts, bk.n)
	}
	if len(h.counts) > 0 {
		h.count = int(h.counts[len(h.counts)-1])
	}
	return h
}

// quantile interpolates linearly within the bucket that holds it, as PromQL's
// histogram_quantile does.
func (h histogram) quantile(q float64) float64 {
	if h.count == 0 {
		return math.NaN()
	}
	rank := q * float64(h.count)
	prevBound, prevCount := 0.0, 0.0
	for i, bound := range h.bounds {
		if h.counts[i] >= rank {
			if math.IsInf(bound, 1) {
				return prevBound
			}
			in := h.counts[i] - prevCount
			if in == 0 {
				return bound
			}
			return prevBound + (bound-prevBound)*(rank-prevCount)/in
		}
		prevBound, prevCount = bound, h.counts[i]
	}
	return prevBound
}

// maxBucket is the upper bound of the highest non-empty bucket.
func (h histogram) maxBucket() string {
	prev := 0.0
	for i, bound := range h.bounds {
		if h.counts[i] == float64(h.count) && h.counts[i] > prev || (i == 0 && h.counts[0] == float64(h.count)) {
			return fmt.Sprintf("≤ %gs", bound)
		}
		prev = h.counts[i]
	}
	return "?"
}
