//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

// selfServiceTenant is a Tenant whose owner may create namespaces named name-*.
func selfServiceTenant(name string) *tenancyv1alpha1.Tenant {
	return &tenancyv1alpha1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: tenancyv1alpha1.TenantSpec{
			Owners:        []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: name + "-owner"}},
			Namespaces:    []tenancyv1alpha1.TenantNamespace{{Name: name + "-main"}},
			SelfService:   &tenancyv1alpha1.TenantSelfService{MaxNamespaces: 100, NamePrefix: name + "-"},
			NetworkPolicy: tenancyv1alpha1.TenantNetworkPolicy{Isolation: tenancyv1alpha1.IsolationNone},
		},
	}
}

// timedCreates creates n namespaces one after another and returns each create's
// latency as the client saw it; opts (a dry run) are passed to every create.
func timedCreates(ctx context.Context, b *testing.B, n int, c func(i int) (client.Client, *corev1.Namespace), opts ...client.CreateOption) []time.Duration {
	b.Helper()
	out := make([]time.Duration, 0, n)
	for i := range n {
		cl, ns := c(i)
		start := time.Now()
		if err := cl.Create(ctx, ns, opts...); err != nil {
			b.Fatalf("creating namespace %s: %v", ns.Name, err)
		}
		out = append(out, time.Since(start))
	}
	return out
}

// BenchmarkTenantSelfServiceAdmission: the latency of a namespace create, one at a
// time, with no admission policy (before any Tenant exists) against the same creates by
// tenant owners once 500 self-service Tenants exist (one generated binding each, the
// Tenant as its parameter), on one cluster in one run. Both sides are users acting
// through impersonation: the baseline a user granted create on namespaces by a
// ClusterRole, then each Tenant's owner. Server-side dry runs measure admission alone
// (nothing is created, so Orderly has nothing to do); real creates add what the API
// server does while Orderly sets up each new namespace.
func BenchmarkTenantSelfServiceAdmission(b *testing.B) {
	ctx := context.Background()
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	tenants := envInt("BENCH_TENANTS", 500)
	samples := envInt("BENCH_SAMPLES", 200)
	kubeconfig := benchCluster(ctx, b, "orderly-bench-ssadm", 1)
	cfg, c := adminClient(b, kubeconfig)
	saKubeconfig := managerKubeconfig(ctx, b, kubeconfig)

	// Each user's client, as its own kubeconfig would be (impersonated by the admin).
	users := map[string]client.Client{}
	as := func(user string) client.Client {
		if cl, ok := users[user]; ok {
			return cl
		}
		uc := rest.CopyConfig(cfg)
		uc.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
		cl, err := newBenchClient(uc)
		if err != nil {
			b.Fatal(err)
		}
		users[user] = cl
		return cl
	}
	owner := func(t int) client.Client { return as(fmt.Sprintf("ss%04d-owner", t)) }
	creator := as("bench-creator")
	for _, obj := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "bench-creator"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-creator"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "bench-creator"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bench-creator"}}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			b.Fatal(err)
		}
	}
	plain := func(prefix string) func(int) (client.Client, *corev1.Namespace) {
		return func(i int) (client.Client, *corev1.Namespace) {
			return creator, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%04d", prefix, i)}}
		}
	}
	// Warm the API server's namespace path and the RBAC cache; then the baseline.
	deadline := time.Now().Add(time.Minute)
	for creator.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "warm"}}, client.DryRunAll) != nil {
		if time.Now().After(deadline) {
			b.Fatal("bench-creator never got to create namespaces")
		}
		time.Sleep(time.Second)
	}
	_ = timedCreates(ctx, b, 20, plain("warm"), client.DryRunAll)
	baseDry := timedCreates(ctx, b, samples, plain("base"), client.DryRunAll)
	baseReal := timedCreates(ctx, b, samples, plain("base"))

	mgr := startManager(b, saKubeconfig)
	start := time.Now()
	if err := parallel(tenants, 8, func(i int) error {
		return c.Create(ctx, selfServiceTenant(fmt.Sprintf("ss%04d", i)))
	}); err != nil {
		b.Fatal(err)
	}
	waitTenants(ctx, b, c, tenancyv1alpha1.ConditionSelfServiceReady, tenants, start, mgr)
	setup := time.Since(start)
	// Let the manager's follow-up work (status, quotas) finish before measuring.
	time.Sleep(15 * time.Second)

	// Until the API server has loaded the policies, a create that does not fit is
	// admitted: dry runs until one is refused.
	deadline = time.Now().Add(2 * time.Minute)
	for owner(0).Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Labels: map[string]string{tenancyv1alpha1.TenantLabel: "ss0000"}}}, client.DryRunAll) == nil {
		if time.Now().After(deadline) {
			b.Fatal("the self-service policy never judged a create")
		}
		time.Sleep(time.Second)
	}
	// Spread over the tenants, so that the creates meet different bindings' Tenants.
	step := max(tenants/samples, 1)
	byOwner := func(prefix string) func(int) (client.Client, *corev1.Namespace) {
		return func(i int) (client.Client, *corev1.Namespace) {
			t := (i * step) % tenants
			return owner(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name:   fmt.Sprintf("ss%04d-%s%03d", t, prefix, i),
				Labels: map[string]string{tenancyv1alpha1.TenantLabel: fmt.Sprintf("ss%04d", t)},
			}}
		}
	}
	for i := range tenants { // every owner's client made and its first request sent
		_ = owner(i).Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ss%04d-warm", i), Labels: map[string]string{tenancyv1alpha1.TenantLabel: fmt.Sprintf("ss%04d", i)}}}, client.DryRunAll)
	}
	ownerDry := timedCreates(ctx, b, samples, byOwner("d"), client.DryRunAll)
	plainDry := timedCreates(ctx, b, samples, plain("after"), client.DryRunAll)
	refused := make([]time.Duration, 0, samples)
	for i := range samples {
		t := (i * step) % tenants
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ss%04d-x%03d", t, i), Labels: map[string]string{tenancyv1alpha1.TenantLabel: fmt.Sprintf("ss%04d", t)}}}
		s := time.Now()
		if err := owner((t+1)%tenants).Create(ctx, ns, client.DryRunAll); err == nil {
			b.Fatalf("a non-owner was admitted to create %s", ns.Name)
		}
		refused = append(refused, time.Since(s))
	}
	ownerReal := timedCreates(ctx, b, samples, byOwner("n"))

	row := func(what string, ds []time.Duration, base []time.Duration) {
		p50, p99 := percentiles(ds)
		b50, b99 := percentiles(base)
		fmt.Printf("  %-52s p50 %6.1f ms  p99 %6.1f ms   (%.2fx / %.2fx)\n", what, ms(p50), ms(p99), p50.Seconds()/b50.Seconds(), p99.Seconds()/b99.Seconds())
	}
	fmt.Printf("\nSelf-service admission benchmark: namespace creates one at a time, %d each, as users (impersonated); %d self-service Tenants (one policy binding and one owners' ClusterRole each); Orderly at its default flags\n", samples, tenants)
	fmt.Printf("  Tenants created and SelfServiceReady: %.2fs\n", setup.Seconds())
	fmt.Printf("  dry runs (admission alone), ratio to the baseline dry run:\n")
	row("baseline: user with create, no policy", baseDry, baseDry)
	row("owner, admitted by the policy", ownerDry, baseDry)
	row("user with create, unlabelled, policies in place", plainDry, baseDry)
	row("non-owner, refused by the policy", refused, baseDry)
	fmt.Printf("  real creates (Orderly sets each new namespace up meanwhile), ratio to the baseline creates:\n")
	row("baseline: user with create, no policy", baseReal, baseReal)
	row("owner, admitted by the policy", ownerReal, baseReal)
	b50, _ := percentiles(baseDry)
	o50, o99 := percentiles(ownerDry)
	b.ReportMetric(o50.Seconds()/b50.Seconds(), "dry-p50-ratio")
	b.ReportMetric(ms(o99), "owner-dry-p99-ms")
}
