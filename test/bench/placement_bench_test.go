//go:build bench

package bench

// BenchmarkPlacement: N workloads (Deployments with 0 replicas, so that the members'
// controller-managers have no pods to make and the figures are Orderly's) placed
// with Duplicate on 3 member clusters, one PlacementPolicy per workload:
//   - time until every copy exists on every member, against applying the same
//     objects straight to the members (server-side apply, same field manager) with
//     as many writers as Orderly has (placement.MemberWorkers per member): the ratio;
//   - the hub-change → member latency distribution (p50/p99/max) of 200 changes to
//     hub Deployments, seen through a watch on each member (Karmada's published SLO
//     is p99 ≤ 2 s);
//   - the manager's peak memory.
// Readiness of pods is not measured: it is the members' controller-managers' speed.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterinventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
	"orderly.dev/orderly/internal/controller/fleet/placement"
	"orderly.dev/orderly/internal/devcluster"
)

const placementNS = "fleet-bench"

func placementDeployment(i int) *appsv1.Deployment {
	name := fmt.Sprintf("w-%04d", i)
	l := map[string]string{"app": name}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: placementNS, Labels: l, Annotations: map[string]string{"rev": "0"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
			},
		},
	}
}

// placementMembers starts n member clusters, one after the other (started at once,
// two clusters' components can pick the same free port), and returns their admin
// clients and flattened kubeconfigs.
func placementMembers(ctx context.Context, b *testing.B, n int) ([]client.WithWatch, [][]byte) {
	b.Helper()
	clients, raws, errs := make([]client.WithWatch, n), make([][]byte, n), make([]error, n)
	for i := range n {
		name := devcluster.RunName(fmt.Sprintf("orderly-bench-member%d", i))
		b.Cleanup(func() { _ = devcluster.Down(context.Background(), name, os.Stderr) })
		func() {
			path, err := devcluster.Up(ctx, devcluster.Options{Name: name, Nodes: 1}, os.Stderr)
			if err != nil {
				errs[i] = err
				return
			}
			kc, err := clientcmd.LoadFromFile(path)
			if err == nil {
				err = clientcmdapi.FlattenConfig(kc)
			}
			if err == nil {
				raws[i], err = clientcmd.Write(*kc)
			}
			if err == nil {
				cfg, cerr := clientcmd.RESTConfigFromKubeConfig(raws[i])
				if cerr == nil {
					clients[i], cerr = newBenchClient(cfg)
				}
				err = cerr
			}
			errs[i] = err
		}()
	}
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return clients, raws
}

func countCopies(ctx context.Context, members []client.WithWatch) (int, error) {
	total := 0
	for _, m := range members {
		var list metav1.PartialObjectMetadataList
		list.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DeploymentList"))
		if err := m.List(ctx, &list, client.InNamespace(placementNS)); err != nil {
			return 0, err
		}
		total += len(list.Items)
	}
	return total, nil
}

func BenchmarkPlacement(b *testing.B) {
	ctx := context.Background()
	n := envInt("BENCH_PLACEMENT_WORKLOADS", 1000)
	hubKubeconfig := benchCluster(ctx, b, "orderly-bench-placement", 1)
	_, hub := adminClient(b, hubKubeconfig)
	members, raws := placementMembers(ctx, b, 3)
	for _, ns := range []string{placementNS, "fleet"} {
		if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
	}

	// Baseline: the same objects applied straight to the members, as many writers
	// each as Orderly has.
	began := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(members))
	for mi, m := range members {
		if err := m.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: placementNS}}); err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			errs[mi] = parallel(n, placement.MemberWorkers, func(i int) error {
				u := &unstructured.Unstructured{}
				d := placementDeployment(i)
				d.Name = "direct-" + d.Name
				obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
				if err != nil {
					return err
				}
				u.Object = obj
				return m.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fleetv1alpha1.FieldManager), client.ForceOwnership)
			})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	direct := time.Since(began)
	for _, m := range members {
		if err := m.DeleteAllOf(ctx, &appsv1.Deployment{}, client.InNamespace(placementNS)); err != nil {
			b.Fatal(err)
		}
	}
	for {
		c, err := countCopies(ctx, members)
		if err != nil {
			b.Fatal(err)
		}
		if c == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The manager's namespace and identity first: the kubeconfig Secrets live there.
	managerCfg := managerKubeconfig(ctx, b, hubKubeconfig)
	// The inventory: a kubeconfig Secret and a ClusterProfile per member.
	for i, raw := range raws {
		name := fmt.Sprintf("m%d", i)
		if err := hub.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "kubeconfig-" + name, Namespace: managerNamespace, Annotations: map[string]string{
				fleetv1alpha1.ClusterProfileAnnotation: "fleet/" + name, fleetv1alpha1.AllowedNamespacesAnnotation: placementNS}},
			Data: map[string][]byte{fleetv1alpha1.KubeconfigKey: raw},
		}); err != nil {
			b.Fatal(err)
		}
		if err := hub.Create(ctx, &clusterinventoryv1alpha1.ClusterProfile{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fleet", Labels: map[string]string{"bench": "yes"},
				Annotations: map[string]string{fleetv1alpha1.KubeconfigSecretAnnotation: "kubeconfig-" + name}},
			Spec: clusterinventoryv1alpha1.ClusterProfileSpec{ClusterManager: clusterinventoryv1alpha1.ClusterManager{Name: "bench"}},
		}); err != nil {
			b.Fatal(err)
		}
	}
	m := startManager(b, managerCfg, "--controllers=placement")

	b.ResetTimer()
	began = time.Now()
	if err := parallel(n, 8, func(i int) error {
		d := placementDeployment(i)
		if err := hub.Create(ctx, d); err != nil {
			return err
		}
		return hub.Create(ctx, &fleetv1alpha1.PlacementPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: placementNS},
			Spec: fleetv1alpha1.PlacementPolicySpec{
				ResourceSelectors: []fleetv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name}},
				ClusterSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"bench": "yes"}},
			},
		})
	}); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Minute)
	for {
		c, err := countCopies(ctx, members)
		if err != nil {
			b.Fatal(err)
		}
		if c == n*len(members) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d copies after 15 minutes; manager log: %s", c, n*len(members), m.logPath)
		}
		time.Sleep(200 * time.Millisecond)
	}
	placed := time.Since(began)
	b.StopTimer()

	// Hub change → member latency, 200 annotation changes one every 50 ms: first at
	// once, while the members still report their copies ready and the hub still
	// writes those reports to the policies' status; then again once every queue of
	// the manager is empty, the steady state that Karmada's p99 <= 2 s refers to.
	busy := placementLatencies(ctx, b, hub, members, min(200, n), "1")
	drained := waitQueuesEmpty(m.metricsURL, 5*time.Minute)
	settled := placementLatencies(ctx, b, hub, members, min(200, n), "2")

	fmt.Printf("\nBenchmarkPlacement: %d workloads, Duplicate on %d members (one policy each)\n", n, len(members))
	fmt.Printf("  all copies placed:                      %s\n", placed.Round(time.Millisecond))
	fmt.Printf("  baseline, applied straight to members:  %s (%d writers per member)\n", direct.Round(time.Millisecond), placement.MemberWorkers)
	fmt.Printf("  ratio placed / baseline:                %.2f\n", placed.Seconds()/direct.Seconds())
	fmt.Printf("  hub change → member, right after placing: %s\n", busy)
	fmt.Printf("  the same once every queue was empty (%s later): %s\n", drained.Round(time.Second), settled)
	fmt.Printf("  manager peak RSS:                       %s MiB\n", strconv.FormatInt(peakRSS(m.pid)>>20, 10))
	if os.Getenv("BENCH_DEBUG") != "" {
		// Where a change waits: each work queue's mean wait and work per item over the
		// whole run (placement = the hub's policies, placement-mN = member N's syncs).
		queues := []string{placement.Name}
		for i := range members {
			queues = append(queues, fmt.Sprintf("%s-m%d", placement.Name, i))
		}
		n := scrapeCounter(m.metricsURL, `orderly_placement_reconcile_seconds_count{`)
		fmt.Printf("  hub reconciles %6.0f, mean placing (before the status write) %6.1f ms\n", n, 1000*scrapeCounter(m.metricsURL, `orderly_placement_reconcile_seconds_sum{`)/n)
		for _, verb := range []string{"GET", "LIST", "POST", "PATCH", "PUT", "DELETE"} {
			n := scrapeCounter(m.metricsURL, `rest_client_request_duration_seconds_count{`, `verb="`+verb+`"`)
			secs := scrapeCounter(m.metricsURL, `rest_client_request_duration_seconds_sum{`, `verb="`+verb+`"`)
			fmt.Printf("  requests %-6s %7.0f  mean %7.1f ms (hub and members)\n", verb, n, 1000*secs/n)
		}
		for _, q := range queues {
			sel := `name="` + q + `"`
			n := scrapeCounter(m.metricsURL, `workqueue_queue_duration_seconds_count{`, sel)
			wait := scrapeCounter(m.metricsURL, `workqueue_queue_duration_seconds_sum{`, sel)
			work := scrapeCounter(m.metricsURL, `workqueue_work_duration_seconds_sum{`, sel)
			fmt.Printf("  queue %-14s items %7.0f  mean wait %7.1f ms  mean work %7.1f ms\n", q, n, 1000*wait/n, 1000*work/n)
		}
	}
}

// changeLatencies are hub change → member latencies of one round of changes.
type changeLatencies struct {
	lat    []time.Duration
	wanted int
}

func (l changeLatencies) pct(p float64) time.Duration {
	if len(l.lat) == 0 {
		return 0
	}
	return l.lat[min(len(l.lat)-1, int(float64(len(l.lat))*p))]
}

func (l changeLatencies) String() string {
	return fmt.Sprintf("p50 %s  p99 %s  max %s  (%d of %d seen)", l.pct(0.50).Round(time.Millisecond),
		l.pct(0.99).Round(time.Millisecond), l.pct(1).Round(time.Millisecond), len(l.lat), l.wanted)
}

// placementLatencies annotates the first changes Deployments on the hub with
// rev=<rev>, one every 50 ms, and measures when each member's watch shows it.
func placementLatencies(ctx context.Context, b *testing.B, hub client.Client, members []client.WithWatch, changes int, rev string) changeLatencies {
	type seen struct {
		mu sync.Mutex
		at map[string]time.Time
	}
	watches := make([]*seen, len(members))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for mi, mc := range members {
		s := &seen{at: map[string]time.Time{}}
		watches[mi] = s
		w, err := mc.Watch(wctx, &appsv1.DeploymentList{}, client.InNamespace(placementNS))
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for ev := range w.ResultChan() {
				if ev.Type != watch.Modified {
					continue
				}
				d, ok := ev.Object.(*appsv1.Deployment)
				if !ok || d.Annotations["rev"] != rev {
					continue
				}
				s.mu.Lock()
				if _, ok := s.at[d.Name]; !ok {
					s.at[d.Name] = time.Now()
				}
				s.mu.Unlock()
			}
		}()
	}
	sent := map[string]time.Time{}
	for i := range changes {
		d := placementDeployment(i)
		patch := []byte(`{"metadata":{"annotations":{"rev":"` + rev + `"}}}`)
		sent[d.Name] = time.Now()
		if err := hub.Patch(ctx, d, client.RawPatch("application/merge-patch+json", patch)); err != nil {
			b.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	l := changeLatencies{wanted: changes * len(members)}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		l.lat = l.lat[:0]
		for _, s := range watches {
			s.mu.Lock()
			for name, at := range s.at {
				l.lat = append(l.lat, at.Sub(sent[name]))
			}
			s.mu.Unlock()
		}
		if len(l.lat) == l.wanted || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	slices.Sort(l.lat)
	return l
}

// waitQueuesEmpty waits until the manager's work queues (the hub's and every
// member's) have been empty for 5 s, for at most limit, and returns how long it took.
func waitQueuesEmpty(metricsURL string, limit time.Duration) time.Duration {
	began := time.Now()
	var emptySince time.Time
	for time.Since(began) < limit {
		if scrapeCounter(metricsURL, `workqueue_depth{`, `name="placement`) == 0 {
			if emptySince.IsZero() {
				emptySince = time.Now()
			}
			if time.Since(emptySince) >= 5*time.Second {
				break
			}
		} else {
			emptySince = time.Time{}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return time.Since(began)
}
