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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
	"orderly.dev/orderly/internal/controller/secrets/secretrotation"
)

// rotationMinWrites is the fewest API writes one rotation with two consumers can
// make and still survive a crash: the new value kept before it is installed (the
// rotation's own Secret), the Secret, one pod-template patch per consumer, and one
// status write. Events are not counted in it.
const rotationMinWrites = 5

// rotationConsumer is a Deployment of one pod that reads the Secret secret.
func rotationConsumer(ns, name, secret string) *appsv1.Deployment {
	d := benchDeployment(ns, name, 1, "rotation")
	d.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: secret}}}}
	d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	return d
}

// rolledOutTo says whether a Deployment's template carries annotation=value and its
// rollout is complete with every pod Ready.
func rolledOutTo(d *appsv1.Deployment, annotation, value string) bool {
	return d.Spec.Template.Annotations[annotation] == value && d.Status.ObservedGeneration >= d.Generation &&
		d.Status.UpdatedReplicas == 1 && d.Status.ReadyReplicas == 1 && d.Status.Replicas == 1
}

// BenchmarkSecretRotation: 500 SecretRotations with two consumers each, rotated at
// once. The baseline does the same rotation by hand, straight to the API server
// (write the Secret, patch both consumers' pod templates, wait for every rollout),
// with as many writers as the controller has workers; Orderly's time is from the
// rotateNow writes until every rotation is Done. Also: the manager's API writes per
// rotation against the minimum (rotationMinWrites), and its peak memory.
func BenchmarkSecretRotation(b *testing.B) {
	ctx := context.Background()
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	n := envInt("BENCH_ROTATIONS", 500)
	const perNamespace = 10
	kubeconfig := benchCluster(ctx, b, "orderly-bench-rotation", (4*n)/900+1)
	_, c := adminClient(b, kubeconfig)
	saKubeconfig := managerKubeconfig(ctx, b, kubeconfig)
	writers := workersOf(secretrotation.Controller)
	ns := func(i int) string { return fmt.Sprintf("rot-%03d", i/perNamespace) }
	name := func(i int) string { return fmt.Sprintf("s%04d", i) }

	// The world: namespaces, and two consumers per Secret (baseline and Orderly each
	// get their own set).
	for i := 0; i < n; i += perNamespace {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns(i)}}); err != nil {
			b.Fatal(err)
		}
	}
	if err := parallel(n, 16, func(i int) error {
		for _, d := range []*appsv1.Deployment{
			rotationConsumer(ns(i), "base-"+name(i)+"-a", "base-"+name(i)), rotationConsumer(ns(i), "base-"+name(i)+"-b", "base-"+name(i)),
			rotationConsumer(ns(i), name(i)+"-a", name(i)), rotationConsumer(ns(i), name(i)+"-b", name(i)),
		} {
			if err := c.Create(ctx, d); err != nil {
				return err
			}
		}
		return c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns(i), Name: "base-" + name(i)},
			Data: map[string][]byte{"password": []byte("initial")}})
	}); err != nil {
		b.Fatal(err)
	}
	waitDeployments(ctx, b, c, n*4, func(d *appsv1.Deployment) bool { return d.Status.ReadyReplicas == 1 && d.Status.UpdatedReplicas == 1 })

	// Baseline: a person's rotation, straight to the API server.
	const baseAnnotation = "bench.orderly.dev/version"
	start := time.Now()
	if err := parallel(n, writers, func(i int) error {
		var s corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns(i), Name: "base-" + name(i)}, &s); err != nil {
			return err
		}
		s.Data = map[string][]byte{"password": []byte("rotated-" + name(i))}
		if err := c.Update(ctx, &s); err != nil {
			return err
		}
		for _, suffix := range []string{"-a", "-b"} {
			patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{%q:"v2"}}}}}`, baseAnnotation))
			if err := c.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns(i), Name: "base-" + name(i) + suffix}}, patch); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	waitDeployments(ctx, b, c, n*2, func(d *appsv1.Deployment) bool { return rolledOutTo(d, baseAnnotation, "v2") })
	baseline := time.Since(start)

	// Orderly at its default flags: the first rotation creates the Secrets and rolls
	// the consumers; it is not measured.
	mgr := startManager(b, saKubeconfig)
	if err := parallel(n, writers, func(i int) error {
		return c.Create(ctx, &secretsv1alpha1.SecretRotation{ObjectMeta: metav1.ObjectMeta{Namespace: ns(i), Name: name(i)},
			Spec: secretsv1alpha1.SecretRotationSpec{SecretName: name(i), Interval: &metav1.Duration{Duration: 720 * time.Hour},
				Generator:   secretsv1alpha1.Generator{Password: &secretsv1alpha1.PasswordGenerator{Length: 32}},
				Consumers:   secretsv1alpha1.Consumers{MaxUnavailableConsumers: 2},
				GracePeriod: &metav1.Duration{}}})
	}); err != nil {
		b.Fatal(err)
	}
	first := waitRotations(ctx, b, c, n, 1, 20*time.Minute, mgr)

	writes := func() float64 {
		total := 0.0
		for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			total += scrapeCounter(mgr.metricsURL, `rest_client_requests_total{`, `method="`+m+`"`)
		}
		return total
	}
	statusWrites := func() float64 {
		return scrapeCounter(mgr.metricsURL, `rest_client_requests_total{`, `method="PATCH"`) // status, consumers
	}
	writesBefore, patchesBefore := writes(), statusWrites()
	eventsBefore := scrapeCounter(mgr.metricsURL, `rest_client_requests_total{`, `method="POST"`)

	start = time.Now()
	if err := parallel(n, writers, func(i int) error {
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"rotateNow":"bench-2"}}`))
		return c.Patch(ctx, &secretsv1alpha1.SecretRotation{ObjectMeta: metav1.ObjectMeta{Namespace: ns(i), Name: name(i)}}, patch)
	}); err != nil {
		b.Fatal(err)
	}
	waitRotations(ctx, b, c, n, 2, 20*time.Minute, mgr)
	elapsed := time.Since(start)
	perRotation := (writes() - writesBefore) / float64(n)
	posts := (scrapeCounter(mgr.metricsURL, `rest_client_requests_total{`, `method="POST"`) - eventsBefore) / float64(n)
	patches := (statusWrites() - patchesBefore) / float64(n)
	peak := peakRSS(mgr.pid)
	cpu := cpuSeconds(mgr.pid)

	fmt.Printf("\nSecretRotation benchmark: %d SecretRotations x 2 consumers (Deployments of 1 pod, kwok), rotated at once; Orderly at its default flags (%d workers), as its ServiceAccount\n", n, writers)
	fmt.Printf("  first rotations (create Secrets, roll consumers)   %8.2fs (not compared)\n", first.Seconds())
	fmt.Printf("  baseline: rotate by hand, straight to the API     %8.2fs  (%d writers: Secret + 2 pod-template patches each, until rolled out)\n", baseline.Seconds(), writers)
	fmt.Printf("  orderly:  rotateNow until every rotation Done     %8.2fs\n", elapsed.Seconds())
	fmt.Printf("  ratio orderly/baseline                            %8.2fx\n", elapsed.Seconds()/baseline.Seconds())
	fmt.Printf("  manager API writes per rotation                   %8.1f  (PATCH %.1f, POST %.1f incl. Events; minimum %d)\n", perRotation, patches, posts, rotationMinWrites)
	fmt.Printf("  ratio writes/minimum                              %8.2fx\n", perRotation/rotationMinWrites)
	fmt.Printf("  manager CPU time                                  %8.2fs\n", cpu)
	fmt.Printf("  manager peak memory (VmHWM)                       %8.1f MiB\n", float64(peak)/(1<<20))
	b.ReportMetric(elapsed.Seconds()/baseline.Seconds(), "ratio")
	b.ReportMetric(perRotation/rotationMinWrites, "writes-ratio")
	b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
}

// waitDeployments polls until want Deployments satisfy ok.
func waitDeployments(ctx context.Context, b *testing.B, c client.Client, want int, ok func(*appsv1.Deployment) bool) {
	b.Helper()
	deadline := time.Now().Add(20 * time.Minute)
	for {
		var list appsv1.DeploymentList
		if err := c.List(ctx, &list, client.MatchingLabels{benchLabel: "rotation"}); err != nil {
			b.Fatal(err)
		}
		got := 0
		for i := range list.Items {
			if ok(&list.Items[i]) {
				got++
			}
		}
		if got >= want {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d Deployments reached the state after 20 minutes", got, want)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitRotations polls until n SecretRotations have finished rotation number Done,
// and returns how long that took.
func waitRotations(ctx context.Context, b *testing.B, c client.Client, n int, number int64, limit time.Duration, mgr *benchManager) time.Duration {
	b.Helper()
	start := time.Now()
	for {
		var list secretsv1alpha1.SecretRotationList
		if err := c.List(ctx, &list); err != nil {
			b.Fatal(err)
		}
		done := 0
		for i := range list.Items {
			st := list.Items[i].Status
			if st.Rotation != nil && st.Rotation.Number == number && st.Phase == secretsv1alpha1.PhaseDone {
				done++
			}
		}
		if done == n {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			b.Fatalf("only %d of %d rotations %d Done after %s; manager log: %s", done, n, number, limit, mgr.logPath)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
