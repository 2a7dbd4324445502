//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

const lpBenchLabel = "bench-labelpolicy"

// pausedDeployment creates no ReplicaSet, so the benchmark measures admission and
// Orderly rather than the local controller-manager.
func pausedDeployment(ns, name string, lbls map[string]string) *appsv1.Deployment {
	sel := map[string]string{"app": "bench"}
	replicas := int32(0)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Paused:   true,
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}}},
			},
		},
	}
}

// benchCase is one kind of create measured by interleavedLatencies.
type benchCase struct {
	ns     string
	labels map[string]string
	lat    []time.Duration
}

// interleavedLatencies creates n Deployments per case at a steady rate of ticks per
// second, one of each case per tick, and records each create's latency as the client
// saw it, sorted. Interleaving makes the cases share whatever else the machine is
// doing, so their difference is the policy's cost rather than noise.
func interleavedLatencies(ctx context.Context, c client.Client, cases []*benchCase, n, perSecond int, prefix string) error {
	for _, bc := range cases {
		bc.lat = make([]time.Duration, n)
	}
	errs := make(chan error, n*len(cases))
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	for i := 0; i < n; i++ {
		<-tick.C
		for _, bc := range cases {
			wg.Add(1)
			go func(bc *benchCase, i int) {
				defer wg.Done()
				start := time.Now()
				if err := c.Create(ctx, pausedDeployment(bc.ns, fmt.Sprintf("%s-%05d", prefix, i), bc.labels)); err != nil {
					errs <- err
					return
				}
				bc.lat[i] = time.Since(start)
			}(bc, i)
		}
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	for _, bc := range cases {
		slices.Sort(bc.lat)
	}
	return nil
}

// serverHistogram is one of the API server's histograms, summed over the series whose
// lines contain every one of a set of label matchers.
type serverHistogram struct {
	count, sum float64
	le         map[string]float64 // cumulative count by bucket bound, as written ("0.005")
}

// scrapeServerHistogram reads the API server's metric (a histogram) over the series that
// match every one of labels (`name="..."` and so on).
func scrapeServerHistogram(ctx context.Context, cs *kubernetes.Clientset, metric string, labels ...string) (serverHistogram, error) {
	m, err := apiServerMetrics(ctx, cs)
	if err != nil {
		return serverHistogram{}, err
	}
	h := serverHistogram{le: map[string]float64{}}
	m.samples(metric+"_", labels, func(line string, v float64) {
		switch {
		case strings.HasPrefix(line, metric+"_count"):
			h.count += v
		case strings.HasPrefix(line, metric+"_sum"):
			h.sum += v
		default:
			if _, rest, ok := strings.Cut(line, `le="`); ok {
				bound, _, _ := strings.Cut(rest, `"`)
				h.le[bound] += v
			}
		}
	})
	return h, nil
}

func (a serverHistogram) minus(b serverHistogram) serverHistogram {
	out := serverHistogram{count: a.count - b.count, sum: a.sum - b.sum, le: map[string]float64{}}
	for k, v := range a.le {
		out.le[k] = v - b.le[k]
	}
	return out
}

func (a serverHistogram) mean() float64 {
	if a.count == 0 {
		return 0
	}
	return a.sum / a.count
}

// share is the fraction of observations of at most bound seconds (a bucket bound).
func (a serverHistogram) share(bound float64) float64 {
	if a.count == 0 {
		return 0
	}
	return a.le[strconv.FormatFloat(bound, 'g', -1, 64)] / a.count
}

// scrapeAdmission is the API server's own measure of time spent in one admission
// plugin for CREATE requests.
func scrapeAdmission(ctx context.Context, cs *kubernetes.Clientset, plugin string) (serverHistogram, error) {
	return scrapeServerHistogram(ctx, cs, "apiserver_admission_controller_admission_duration_seconds", `name="`+plugin+`"`, `operation="CREATE"`)
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[int(q*float64(len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func waitPolicy(ctx context.Context, c client.Client, name string, cond func(*policyv1alpha1.LabelPolicy) bool) error {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		var p policyv1alpha1.LabelPolicy
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &p); err == nil && cond(&p) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("LabelPolicy %s did not reach the expected state", name)
}

func policyReady(p *policyv1alpha1.LabelPolicy) bool {
	c := meta.FindStatusCondition(p.Status.Conditions, policyv1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && p.Status.ObservedGeneration == p.Generation && p.Status.LastAuditTime != nil
}

func benchPolicy(name string, action policyv1alpha1.Action, selector string) *policyv1alpha1.LabelPolicy {
	return &policyv1alpha1.LabelPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1alpha1.LabelPolicySpec{
			Label: "cost-center", Action: action, AllowedPattern: "cc-[0-9]+", DefaultValue: "cc-0",
			Match: policyv1alpha1.LabelPolicyMatch{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{lpBenchLabel: selector}}},
		},
	}
}

// waitEnforcedBench waits until the API server has loaded a policy: a probe in ns is
// rejected (Deny) or labelled (Default).
func waitEnforcedBench(ctx context.Context, c client.Client, ns string, mutated bool) error {
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; time.Now().Before(deadline); i++ {
		d := pausedDeployment(ns, fmt.Sprintf("probe-%d", i), nil)
		err := c.Create(ctx, d)
		if err == nil {
			_ = c.Delete(ctx, d)
		}
		if (!mutated && err != nil) || (mutated && err == nil && d.Labels["cost-center"] != "") {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("policy on %s never took effect", ns)
}

func BenchmarkLabelPolicy(b *testing.B) {
	ctx := context.Background()
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	creates := envInt("BENCH_LP_CREATES", 300)
	rate := envInt("BENCH_LP_RATE", 5)
	workloads := envInt("BENCH_LP_WORKLOADS", 10000)
	kubeconfig := benchCluster(ctx, b, "orderly-bench-labelpolicy", 1)
	cfg, c := adminClient(b, kubeconfig)
	// Creates orderly-system too, which holds the webhook's certificate Secret in the
	// webhook phase.
	saKubeconfig := managerKubeconfig(ctx, b, kubeconfig)
	for _, ns := range []string{"lp-base", "lp-deny", "lp-default", "lp-warmup"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{lpBenchLabel: ns}}}); err != nil {
			b.Fatal(err)
		}
	}

	mgr := startManager(b, saKubeconfig)

	// Admission latency: the same creates without a policy, under a Deny policy (a
	// ValidatingAdmissionPolicy) and under a Default policy (a MutatingAdmissionPolicy
	// that fills the label in, plus the validating one), interleaved.
	for _, p := range []*policyv1alpha1.LabelPolicy{benchPolicy("deny", policyv1alpha1.ActionDeny, "lp-deny"), benchPolicy("default", policyv1alpha1.ActionDefault, "lp-default")} {
		if err := c.Create(ctx, p); err != nil {
			b.Fatal(err)
		}
		if err := waitPolicy(ctx, c, p.Name, policyReady); err != nil {
			b.Fatalf("%v; manager log: %s", err, mgr.logPath)
		}
	}
	if err := waitEnforcedBench(ctx, c, "lp-deny", false); err != nil {
		b.Fatal(err)
	}
	if err := waitEnforcedBench(ctx, c, "lp-default", true); err != nil {
		b.Fatal(err)
	}
	base := &benchCase{ns: "lp-base"}
	deny := &benchCase{ns: "lp-deny", labels: map[string]string{"cost-center": "cc-1"}}
	def := &benchCase{ns: "lp-default"}
	cases := []*benchCase{base, deny, def}
	warm := []*benchCase{{ns: "lp-warmup"}, {ns: "lp-deny", labels: map[string]string{"cost-center": "cc-1"}}, {ns: "lp-default"}}
	if err := interleavedLatencies(ctx, c, warm, 100, rate, "warm"); err != nil {
		b.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	vapBefore, _ := scrapeAdmission(ctx, cs, "ValidatingAdmissionPolicy")
	mapBefore, _ := scrapeAdmission(ctx, cs, "MutatingAdmissionPolicy")
	if err := interleavedLatencies(ctx, c, cases, creates, rate, "d"); err != nil {
		b.Fatal(err)
	}
	vapAfter, _ := scrapeAdmission(ctx, cs, "ValidatingAdmissionPolicy")
	mapAfter, _ := scrapeAdmission(ctx, cs, "MutatingAdmissionPolicy")

	// The webhook path: the same three cases, with a manager that fills the label in
	// through Orderly's webhook instead of a MutatingAdmissionPolicy.
	mgr.stop()
	port := freePort()
	// The mode is not a default: what it sets is the webhook path, not a speed.
	mgr = startManager(b, saKubeconfig, "--labelpolicy-mutation=webhook", "--webhook-host=127.0.0.1", fmt.Sprintf("--webhook-port=%d", port), fmt.Sprintf("--webhook-url=https://127.0.0.1:%d", port))
	if err := waitPolicy(ctx, c, "default", func(p *policyv1alpha1.LabelPolicy) bool {
		return p.Status.AdmissionMode == policyv1alpha1.AdmissionModeWebhook
	}); err != nil {
		b.Fatalf("%v; manager log: %s", err, mgr.logPath)
	}
	if err := waitEnforcedBench(ctx, c, "lp-default", true); err != nil {
		b.Fatal(err)
	}
	// Wait until the MutatingAdmissionPolicy is gone, so the default case measures the webhook alone.
	for deadline := time.Now().Add(time.Minute); ; {
		var mp admissionv1.MutatingAdmissionPolicy
		if err := c.Get(ctx, client.ObjectKey{Name: "orderly-labelpolicy-default"}, &mp); apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the MutatingAdmissionPolicy was not removed in webhook mode")
		}
		time.Sleep(100 * time.Millisecond)
	}
	wbase := &benchCase{ns: "lp-base"}
	wdeny := &benchCase{ns: "lp-deny", labels: map[string]string{"cost-center": "cc-1"}}
	wdef := &benchCase{ns: "lp-default"}
	if err := interleavedLatencies(ctx, c, warm, 100, rate, "wwarm"); err != nil {
		b.Fatal(err)
	}
	whBefore, _ := scrapeAdmission(ctx, cs, "MutatingAdmissionWebhook")
	if err := interleavedLatencies(ctx, c, []*benchCase{wbase, wdeny, wdef}, creates, rate, "w"); err != nil {
		b.Fatal(err)
	}
	whAfter, _ := scrapeAdmission(ctx, cs, "MutatingAdmissionWebhook")

	// Audit: workloads across 20 namespaces, one in four without the label.
	const auditNamespaces = 20
	for i := 0; i < auditNamespaces; i++ {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lp-audit-%02d", i), Labels: map[string]string{lpBenchLabel: "audit"}}}); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	if err := parallel(workloads, 20, func(i int) error {
		var lbls map[string]string
		if i%4 != 0 {
			lbls = map[string]string{"cost-center": "cc-1"}
		}
		return c.Create(ctx, pausedDeployment(fmt.Sprintf("lp-audit-%02d", i%auditNamespaces), fmt.Sprintf("w-%05d", i), lbls))
	}); err != nil {
		b.Fatal(err)
	}
	fmt.Printf("created %d workloads in %.1fs\n", workloads, time.Since(start).Seconds())

	// Baseline for the audit: the same metadata-only paged list, done by the benchmark.
	start = time.Now()
	listed := 0
	cont := ""
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DeploymentList"))
		if err := c.List(ctx, list, client.Limit(500), client.Continue(cont)); err != nil {
			b.Fatal(err)
		}
		listed += len(list.Items)
		if cont = list.Continue; cont == "" {
			break
		}
	}
	listBaseline := time.Since(start)

	rssBefore := peakRSS(mgr.pid)
	start = time.Now()
	audit := benchPolicy("audit", policyv1alpha1.ActionAudit, "audit")
	if err := c.Create(ctx, audit); err != nil {
		b.Fatal(err)
	}
	if err := waitPolicy(ctx, c, "audit", policyReady); err != nil {
		b.Fatalf("%v; manager log: %s", err, mgr.logPath)
	}
	auditWall := time.Since(start)
	var got policyv1alpha1.LabelPolicy
	if err := c.Get(ctx, client.ObjectKey{Name: "audit"}, &got); err != nil {
		b.Fatal(err)
	}
	auditSeconds := scrapeCounter(mgr.metricsURL, `orderly_labelpolicy_audit_duration_seconds_sum{labelpolicy="audit"}`)
	peak := peakRSS(mgr.pid)

	fmt.Printf("\nLabelPolicy benchmark: %d Deployment creates per case, one of each case %d times a second, interleaved (client-side latency)\n", creates, rate)
	row := func(label string, l, base []time.Duration) {
		fmt.Printf("  %-44s p50 %8.2f ms  p99 %8.2f ms  (added: p50 %+7.2f ms, p99 %+7.2f ms)\n", label, ms(quantile(l, 0.5)), ms(quantile(l, 0.99)),
			ms(quantile(l, 0.5))-ms(quantile(base, 0.5)), ms(quantile(l, 0.99))-ms(quantile(base, 0.99)))
	}
	fmt.Printf("  native path:\n")
	row("no policy (baseline)", base.lat, base.lat)
	row("Deny (ValidatingAdmissionPolicy)", deny.lat, base.lat)
	row("Default (MutatingAdmissionPolicy + VAP)", def.lat, base.lat)
	fmt.Printf("  webhook path (--labelpolicy-mutation=webhook):\n")
	row("no policy (baseline)", wbase.lat, wbase.lat)
	row("Deny (ValidatingAdmissionPolicy)", wdeny.lat, wbase.lat)
	row("Default (Orderly's webhook + VAP)", wdef.lat, wbase.lat)
	// Every CREATE passes through both plugins; only the policy cases do real work, so
	// the plugin's total time divided by the creates a policy matched is an upper bound
	// of what the policy adds per create.
	server := func(label string, before, after serverHistogram, matched int) {
		d := after.minus(before)
		if d.count <= 0 {
			fmt.Printf("  %-44s no samples\n", label)
			return
		}
		fmt.Printf("  %-44s %6.0f CREATEs, %5.1f%% <= 5 ms; time per matched create <= %6.3f ms\n", label, d.count,
			d.share(0.005)*100, d.sum/float64(matched)*1000)
	}
	fmt.Printf("  API server's own admission time per plugin (apiserver_admission_controller_admission_duration_seconds):\n")
	server("ValidatingAdmissionPolicy (Deny, Default)", vapBefore, vapAfter, 2*creates)
	server("MutatingAdmissionPolicy (Default)", mapBefore, mapAfter, creates)
	server("MutatingAdmissionWebhook (Default, webhook path)", whBefore, whAfter, creates)
	fmt.Printf("  target: p99 added < 5 ms native, < 10 ms webhook\n")
	fmt.Printf("\n  audit of %d workloads (%d listed cluster-wide), %d violations found\n", workloads, listed, got.Status.Violations)
	fmt.Printf("  baseline: paged metadata list by the benchmark      %8.2fs\n", listBaseline.Seconds())
	fmt.Printf("  orderly:  audit (orderly_labelpolicy_audit_duration) %8.2fs  (ratio %.2fx; target < 10 s)\n", auditSeconds, auditSeconds/listBaseline.Seconds())
	fmt.Printf("  orderly:  policy created -> status reports the audit %8.2fs\n", auditWall.Seconds())
	fmt.Printf("  manager peak memory (VmHWM) before / after the audit %8.1f / %.1f MiB\n", float64(rssBefore)/(1<<20), float64(peak)/(1<<20))
	b.ReportMetric(ms(quantile(deny.lat, 0.99))-ms(quantile(base.lat, 0.99)), "vap-p99-added-ms")
	b.ReportMetric(ms(quantile(def.lat, 0.99))-ms(quantile(base.lat, 0.99)), "map-p99-added-ms")
	b.ReportMetric(ms(quantile(wdef.lat, 0.99))-ms(quantile(wbase.lat, 0.99)), "webhook-p99-added-ms")
	b.ReportMetric(auditSeconds, "audit-s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
}
