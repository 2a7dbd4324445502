//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/controller/power/sleepschedule"
)

const benchLabel = "orderly-bench"

// baselineWriters is the concurrency of the direct writes: kube-green's 20 workers,
// and the SleepSchedule controller's write pool at its defaults.
const baselineWriters = sleepschedule.DefaultWriters

func benchDeployment(ns, name string, replicas int32, lbl string) *appsv1.Deployment {
	lbls := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{benchLabel: lbl}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo(replicas),
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
	// first is when the last until first saw a Deployment reach the state.
	first time.Time
}

// until returns when cond holds for every benchmark Deployment, with the time it
// first did. A watch the API server ends is resumed from a fresh list.
func (w *watcher) until(ctx context.Context, cond func(*appsv1.Deployment) bool) (time.Time, error) {
	const deadline = 30 * time.Minute
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	w.first = time.Time{}
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
				if w.first.IsZero() {
					w.first = time.Now()
				}
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

func sleepNS(i int) string { return fmt.Sprintf("sleep-%03d", i) }

func scaleAll(ctx context.Context, c client.Client, namespaces, perNamespace int, to int32) error {
	return parallel(namespaces*perNamespace, baselineWriters, func(i int) error {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: sleepNS(i % namespaces), Name: fmt.Sprintf("app-%02d", i/namespaces)}}
		patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, to))
		return c.Patch(ctx, d, patch)
	})
}

// observer is another client of the API server while transitions run: a
// ServiceAccount with no special standing (its requests share the API server's
// Priority and Fairness level with Orderly's), sending a steady trickle of GETs and
// LISTs, whose latency says how polite a transition is to everyone else.
type observer struct {
	cs *kubernetes.Clientset
	ns string

	mu        sync.Mutex
	get, list []time.Duration
	stop      chan struct{}
	done      chan struct{}
}

const (
	observerNS    = "bench-observer"
	observerRate  = 10 // requests a second, GETs and LISTs alternately
	observerItems = 50 // ConfigMaps its LISTs return
)

func newObserver(ctx context.Context, b *testing.B, c client.Client, adminKubeconfig string) *observer {
	b.Helper()
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: observerNS}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: observerNS, Name: "observer"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: observerNS, Name: "observer"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: observerNS, Name: "observer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "observer"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: observerNS, Name: "observer"}}},
	}
	for i := range observerItems {
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: observerNS, Name: fmt.Sprintf("cm-%02d", i)},
			Data: map[string]string{"key": fmt.Sprintf("value %d", i)}})
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			b.Fatal(err)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", adminKubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	admin, err := kubernetes.NewForConfig(unlimited(cfg))
	if err != nil {
		b.Fatal(err)
	}
	saCfg, err := clientcmd.BuildConfigFromFlags("", serviceAccountKubeconfig(ctx, b, admin, adminKubeconfig, observerNS, "observer"))
	if err != nil {
		b.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(unlimited(saCfg))
	if err != nil {
		b.Fatal(err)
	}
	return &observer{cs: cs, ns: observerNS}
}

// start begins the trickle; stop ends it and returns what it measured.
func (o *observer) start(ctx context.Context) {
	o.get, o.list = nil, nil
	o.stop, o.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(o.done)
		tick := time.NewTicker(time.Second / observerRate)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-o.stop:
				return
			case <-tick.C:
			}
			begin := time.Now()
			var err error
			if i%2 == 0 {
				_, err = o.cs.CoreV1().ConfigMaps(o.ns).Get(ctx, fmt.Sprintf("cm-%02d", i/2%observerItems), metav1.GetOptions{})
			} else {
				_, err = o.cs.CoreV1().ConfigMaps(o.ns).List(ctx, metav1.ListOptions{})
			}
			took := time.Since(begin)
			if err != nil {
				continue
			}
			o.mu.Lock()
			if i%2 == 0 {
				o.get = append(o.get, took)
			} else {
				o.list = append(o.list, took)
			}
			o.mu.Unlock()
		}
	}()
}

// latencies is what the observer measured over one period.
type latencies struct{ get, list []time.Duration }

func (o *observer) end() latencies {
	close(o.stop)
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	l := latencies{get: slices.Clone(o.get), list: slices.Clone(o.list)}
	slices.Sort(l.get)
	slices.Sort(l.list)
	return l
}

func (l latencies) row(label string, idle latencies) string {
	if len(l.get) == 0 || len(l.list) == 0 {
		return fmt.Sprintf("  %-44s (no samples)", label)
	}
	q := func(s []time.Duration, p float64) float64 { return ms(quantile(s, p)) }
	return fmt.Sprintf("  %-44s %4d  %6.1f %6.1f  %6.1f %6.1f   %4.1fx %4.1fx  %4.1fx %4.1fx", label, len(l.get)+len(l.list),
		q(l.get, 0.5), q(l.get, 0.99), q(l.list, 0.5), q(l.list, 0.99),
		q(l.get, 0.5)/q(idle.get, 0.5), q(l.get, 0.99)/q(idle.get, 0.99), q(l.list, 0.5)/q(idle.list, 0.5), q(l.list, 0.99)/q(idle.list, 0.99))
}

// worst is the largest ratio to idle of the four figures.
func (l latencies) worst(idle latencies) float64 {
	if len(l.get) == 0 || len(l.list) == 0 {
		return 0
	}
	var out float64
	for _, p := range []float64{0.5, 0.99} {
		out = max(out, float64(quantile(l.get, p))/float64(quantile(idle.get, p)), float64(quantile(l.list, p))/float64(quantile(idle.list, p)))
	}
	return out
}

// transition is one measured sleep or wake.
type transition struct {
	// first is when the first Deployment was seen written, writes when the last was,
	// settled when the cluster was; all from the start.
	first, writes, settled time.Duration
	lat                    latencies
	tooMany                float64 // 429 responses the manager got
	rejected               float64 // requests the API server's Priority and Fairness rejected, all clients
	patches                float64
	conflicts              float64 // 409 responses the manager got
	reconciles             float64
	server                 serverStats
}

// serverStats are the API server's own figures over a transition: the mean time it
// took to serve a PATCH of a Deployment, and the mean time requests of the
// workload-low priority level (ServiceAccounts: Orderly, the observer) waited in
// Priority and Fairness queues; where its time went (the CPU it and the manager used,
// and what it spent serving the workload writes, the schedules' status writes and
// Events), to tell what a transition costs beside the workload writes.
type serverStats struct {
	patchSum, patchCount, waitSum, waitCount   float64
	serverCPU, managerCPU                      float64
	schedSum, schedCount, eventSum, eventCount float64
}

func (e *benchEnv) serverStats(ctx context.Context) serverStats {
	m, _ := apiServerMetrics(ctx, e.cs) // a failed scrape reads -1
	const seconds, count = "apiserver_request_duration_seconds_sum", "apiserver_request_duration_seconds_count"
	return serverStats{
		patchSum:   m.sum(seconds, `verb="PATCH"`, `resource="deployments"`),
		patchCount: m.sum(count, `verb="PATCH"`, `resource="deployments"`),
		waitSum:    m.sum("apiserver_flowcontrol_request_wait_duration_seconds_sum", `priority_level="workload-low"`),
		waitCount:  m.sum("apiserver_flowcontrol_request_wait_duration_seconds_count", `priority_level="workload-low"`),
		serverCPU:  m.sum("process_cpu_seconds_total"),
		managerCPU: cpuSeconds(e.mgr.pid),
		schedSum:   m.sum(seconds, `verb="PATCH"`, `resource="sleepschedules"`),
		schedCount: m.sum(count, `verb="PATCH"`, `resource="sleepschedules"`),
		eventSum:   m.sum(seconds, `verb="POST"`, `resource="events"`),
		eventCount: m.sum(count, `verb="POST"`, `resource="events"`),
	}
}

func (a serverStats) minus(b serverStats) serverStats {
	return serverStats{a.patchSum - b.patchSum, a.patchCount - b.patchCount, a.waitSum - b.waitSum, a.waitCount - b.waitCount,
		a.serverCPU - b.serverCPU, a.managerCPU - b.managerCPU,
		a.schedSum - b.schedSum, a.schedCount - b.schedCount, a.eventSum - b.eventSum, a.eventCount - b.eventCount}
}

func (a serverStats) String() string {
	per := func(sum, n float64) float64 {
		if n <= 0 {
			return 0
		}
		return sum / n * 1000
	}
	return fmt.Sprintf("PATCH %5.1f ms, APF wait %5.2f ms; CPU: API server %.1fs, manager %.1fs; served: %.0f Deployment PATCHes %.1fs, %.0f SleepSchedule PATCHes %.1fs, %.0f Event POSTs %.1fs",
		per(a.patchSum, a.patchCount), per(a.waitSum, a.waitCount), a.serverCPU, a.managerCPU,
		a.patchCount, a.patchSum, a.schedCount, a.schedSum, a.eventCount, a.eventSum)
}

// sleepRun is the Orderly side of one configuration (one schedule, or one per
// namespace): a sleep and a wake at known instants, with no benchmark write in
// between.
type sleepRun struct {
	sleep, wake transition
}

type benchEnv struct {
	c client.Client
	// base sends the baseline's PATCHes: as Orderly's own ServiceAccount, so that they
	// have Orderly's standing with the API server (authentication, RBAC, Priority and
	// Fairness level) and only Orderly itself is the difference.
	base       client.Client
	cs         *kubernetes.Clientset
	w          *watcher
	obs        *observer
	mgr        *benchManager
	namespaces int
}

// counters are the cumulative figures read before and after a transition.
func (e *benchEnv) counters(ctx context.Context) (tooMany, rejected, patches, conflicts, reconciles float64) {
	m := scrapeMetrics(e.mgr.metricsURL)
	return m.sum(`rest_client_requests_total{`, `code="429"`),
		apiServerCounter(ctx, e.cs, "apiserver_flowcontrol_rejected_requests_total"),
		m.sum(`rest_client_requests_total{`, `method="PATCH"`),
		m.sum(`rest_client_requests_total{`, `code="409"`),
		m.sum(`controller_runtime_reconcile_total{controller="sleepschedule"`)
}

// measure waits until at, then until every Deployment is written (written) and the
// cluster has settled (settled), with the observer running from at until the writes
// are done.
func (e *benchEnv) measure(ctx context.Context, b *testing.B, at time.Time, written, settled func(*appsv1.Deployment) bool) transition {
	b.Helper()
	tm0, rj0, p0, c0, r0 := e.counters(ctx)
	s0 := e.serverStats(ctx)
	time.Sleep(time.Until(at)) // a scheduled instant, not a wait for convergence
	e.obs.start(ctx)
	done, err := e.w.until(ctx, written)
	lat := e.obs.end()
	if err != nil {
		b.Fatalf("%v; manager log: %s", err, e.mgr.logPath)
	}
	first := e.w.first
	s1 := e.serverStats(ctx)
	quiet, err := e.w.until(ctx, settled)
	if err != nil {
		b.Fatal(err)
	}
	// The manager's requests until the cluster settled: its status writes may come
	// after the workload writes.
	tm1, rj1, p1, c1, r1 := e.counters(ctx)
	return transition{first: first.Sub(at), writes: done.Sub(at), settled: quiet.Sub(at), lat: lat, tooMany: tm1 - tm0, rejected: rj1 - rj0,
		patches: p1 - p0, conflicts: c1 - c0, reconciles: r1 - r0, server: s1.minus(s0)}
}

// awakeFrom is an awake window that opens at t (a whole minute, UTC) for an hour.
func awakeFrom(t time.Time) []powerv1alpha1.AwakeWindow {
	end := t.Add(time.Hour)
	return []powerv1alpha1.AwakeWindow{{Days: t.Weekday().String()[:3], From: t.Format("15:04"), To: end.Format("15:04")}}
}

// nextMinute is the first whole minute at least lead from now.
func nextMinute(lead time.Duration) time.Time {
	return time.Now().UTC().Add(lead + time.Minute).Truncate(time.Minute)
}

// runSchedules creates schedules (asleep from sleepAt on), measures the sleep, opens
// an awake window at the next whole minute, measures the wake, and deletes them.
func (e *benchEnv) runSchedules(ctx context.Context, b *testing.B, schedules []*powerv1alpha1.SleepSchedule, sleepAt time.Time) sleepRun {
	b.Helper()
	if err := parallel(len(schedules), baselineWriters, func(i int) error { return e.c.Create(ctx, schedules[i]) }); err != nil {
		b.Fatal(err)
	}
	// Every schedule has seen its next transition before it comes.
	for {
		var list powerv1alpha1.SleepScheduleList
		if err := e.c.List(ctx, &list); err != nil {
			b.Fatal(err)
		}
		ready := 0
		for i := range list.Items {
			if nt := list.Items[i].Status.NextTransition; nt != nil && nt.Time.Equal(sleepAt) {
				ready++
			}
		}
		if ready == len(schedules) {
			break
		}
		if time.Now().After(sleepAt) {
			b.Fatalf("only %d of %d SleepSchedules reported the transition before it came; manager log: %s", ready, len(schedules), e.mgr.logPath)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var run sleepRun
	run.sleep = e.measure(ctx, b, sleepAt, replicasAre(0), podsGone)

	wakeAt := nextMinute(20 * time.Second)
	if err := parallel(len(schedules), baselineWriters, func(i int) error {
		s := schedules[i].DeepCopy()
		patch := client.MergeFrom(s.DeepCopy())
		s.Spec.Awake = awakeFrom(wakeAt)
		return e.c.Patch(ctx, s, patch)
	}); err != nil {
		b.Fatal(err)
	}
	run.wake = e.measure(ctx, b, wakeAt, replicasAre(1), allReady)

	if err := parallel(len(schedules), baselineWriters, func(i int) error { return e.c.Delete(ctx, schedules[i]) }); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Minute); ; {
		var list powerv1alpha1.SleepScheduleList
		if err := e.c.List(ctx, &list); err != nil {
			b.Fatal(err)
		}
		if len(list.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d SleepSchedules still there 5 minutes after deletion", len(list.Items))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return run
}

// runOneSchedule runs one SleepSchedule over every benchmark namespace through a
// sleep and a wake.
func (e *benchEnv) runOneSchedule(ctx context.Context, b *testing.B) sleepRun {
	sleepAt := time.Now().Add(20 * time.Second).Truncate(time.Second)
	return e.runSchedules(ctx, b, []*powerv1alpha1.SleepSchedule{{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-nights"},
		Spec: powerv1alpha1.SleepScheduleSpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{benchLabel: "sleep"}},
			WakeUntil:         &metav1.Time{Time: sleepAt},
		},
	}}, sleepAt)
}

// runPerNamespace runs one SleepSchedule per benchmark namespace through a sleep and
// a wake.
func (e *benchEnv) runPerNamespace(ctx context.Context, b *testing.B) sleepRun {
	sleepAt := time.Now().Add(30 * time.Second).Truncate(time.Second)
	var many []*powerv1alpha1.SleepSchedule
	for i := range e.namespaces {
		many = append(many, &powerv1alpha1.SleepSchedule{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-nights-%03d", i)},
			Spec:       powerv1alpha1.SleepScheduleSpec{Namespaces: []string{sleepNS(i)}, WakeUntil: &metav1.Time{Time: sleepAt}},
		})
	}
	return e.runSchedules(ctx, b, many, sleepAt)
}

// medianOf is the median of xs (the upper one of an even count).
func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func BenchmarkSleepSchedule(b *testing.B) {
	ctx := context.Background()
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	namespaces := envInt("BENCH_NAMESPACES", 200)
	total := envInt("BENCH_DEPLOYMENTS", 2000)
	perNamespace := total / namespaces
	total = perNamespace * namespaces
	memoryWorkloads := envInt("BENCH_MEMORY_WORKLOADS", 10000)
	kubeconfig := benchCluster(ctx, b, "orderly-bench-sleep", total/900+1)
	cfg, c := adminClient(b, kubeconfig)
	cs, err := kubernetes.NewForConfig(unlimited(cfg))
	if err != nil {
		b.Fatal(err)
	}
	e := &benchEnv{c: c, cs: cs, w: &watcher{cs: cs, total: total}, namespaces: namespaces}
	saKubeconfig := managerKubeconfig(ctx, b, kubeconfig)
	e.obs = newObserver(ctx, b, c, kubeconfig)
	saCfg, err := clientcmd.BuildConfigFromFlags("", saKubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	if e.base, err = newBenchClient(saCfg); err != nil {
		b.Fatal(err)
	}

	// The workload: perNamespace Deployments of one Ready pod in each namespace.
	setup := time.Now()
	if err := parallel(namespaces, baselineWriters, func(i int) error {
		return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sleepNS(i), Labels: map[string]string{benchLabel: "sleep"}}})
	}); err != nil {
		b.Fatal(err)
	}
	if err := parallel(total, baselineWriters, func(i int) error {
		return c.Create(ctx, benchDeployment(sleepNS(i%namespaces), fmt.Sprintf("app-%02d", i/namespaces), 1, "sleep"))
	}); err != nil {
		b.Fatal(err)
	}
	if _, err := e.w.until(ctx, allReady); err != nil {
		b.Fatal(err)
	}
	fmt.Printf("setup: %d Deployments Ready in %.0fs\n", total, time.Since(setup).Seconds())

	// Orderly's manager, at its default flags, as its ServiceAccount. It runs during
	// the baseline too, idle, so that both sides see the same cluster.
	e.mgr = startManager(b, saKubeconfig)
	startRSS := rss(e.mgr.pid)

	// Idle: the observer alone.
	e.obs.start(ctx)
	time.Sleep(15 * time.Second) // a measuring period, not a wait for convergence
	idle := e.obs.end()

	// A throw-away sleep and wake first: the first transition after the cluster was
	// built and the manager started ran 2-3x slower than the ones after it (28-35 s
	// against about 12 s) and made round 1's baseline flatter Orderly.
	e.direct(ctx, b, e.base, 0, perNamespace, podsGone)
	e.direct(ctx, b, e.base, 1, perNamespace, allReady)

	// Baseline: the same PATCHes straight to the API server, baselineWriters at once,
	// no client-side limit, as Orderly's ServiceAccount.
	// Run before and after Orderly's, so that a machine that got busier or quieter in
	// between shows, and the ratios are to their mean.
	var base1, base2 sleepRun
	base1.sleep = e.direct(ctx, b, e.base, 0, perNamespace, podsGone)
	base1.wake = e.direct(ctx, b, e.base, 1, perNamespace, allReady)

	// Orderly: one schedule over every namespace, then one schedule per namespace;
	// each asleep from a known instant, then awake from a known whole minute.
	one := e.runOneSchedule(ctx, b)
	peakOne := peakRSS(e.mgr.pid)

	perNS := e.runPerNamespace(ctx, b)
	peakMany := peakRSS(e.mgr.pid)
	anonMany, fileMany := procStatus(e.mgr.pid, "RssAnon:"), procStatus(e.mgr.pid, "RssFile:")
	cpu := cpuSeconds(e.mgr.pid)
	// What of the resident memory is the Go heap (in use, and what the runtime holds).
	heapInuse, heapSys := scrapeCounter(e.mgr.metricsURL, "go_memstats_heap_inuse_bytes"), scrapeCounter(e.mgr.metricsURL, "go_memstats_heap_sys_bytes")

	base2.sleep = e.direct(ctx, b, e.base, 0, perNamespace, podsGone)
	base2.wake = e.direct(ctx, b, e.base, 1, perNamespace, allReady)
	base := sleepRun{sleep: meanOf(base1.sleep, base2.sleep), wake: meanOf(base1.wake, base2.wake)}
	// The case furthest from its target, many small schedules, again: more rounds,
	// each a baseline and Orderly's run one after the other, alternating which goes
	// first, so that the ratio is a median of pairs rather than one noisy sample.
	type pair struct{ base, many sleepRun }
	pairs := []pair{{base: base, many: perNS}}
	for i := 1; i < envInt("BENCH_SLEEP_ROUNDS", 3); i++ {
		var p pair
		if i%2 == 1 {
			p.many = e.runPerNamespace(ctx, b)
		}
		p.base.sleep = e.direct(ctx, b, e.base, 0, perNamespace, podsGone)
		p.base.wake = e.direct(ctx, b, e.base, 1, perNamespace, allReady)
		if i%2 == 0 {
			p.many = e.runPerNamespace(ctx, b)
		}
		pairs = append(pairs, p)
	}
	var sleepRatios, wakeRatios []float64
	for _, p := range pairs {
		sleepRatios = append(sleepRatios, p.many.sleep.writes.Seconds()/p.base.sleep.writes.Seconds())
		wakeRatios = append(wakeRatios, p.many.wake.writes.Seconds()/p.base.wake.writes.Seconds())
	}

	// For reference, the same writes as a cluster administrator: exempt from Priority
	// and Fairness, and authorized without RBAC.
	var admin sleepRun
	admin.sleep = e.direct(ctx, b, e.c, 0, perNamespace, podsGone)
	admin.wake = e.direct(ctx, b, e.c, 1, perNamespace, allReady)

	// Memory like for like with kube-green, which only puts workloads to sleep: a
	// manager that runs the SleepSchedule controller alone (--controllers), through
	// one schedule's sleep and wake. The binary is the same, with every controller's
	// code in it; only the caches and the code that runs differ.
	e.mgr.stop()
	e.mgr = startManager(b, saKubeconfig, "--controllers="+sleepschedule.Name)
	alone := e.runOneSchedule(ctx, b)
	peakAlone := peakRSS(e.mgr.pid)
	anonAlone, fileAlone := procStatus(e.mgr.pid, "RssAnon:"), procStatus(e.mgr.pid, "RssFile:")

	// Memory at memoryWorkloads workloads: more Deployments (at zero replicas, so no
	// pods) in other namespaces, and a new manager that starts with all of them.
	var memStart, memPeak, memSettled int64
	extra := memoryWorkloads - total
	if extra > 0 {
		const perMemNS = 100
		memNamespaces := (extra + perMemNS - 1) / perMemNS
		if err := parallel(memNamespaces, baselineWriters, func(i int) error {
			return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("mem-%03d", i)}})
		}); err != nil {
			b.Fatal(err)
		}
		created := time.Now()
		if err := parallel(extra, baselineWriters, func(i int) error {
			return c.Create(ctx, benchDeployment(fmt.Sprintf("mem-%03d", i/perMemNS), fmt.Sprintf("idle-%03d", i%perMemNS), 0, "memory"))
		}); err != nil {
			b.Fatal(err)
		}
		fmt.Printf("memory: %d more Deployments created in %.0fs\n", extra, time.Since(created).Seconds())
		e.mgr.stop()
		e.mgr = startManager(b, saKubeconfig)
		memStart = rss(e.mgr.pid)
		time.Sleep(30 * time.Second) // a measuring period: the manager runs with the full cache
		memPeak, memSettled = peakRSS(e.mgr.pid), rss(e.mgr.pid)
	}

	fmt.Printf("\nSleepSchedule benchmark: %d Deployments (1 pod each) in %d namespaces; Orderly at its default flags (no client-side rate limit, %d workers, %d writes at once), as its ServiceAccount\n",
		total, namespaces, workersOf(sleepschedule.Controller), sleepschedule.DefaultWriters)
	fmt.Printf("  baseline: the same PATCHes straight to the API server as Orderly's ServiceAccount, %d writers, no client-side limit; the mean of a run before Orderly's\n", baselineWriters)
	fmt.Printf("  and one after (sleep writes %.2fs and %.2fs, wake writes %.2fs and %.2fs)\n",
		base1.sleep.writes.Seconds(), base2.sleep.writes.Seconds(), base1.wake.writes.Seconds(), base2.wake.writes.Seconds())
	fmt.Printf("  for reference, as cluster-admin (exempt from APF, no RBAC): sleep writes %.2fs (settled %.2fs), wake writes %.2fs (settled %.2fs)\n",
		admin.sleep.writes.Seconds(), admin.sleep.settled.Seconds(), admin.wake.writes.Seconds(), admin.wake.settled.Seconds())
	fmt.Printf("  orderly: from the scheduled instant until every Deployment has the target spec.replicas (seen through a watch)\n")
	fmt.Printf("  %-52s %8s %9s %7s %9s %7s\n", "", "baseline", "1 sched.", "ratio", "200 sch.", "ratio")
	row := func(label string, base, one, many time.Duration) {
		fmt.Printf("  %-52s %7.2fs %8.2fs %6.2fx %8.2fs %6.2fx\n", label, base.Seconds(), one.Seconds(), one.Seconds()/base.Seconds(),
			many.Seconds(), many.Seconds()/base.Seconds())
	}
	row("sleep: first Deployment scaled to 0", base.sleep.first, one.sleep.first, perNS.sleep.first)
	row("sleep: every Deployment scaled to 0 (the writes)", base.sleep.writes, one.sleep.writes, perNS.sleep.writes)
	row("sleep: every pod gone (cluster settled)", base.sleep.settled, one.sleep.settled, perNS.sleep.settled)
	row("wake: first Deployment back to 1", base.wake.first, one.wake.first, perNS.wake.first)
	row("wake: every Deployment back to 1 (the writes)", base.wake.writes, one.wake.writes, perNS.wake.writes)
	row("wake: every Deployment Ready (cluster settled)", base.wake.settled, one.wake.settled, perNS.wake.settled)
	fmt.Printf("  target: orderly/baseline <= 1.2x for the writes\n")
	fmt.Printf("  200 schedules, %d rounds of a baseline and Orderly's run (the first above; then alternating which goes first):\n", len(pairs))
	for i, p := range pairs {
		fmt.Printf("    round %d: sleep %.2fs vs %.2fs (%.2fx), wake %.2fs vs %.2fs (%.2fx)\n", i+1,
			p.many.sleep.writes.Seconds(), p.base.sleep.writes.Seconds(), sleepRatios[i], p.many.wake.writes.Seconds(), p.base.wake.writes.Seconds(), wakeRatios[i])
	}
	fmt.Printf("    median ratio: sleep %.2fx, wake %.2fx (target <= 1.2x)\n", medianOf(sleepRatios), medianOf(wakeRatios))
	fmt.Printf("  manager, sleep + wake:                       1 schedule   200 schedules\n")
	fmt.Printf("    PATCH requests (%d workload writes)           %8.0f   %8.0f\n", 2*total, one.sleep.patches+one.wake.patches, perNS.sleep.patches+perNS.wake.patches)
	fmt.Printf("    409 responses (conflicts, retried)           %8.0f   %8.0f\n", one.sleep.conflicts+one.wake.conflicts, perNS.sleep.conflicts+perNS.wake.conflicts)
	fmt.Printf("    reconciles                                   %8.0f   %8.0f\n", one.sleep.reconciles+one.wake.reconciles, perNS.sleep.reconciles+perNS.wake.reconciles)
	fmt.Printf("    429 responses (rest_client_requests_total)   %8.0f   %8.0f\n", one.sleep.tooMany+one.wake.tooMany, perNS.sleep.tooMany+perNS.wake.tooMany)
	fmt.Printf("    requests rejected by APF (all clients)       %8.0f   %8.0f\n", one.sleep.rejected+one.wake.rejected, perNS.sleep.rejected+perNS.wake.rejected)
	fmt.Printf("  API server while the writes run: baseline sleep %s; wake %s\n", base.sleep.server, base.wake.server)
	fmt.Printf("    1 schedule sleep %s; wake %s\n", one.sleep.server, one.wake.server)
	fmt.Printf("    200 schedules sleep %s; wake %s\n", perNS.sleep.server, perNS.wake.server)
	fmt.Printf("  manager CPU time (Orderly's phases and the first baseline)  %7.2fs\n", cpu)
	fmt.Printf("  manager memory: %.1f MiB at start; peak (VmHWM) %.1f MiB after one schedule, %.1f MiB after 200 (kube-green: 74-77 MB = 70.6-73.4 MiB)\n",
		mib(startRSS), mib(peakOne), mib(peakMany))
	fmt.Printf("  Go heap after the 200 schedules: %.1f MiB in use, %.1f MiB held from the OS\n", heapInuse/(1<<20), heapSys/(1<<20))
	fmt.Printf("  resident after the 200 schedules: %.1f MiB anonymous (heap, stacks), %.1f MiB file-backed (the binary's code and read-only data)\n", mib(anonMany), mib(fileMany))
	fmt.Printf("  the SleepSchedule controller alone (--controllers=%s), one schedule: sleep writes %.2fs (%.2fx), wake writes %.2fs (%.2fx);\n",
		sleepschedule.Name, alone.sleep.writes.Seconds(), alone.sleep.writes.Seconds()/base.sleep.writes.Seconds(), alone.wake.writes.Seconds(), alone.wake.writes.Seconds()/base.wake.writes.Seconds())
	fmt.Printf("    peak (VmHWM) %.1f MiB (kube-green: 70.6-73.4 MiB); after the wake %.1f MiB anonymous, %.1f MiB file-backed\n", mib(peakAlone), mib(anonAlone), mib(fileAlone))
	if extra > 0 {
		fmt.Printf("  manager memory with %d Deployments cached: %.1f MiB once ready, peak %.1f MiB, %.1f MiB after 30 s\n", memoryWorkloads, mib(memStart), mib(memPeak), mib(memSettled))
	}
	fmt.Printf("\n  politeness: latency of another client (ServiceAccount %s/observer, %d requests/s, GET and LIST of %d ConfigMaps) while the writes run\n",
		observerNS, observerRate, observerItems)
	fmt.Printf("  %-44s %4s  %13s  %13s   %11s  %11s\n", "", "n", "GET p50/p99", "LIST p50/p99", "GET x idle", "LIST x idle")
	fmt.Println(idle.row("idle (ms)", idle))
	fmt.Println(base1.sleep.lat.row("baseline sleep (Orderly's ServiceAccount)", idle))
	fmt.Println(base1.wake.lat.row("baseline wake (Orderly's ServiceAccount)", idle))
	fmt.Println(admin.sleep.lat.row("direct sleep as cluster-admin", idle))
	fmt.Println(admin.wake.lat.row("direct wake as cluster-admin", idle))
	fmt.Println(one.sleep.lat.row("orderly sleep, 1 schedule", idle))
	fmt.Println(one.wake.lat.row("orderly wake, 1 schedule", idle))
	fmt.Println(perNS.sleep.lat.row("orderly sleep, 200 schedules", idle))
	fmt.Println(perNS.wake.lat.row("orderly wake, 200 schedules", idle))
	worst := max(one.sleep.lat.worst(idle), one.wake.lat.worst(idle), perNS.sleep.lat.worst(idle), perNS.wake.lat.worst(idle))
	fmt.Printf("  target: within 2x of idle (worst Orderly figure: %.1fx); no 429 storm\n", worst)

	b.ReportMetric(one.sleep.writes.Seconds()/base.sleep.writes.Seconds(), "sleep-ratio")
	b.ReportMetric(one.wake.writes.Seconds()/base.wake.writes.Seconds(), "wake-ratio")
	b.ReportMetric(perNS.sleep.writes.Seconds()/base.sleep.writes.Seconds(), "sleep-200-ratio")
	b.ReportMetric(medianOf(sleepRatios), "sleep-200-ratio-median")
	b.ReportMetric(medianOf(wakeRatios), "wake-200-ratio-median")
	b.ReportMetric(mib(peakMany), "peak-MiB")
	b.ReportMetric(mib(peakAlone), "peak-MiB-sleep-alone")
	b.ReportMetric(worst, "latency-x-idle")
	if extra > 0 {
		b.ReportMetric(mib(memPeak), "peak-MiB-10k")
	}
}

// meanOf is the mean of two runs' times; the first run's other figures.
func meanOf(a, b transition) transition {
	a.first, a.writes, a.settled = (a.first+b.first)/2, (a.writes+b.writes)/2, (a.settled+b.settled)/2
	return a
}

// direct scales every benchmark Deployment to `to` with baselineWriters PATCHes at
// once, measuring like measure.
func (e *benchEnv) direct(ctx context.Context, b *testing.B, c client.Client, to int32, perNamespace int, settled func(*appsv1.Deployment) bool) transition {
	b.Helper()
	rj0 := apiServerCounter(ctx, e.cs, "apiserver_flowcontrol_rejected_requests_total")
	s0 := e.serverStats(ctx)
	start := time.Now()
	e.obs.start(ctx)
	if err := scaleAll(ctx, c, e.namespaces, perNamespace, to); err != nil {
		b.Fatal(err)
	}
	done, err := e.w.until(ctx, replicasAre(to))
	lat := e.obs.end()
	if err != nil {
		b.Fatal(err)
	}
	first := e.w.first
	s1 := e.serverStats(ctx)
	rj1 := apiServerCounter(ctx, e.cs, "apiserver_flowcontrol_rejected_requests_total")
	quiet, err := e.w.until(ctx, settled)
	if err != nil {
		b.Fatal(err)
	}
	return transition{first: first.Sub(start), writes: done.Sub(start), settled: quiet.Sub(start), lat: lat, rejected: rj1 - rj0, server: s1.minus(s0)}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
