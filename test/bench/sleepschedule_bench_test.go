//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

const benchLabel = "orderly-bench"

func benchDeployment(ns, name string) *appsv1.Deployment {
	lbls := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{benchLabel: "sleep"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}}},
			},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

// watcher follows the benchmark's Deployments through one watch, so that the moment
// the last one reaches a state is known precisely without polling thousands of
// objects.
type watcher struct {
	cs    *kubernetes.Clientset
	total int
}

// until returns when cond holds for every benchmark Deployment, with the time it
// first did. A watch the API server ends is resumed from a fresh list.
func (w *watcher) until(ctx context.Context, cond func(*appsv1.Deployment) bool) (time.Time, error) {
	const deadline = 30 * time.Minute
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	satisfied := 0
	for ctx.Err() == nil {
		done, n, err := w.watchOnce(ctx, cond)
		satisfied = n
		if err != nil && ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
		}
		if !done.IsZero() {
			return done, nil
		}
	}
	return time.Time{}, fmt.Errorf("only %d of %d Deployments reached the state within %s", satisfied, w.total, deadline)
}

func (w *watcher) watchOnce(ctx context.Context, cond func(*appsv1.Deployment) bool) (time.Time, int, error) {
	sel := metav1.ListOptions{LabelSelector: benchLabel + "=sleep"}
	list, err := w.cs.AppsV1().Deployments("").List(ctx, sel)
	if err != nil {
		return time.Time{}, 0, err
	}
	ok := map[string]bool{}
	satisfied := 0
	for i := range list.Items {
		d := &list.Items[i]
		ok[d.Namespace+"/"+d.Name] = cond(d)
		if cond(d) {
			satisfied++
		}
	}
	if satisfied == w.total {
		return time.Now(), satisfied, nil
	}
	sel.ResourceVersion = list.ResourceVersion
	sel.AllowWatchBookmarks = true
	wi, err := w.cs.AppsV1().Deployments("").Watch(ctx, sel)
	if err != nil {
		return time.Time{}, satisfied, err
	}
	defer wi.Stop()
	for ev := range wi.ResultChan() {
		d, isDeployment := ev.Object.(*appsv1.Deployment)
		if !isDeployment || ev.Type == watch.Bookmark {
			continue
		}
		key := d.Namespace + "/" + d.Name
		now := cond(d) && ev.Type != watch.Deleted
		if now != ok[key] {
			if now {
				satisfied++
			} else {
				satisfied--
			}
		}
		ok[key] = now
		if satisfied == w.total {
			return time.Now(), satisfied, nil
		}
	}
	return time.Time{}, satisfied, fmt.Errorf("watch ended")
}

func replicasAre(n int32) func(*appsv1.Deployment) bool {
	return func(d *appsv1.Deployment) bool { return d.Spec.Replicas != nil && *d.Spec.Replicas == n }
}

// podsGone: scaled to zero and the controller-manager has removed every pod.
func podsGone(d *appsv1.Deployment) bool {
	return d.Spec.Replicas != nil && *d.Spec.Replicas == 0 && d.Status.Replicas == 0 && d.Status.ObservedGeneration >= d.Generation
}

// allReady: one replica, available and Ready.
func allReady(d *appsv1.Deployment) bool {
	return d.Spec.Replicas != nil && *d.Spec.Replicas == 1 && d.Status.ReadyReplicas == 1 && d.Status.ObservedGeneration >= d.Generation
}

func scaleAll(ctx context.Context, c client.Client, namespaces, perNamespace int, to int32) error {
	return parallel(namespaces*perNamespace, func(i int) error {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("sleep-%03d", i/perNamespace), Name: fmt.Sprintf("app-%02d", i%perNamespace)}}
		patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, to))
		return c.Patch(ctx, d, patch)
	})
}

func BenchmarkSleepSchedule(b *testing.B) {
	ctx := context.Background()
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	namespaces := envInt("BENCH_NAMESPACES", 200)
	total := envInt("BENCH_DEPLOYMENTS", 2000)
	perNamespace := total / namespaces
	total = perNamespace * namespaces
	kubeconfig := benchCluster(ctx, b, "orderly-bench-sleep", total/900+1)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	c, err := newBenchClient(cfg, clientQPS, clientBurst)
	if err != nil {
		b.Fatal(err)
	}
	watchCfg := rest.CopyConfig(cfg)
	watchCfg.QPS, watchCfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(watchCfg)
	if err != nil {
		b.Fatal(err)
	}
	w := &watcher{cs: cs, total: total}

	// The workload: perNamespace Deployments of one Ready pod in each namespace.
	setup := time.Now()
	if err := parallel(namespaces, func(i int) error {
		return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sleep-%03d", i), Labels: map[string]string{benchLabel: "sleep"}}})
	}); err != nil {
		b.Fatal(err)
	}
	if err := parallel(total, func(i int) error {
		return c.Create(ctx, benchDeployment(fmt.Sprintf("sleep-%03d", i/perNamespace), fmt.Sprintf("app-%02d", i%perNamespace)))
	}); err != nil {
		b.Fatal(err)
	}
	if _, err := w.until(ctx, allReady); err != nil {
		b.Fatal(err)
	}
	fmt.Printf("setup: %d Deployments Ready in %.0fs\n", total, time.Since(setup).Seconds())

	// Baseline: the same Deployments scaled straight through the API, same client limits.
	start := time.Now()
	if err := scaleAll(ctx, c, namespaces, perNamespace, 0); err != nil {
		b.Fatal(err)
	}
	baseSleepWrites := time.Since(start)
	gone, err := w.until(ctx, podsGone)
	if err != nil {
		b.Fatal(err)
	}
	baseSleepSettled := gone.Sub(start)
	start = time.Now()
	if err := scaleAll(ctx, c, namespaces, perNamespace, 1); err != nil {
		b.Fatal(err)
	}
	baseWakeWrites := time.Since(start)
	ready, err := w.until(ctx, allReady)
	if err != nil {
		b.Fatal(err)
	}
	baseWakeReady := ready.Sub(start)

	// Orderly: the manager with the same client limits; a schedule that is always
	// asleep except for an on-demand wake that ends at a known instant.
	mgr := startManager(b, kubeconfig, "--controllers=sleepschedule", fmt.Sprintf("--kube-api-qps=%d", clientQPS), fmt.Sprintf("--kube-api-burst=%d", clientBurst), fmt.Sprintf("--max-concurrent-reconciles=%d", managerConcurrency), "--log-level=error")

	transition := time.Now().Add(15 * time.Second).Truncate(time.Second)
	s := &powerv1alpha1.SleepSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-nights"},
		Spec: powerv1alpha1.SleepScheduleSpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{benchLabel: "sleep"}},
			WakeUntil:         &metav1.Time{Time: transition},
		},
	}
	if err := c.Create(ctx, s); err != nil {
		b.Fatal(err)
	}
	written, err := w.until(ctx, replicasAre(0))
	if err != nil {
		b.Fatalf("%v; manager log: %s", err, mgr.logPath)
	}
	orderlySleepWrites := written.Sub(transition)
	gone, err = w.until(ctx, podsGone)
	if err != nil {
		b.Fatal(err)
	}
	orderlySleepSettled := gone.Sub(transition)

	start = time.Now()
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"wakeUntil":%q}}`, start.Add(time.Hour).UTC().Format(time.RFC3339)))
	if err := c.Patch(ctx, s, patch); err != nil {
		b.Fatal(err)
	}
	written, err = w.until(ctx, replicasAre(1))
	if err != nil {
		b.Fatalf("%v; manager log: %s", err, mgr.logPath)
	}
	orderlyWakeWrites := written.Sub(start)
	ready, err = w.until(ctx, allReady)
	if err != nil {
		b.Fatal(err)
	}
	orderlyWakeReady := ready.Sub(start)

	peak := peakRSS(mgr.pid)
	cpu := cpuSeconds(mgr.pid)
	reconciles := scrapeCounter(mgr.metricsURL, `controller_runtime_reconcile_total{controller="sleepschedule"`)
	patches := scrapeCounter(mgr.metricsURL, `rest_client_requests_total{`, `method="PATCH"`)

	fmt.Printf("\nSleepSchedule benchmark: %d Deployments (1 pod each) in %d namespaces, client %d QPS / %d burst (one limiter per process)\n",
		total, namespaces, clientQPS, clientBurst)
	fmt.Printf("  baseline writers: %d; manager --max-concurrent-reconciles=%d\n", workers, managerConcurrency)
	fmt.Printf("  %-58s %8s %8s %7s\n", "", "baseline", "orderly", "ratio")
	row := func(label string, base, orderly time.Duration) {
		fmt.Printf("  %-58s %7.2fs %7.2fs %6.2fx\n", label, base.Seconds(), orderly.Seconds(), orderly.Seconds()/base.Seconds())
	}
	row("sleep: every Deployment scaled to 0 (the writes)", baseSleepWrites, orderlySleepWrites)
	row("sleep: every pod gone (cluster settled)", baseSleepSettled, orderlySleepSettled)
	row("wake: every Deployment back to 1 (the writes)", baseWakeWrites, orderlyWakeWrites)
	row("wake: every Deployment Ready (cluster settled)", baseWakeReady, orderlyWakeReady)
	fmt.Printf("  manager PATCH requests                                     %8.0f  (%d workload writes expected)\n", patches, 2*total)
	fmt.Printf("  manager reconciles                                         %8.0f\n", reconciles)
	fmt.Printf("  manager CPU time                                           %7.2fs\n", cpu)
	fmt.Printf("  manager peak memory (VmHWM)                                %7.1f MiB (target < 150 MiB)\n", float64(peak)/(1<<20))
	fmt.Printf("  target: orderly/baseline <= 1.5x for the writes\n")
	b.ReportMetric(orderlySleepWrites.Seconds()/baseSleepWrites.Seconds(), "sleep-ratio")
	b.ReportMetric(orderlyWakeWrites.Seconds()/baseWakeWrites.Seconds(), "wake-ratio")
	b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
}
