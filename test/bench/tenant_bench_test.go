//go:build bench

// Package bench measures Orderly's controllers on the full local cluster. Each
// benchmark prints its figures and the ratio to a baseline measured in the same run;
// nothing here asserts wall-clock limits.
package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/controller/tenancy/tenant"
)

// benchTenant is the Tenant used by the benchmark: two namespaces, owners, quota,
// limits and the default isolation policy (5 objects per namespace).
func benchTenant(name string) *tenancyv1alpha1.Tenant {
	return &tenancyv1alpha1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: tenancyv1alpha1.TenantSpec{
			Owners:     []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: name + "-owner"}},
			Namespaces: []tenancyv1alpha1.TenantNamespace{{Name: name + "-dev"}, {Name: name + "-prod"}},
			CostCenter: "cc-bench",
			Quota:      &tenancyv1alpha1.TenantQuota{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("50")}},
			LimitRange: &tenancyv1alpha1.TenantLimitRange{Default: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}},
		},
	}
}

// baselineObjects is what Orderly creates for benchTenant(name), written by hand.
func baselineObjects(name string) []client.Object {
	var objs []client.Object
	for _, ns := range []string{name + "-dev", name + "-prod"} {
		lbl := map[string]string{tenancyv1alpha1.TenantLabel: name, tenancyv1alpha1.CostCenterLabel: "cc-bench"}
		objs = append(objs,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: lbl}},
			&rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orderly-tenant-owners"},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "orderly-tenant-admin"},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: "rbac.authorization.k8s.io", Name: name + "-owner"}},
			},
			&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orderly-tenant-quota"},
				Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("50")}}},
			&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orderly-tenant-limits"},
				Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Default: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}},
			&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orderly-tenant-isolation"},
				Spec: networkingv1.NetworkPolicySpec{
					PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
					Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
						NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{tenancyv1alpha1.TenantLabel: name}},
					}}}},
				}},
		)
	}
	// The owners' ClusterRole (get on their Tenant) and its binding.
	role := "orderly-tenant:" + name
	objs = append(objs,
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{tenancyv1alpha1.GroupVersion.Group}, Resources: []string{"tenants"}, Verbs: []string{"get"}, ResourceNames: []string{name}},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: "rbac.authorization.k8s.io", Name: name + "-owner"}}},
	)
	return objs
}

func BenchmarkTenants(b *testing.B) {
	ctx := context.Background()
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	tenants := envInt("BENCH_TENANTS", 500)
	kubeconfig := benchCluster(ctx, b, "orderly-bench-tenant", 1)
	_, c := adminClient(b, kubeconfig)
	saKubeconfig := managerKubeconfig(ctx, b, kubeconfig)
	// The baseline writes as many Tenants at once as the manager reconciles at its
	// defaults, neither side with a client-side rate limit, and as the manager's
	// ServiceAccount: the API server checks its RBAC writes (bind, escalation) the
	// same way as Orderly's, which it does not for an administrator.
	writers := workersOf(tenant.Controller)
	_, asManager := adminClient(b, saKubeconfig)

	// Baseline: the same objects, written straight to the API server.
	start := time.Now()
	if err := parallel(tenants, writers, func(i int) error {
		for _, obj := range baselineObjects(fmt.Sprintf("base-%04d", i)) {
			if err := asManager.Create(ctx, obj); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	baseline := time.Since(start)

	// The API server's RBAC authorizer walks every ClusterRoleBinding on each request
	// of a non-administrator, so the baseline's 500 owners' bindings would slow every
	// request of Orderly's run (the baseline ran with 0 to 500, Orderly would run with
	// 500 to 1,000). Its ClusterRoles and bindings go before Orderly starts; its
	// namespaces stay (a namespace's RoleBindings are checked only in that namespace).
	if err := parallel(tenants, writers, func(i int) error {
		for _, obj := range baselineObjects(fmt.Sprintf("base-%04d", i)) {
			if obj.GetNamespace() == "" && !isNamespace(obj) {
				if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}

	// Orderly at its default flags.
	mgr := startManager(b, saKubeconfig)

	start = time.Now()
	if err := parallel(tenants, writers, func(i int) error {
		return c.Create(ctx, benchTenant(fmt.Sprintf("bench-%04d", i)))
	}); err != nil {
		b.Fatal(err)
	}
	created := time.Since(start)
	orderly := waitTenants(ctx, b, c, tenancyv1alpha1.ConditionReady, tenants, start, mgr).Sub(start)
	peak := peakRSS(mgr.pid)
	cpu := cpuSeconds(mgr.pid)
	if os.Getenv("BENCH_DEBUG") != "" {
		for _, m := range []string{"GET", "POST", "PATCH", "PUT", "DELETE"} {
			n := scrapeCounter(mgr.metricsURL, `rest_client_requests_total{code="`, `method="`+m+`"`)
			secs := scrapeCounter(mgr.metricsURL, `rest_client_request_duration_seconds_sum{`, `verb="`+m+`"`)
			fmt.Printf("  manager requests %-6s %8.0f  mean %6.1f ms\n", m, n, 1000*secs/n)
		}
	}
	reconciles := scrapeCounter(mgr.metricsURL, `controller_runtime_reconcile_total{controller="tenant"`)

	objects := tenants * len(baselineObjects("x"))
	fmt.Printf("\nTenant benchmark: %d Tenants x 2 namespaces and the owners' ClusterRole (%d objects); Orderly at its default flags (no client-side rate limit, %d Tenant workers), as its ServiceAccount\n", tenants, objects, writers)
	fmt.Printf("  baseline writers: %d (the manager's Tenant workers) as the manager's ServiceAccount, no client-side rate limit\n", writers)
	fmt.Printf("  baseline: same objects straight through the API   %8.2fs  (%.0f objects/s)\n", baseline.Seconds(), float64(objects)/baseline.Seconds())
	fmt.Printf("  orderly:  Tenants created                         %8.2fs\n", created.Seconds())
	fmt.Printf("  orderly:  all Tenants Ready                       %8.2fs  (%.0f objects/s)\n", orderly.Seconds(), float64(objects)/orderly.Seconds())
	fmt.Printf("  manager CPU time                                  %8.2fs\n", cpu)
	fmt.Printf("  reconciles per Tenant                             %8.1f\n", reconciles/float64(tenants))
	fmt.Printf("  ratio orderly/baseline                            %8.2fx  (target <= 1.5x)\n", orderly.Seconds()/baseline.Seconds())
	fmt.Printf("  manager peak memory (VmHWM)                       %8.1f MiB (target < 150 MiB)\n", float64(peak)/(1<<20))
	b.ReportMetric(orderly.Seconds()/baseline.Seconds(), "ratio")
	b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
}

func isNamespace(obj client.Object) bool {
	_, ok := obj.(*corev1.Namespace)
	return ok
}

// waitTenants waits until want Tenants have condition True, for at most 20 minutes
// from start, and returns when the last one became True. It follows a watch rather
// than listing every Tenant again and again: polling 500 Tenants with their status
// loads the API server the benchmark measures, which the baseline's run does not.
func waitTenants(ctx context.Context, b *testing.B, c client.WithWatch, condition string, want int, start time.Time, mgr *benchManager) time.Time {
	b.Helper()
	ready := map[string]bool{}
	note := func(t *tenancyv1alpha1.Tenant) {
		ready[t.Name] = meta.IsStatusConditionTrue(t.Status.Conditions, condition)
	}
	count := func() int {
		n := 0
		for _, ok := range ready {
			if ok {
				n++
			}
		}
		return n
	}
	deadline := time.NewTimer(20*time.Minute - time.Since(start))
	defer deadline.Stop()
	for {
		// (Re)list, then watch from the list's version; a closed watch starts over.
		var list tenancyv1alpha1.TenantList
		if err := c.List(ctx, &list); err != nil {
			b.Fatal(err)
		}
		for i := range list.Items {
			note(&list.Items[i])
		}
		if count() == want {
			return time.Now()
		}
		w, err := c.Watch(ctx, &tenancyv1alpha1.TenantList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
		if err != nil {
			b.Fatal(err)
		}
	events:
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					break events
				}
				if t, isTenant := ev.Object.(*tenancyv1alpha1.Tenant); isTenant {
					note(t)
					if count() == want {
						w.Stop()
						return time.Now()
					}
				}
			case <-deadline.C:
				w.Stop()
				b.Fatalf("only %d of %d Tenants %s after 20 minutes; manager log: %s", count(), want, condition, mgr.logPath)
			}
		}
		w.Stop()
	}
}

// quotaBenchPod is a pod for the totalQuota benchmark (it never needs to run: the
// quota is charged when the API server admits it).
func quotaBenchPod(ns string, i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("burst-%d", i)},
		Spec: corev1.PodSpec{
			Containers:  []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
			Tolerations: []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		},
	}
}

// BenchmarkTenantTotalQuotaRebalance: one Tenant with totalQuota pods: 500 across 50
// namespaces (10 each); a burst of 5 pods in each of 25 namespaces; the time until
// Orderly has moved the headroom (every quota's spec.hard at used + the equal share of
// what is left, 7 or 8) and until the quota controller has published it (status.hard),
// against the same 50 quota writes made straight to the API server.
func BenchmarkTenantTotalQuotaRebalance(b *testing.B) {
	ctx := context.Background()
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	namespaces := envInt("BENCH_QUOTA_NAMESPACES", 50)
	busy, perNS := namespaces/2, 5
	total := int64(namespaces * 10)
	kubeconfig := benchCluster(ctx, b, "orderly-bench-tquota", 1)
	_, c := adminClient(b, kubeconfig)
	saKubeconfig := managerKubeconfig(ctx, b, kubeconfig)
	writers := workersOf(tenant.Controller)
	nsName := func(i int) string { return fmt.Sprintf("tq-%03d", i) }

	// Baseline: 50 quota limits changed straight through the API server.
	for i := range namespaces {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("base-%03d", i)}}); err != nil {
			b.Fatal(err)
		}
		if err := c.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("base-%03d", i), Name: "q"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}}); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	if err := parallel(namespaces, writers, func(i int) error {
		q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("base-%03d", i), Name: "q"}}
		return c.Patch(ctx, q, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"hard":{"pods":"12"}}}`)))
	}); err != nil {
		b.Fatal(err)
	}
	baseline := time.Since(start)

	mgr := startManager(b, saKubeconfig)
	tn := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "tq"}, Spec: tenancyv1alpha1.TenantSpec{
		TotalQuota: &tenancyv1alpha1.TenantTotalQuota{Hard: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(total, resource.DecimalSI)}},
	}}
	for i := range namespaces {
		tn.Spec.Namespaces = append(tn.Spec.Namespaces, tenancyv1alpha1.TenantNamespace{Name: nsName(i)})
	}
	if err := c.Create(ctx, tn); err != nil {
		b.Fatal(err)
	}
	// settled reports whether every quota's spec.hard is want(i), and whether the quota
	// controller has published it.
	settled := func(want func(i int) int64) (specDone, published bool) {
		var list corev1.ResourceQuotaList
		if err := c.List(ctx, &list, client.MatchingLabels{tenancyv1alpha1.TenantLabel: "tq"}); err != nil {
			b.Fatal(err)
		}
		got := map[string]corev1.ResourceQuota{}
		for _, q := range list.Items {
			got[q.Namespace] = q
		}
		specDone, published = true, true
		for i := range namespaces {
			q, ok := got[nsName(i)]
			h, st := q.Spec.Hard[corev1.ResourcePods], q.Status.Hard[corev1.ResourcePods]
			if !ok || h.Value() != want(i) {
				specDone = false
			}
			if !ok || st.Cmp(h) != 0 {
				published = false
			}
		}
		return specDone, published
	}
	waitFor := func(what string, want func(i int) int64, from time.Time) (spec, pub time.Duration) {
		for {
			s, p := settled(want)
			if s && spec == 0 {
				spec = time.Since(from)
			}
			if s && p {
				return spec, time.Since(from)
			}
			if time.Since(from) > 10*time.Minute {
				b.Fatalf("%s: quotas not settled after 10 minutes; manager log: %s", what, mgr.logPath)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("equal split", func(int) int64 { return 10 }, time.Now())

	// The burst: 5 pods in each of the first 25 namespaces, all at once.
	start = time.Now()
	if err := parallel(busy*perNS, 2*writers, func(j int) error {
		return c.Create(ctx, quotaBenchPod(nsName(j%busy), j/busy))
	}); err != nil {
		b.Fatal(err)
	}
	burst := time.Since(start)
	left := total - int64(busy*perNS)
	share, extra := left/int64(namespaces), left%int64(namespaces)
	want := func(i int) int64 {
		w := share
		if int64(i) < extra {
			w++
		}
		if i < busy {
			w += int64(perNS)
		}
		return w
	}
	spec, published := waitFor("rebalance", want, start)
	reconciles := scrapeCounter(mgr.metricsURL, `controller_runtime_reconcile_total{controller="tenant"`)

	fmt.Printf("\nTenant totalQuota benchmark: %d namespaces, pods %d in total, a burst of %d pods in %d namespaces; Orderly at its default flags, as its ServiceAccount\n",
		namespaces, total, busy*perNS, busy)
	fmt.Printf("  baseline: %d quota limits patched straight through the API   %8.3fs\n", namespaces, baseline.Seconds())
	fmt.Printf("  burst: pods created                                          %8.3fs\n", burst.Seconds())
	fmt.Printf("  orderly: every spec.hard at its new share (from the burst)   %8.3fs\n", spec.Seconds())
	fmt.Printf("  cluster: every status.hard published by the quota controller %8.3fs\n", published.Seconds())
	fmt.Printf("  Tenant reconciles in the run                                 %8.0f\n", reconciles)
	fmt.Printf("  ratio orderly (spec.hard, minus the burst)/baseline          %8.2fx\n", (spec-burst).Seconds()/baseline.Seconds())
	b.ReportMetric(spec.Seconds(), "rebalance-s")
	b.ReportMetric((spec-burst).Seconds()/baseline.Seconds(), "ratio")
}
