//go:build integration

package tenant

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

func (b *tenantBuilder) totalQuota(kv ...string) *tenancyv1alpha1.Tenant {
	b.t.Spec.TotalQuota = &tenancyv1alpha1.TenantTotalQuota{Hard: corev1.ResourceList{}}
	for i := 0; i+1 < len(kv); i += 2 {
		b.t.Spec.TotalQuota.Hard[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return b.t
}

// quotaPods is spec.hard pods of the tenant's quota in ns, or "" when there is none.
func quotaPods(ns string) string {
	var q corev1.ResourceQuota
	if err := k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: quotaName}, &q); err != nil {
		return ""
	}
	p, ok := q.Spec.Hard[corev1.ResourcePods]
	if !ok {
		return ""
	}
	return p.String()
}

// quotaSim plays what envtest lacks: kube-controller-manager's quota controller,
// which copies spec.hard to status.hard (while running), and the API server's quota
// admission, which admits a pod only while status.used stays within status.hard.
type quotaSim struct {
	t       *testing.T
	syncing atomic.Bool
}

func newQuotaSim(t *testing.T, namespaces ...string) *quotaSim {
	s := &quotaSim{t: t}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if s.syncing.Load() {
				for _, ns := range namespaces {
					_ = s.update(ns, func(q *corev1.ResourceQuota) bool {
						if equality.Semantic.DeepEqual(q.Status.Hard, q.Spec.Hard) {
							return false
						}
						q.Status.Hard = q.Spec.Hard.DeepCopy()
						return true
					})
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return s
}

// update changes the quota of ns in status; change says whether it changed anything.
func (s *quotaSim) update(ns string, change func(*corev1.ResourceQuota) bool) error {
	var q corev1.ResourceQuota
	if err := k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: quotaName}, &q); err != nil {
		return err
	}
	if q.Status.Used == nil {
		q.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}
	}
	if !change(&q) {
		return nil
	}
	return k.Status().Update(context.Background(), &q)
}

// sync copies spec.hard to status.hard of ns once.
func (s *quotaSim) sync(ns string) {
	s.t.Helper()
	NewWithT(s.t).Eventually(func() error {
		return s.update(ns, func(q *corev1.ResourceQuota) bool { q.Status.Hard = q.Spec.Hard.DeepCopy(); return true })
	}, timeout, poll).Should(Succeed())
}

// admit adds one pod to ns if the enforced limit allows it, as quota admission does.
func (s *quotaSim) admit(ns string) bool {
	admitted := false
	err := s.update(ns, func(q *corev1.ResourceQuota) bool {
		used, hard := q.Status.Used[corev1.ResourcePods], q.Status.Hard[corev1.ResourcePods]
		if _, ok := q.Status.Hard[corev1.ResourcePods]; !ok || used.Value()+1 > hard.Value() {
			return false
		}
		q.Status.Used[corev1.ResourcePods] = *resource.NewQuantity(used.Value()+1, resource.DecimalSI)
		admitted = true
		return true
	})
	return err == nil && admitted
}

// setUsed sets the pods ns uses, as the quota controller does when it recounts.
func (s *quotaSim) setUsed(ns string, pods int64) {
	s.t.Helper()
	NewWithT(s.t).Eventually(func() error {
		return s.update(ns, func(q *corev1.ResourceQuota) bool {
			q.Status.Used[corev1.ResourcePods] = *resource.NewQuantity(pods, resource.DecimalSI)
			return true
		})
	}, timeout, poll).Should(Succeed())
}

// used is the pods ns uses.
func (s *quotaSim) used(ns string) int64 {
	var q corev1.ResourceQuota
	if err := k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: quotaName}, &q); err != nil {
		return 0
	}
	u := q.Status.Used[corev1.ResourcePods]
	return u.Value()
}

func expectPods(t *testing.T, want map[string]string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		for ns, w := range want {
			g.Expect(quotaPods(ns)).To(Equal(w), "pods limit of %s", ns)
		}
	}, timeout, poll).Should(Succeed())
}

func TestTenantTotalQuotaMovesHeadroomAsUsageChanges(t *testing.T) {
	tn := newTenant("tq", "tq-a", "tq-b").totalQuota("pods", "4")
	NewWithT(t).Expect(k.Create(context.Background(), tn)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), tn) })
	sim := newQuotaSim(t, "tq-a", "tq-b", "tq-c")

	// Nothing used: an equal split.
	expectPods(t, map[string]string{"tq-a": "2", "tq-b": "2"})
	sim.sync("tq-a")
	sim.sync("tq-b")

	// tq-a uses its 2: tq-b is lowered to its share of what is left at once, but tq-a
	// is raised only once tq-b's lower limit is enforced (status.hard).
	for range 2 {
		NewWithT(t).Expect(sim.admit("tq-a")).To(BeTrue())
	}
	NewWithT(t).Expect(sim.admit("tq-a")).To(BeFalse(), "a third pod admitted over the limit of 2")
	expectPods(t, map[string]string{"tq-a": "2", "tq-b": "1"})
	NewWithT(t).Consistently(func() string { return quotaPods("tq-a") }, 2*time.Second, poll).Should(Equal("2"),
		"tq-a was raised before tq-b's lowered limit was enforced")
	sim.sync("tq-b")
	expectPods(t, map[string]string{"tq-a": "3", "tq-b": "1"})

	// From here the quota controller runs. Both namespaces create pods, one after the
	// other, until neither is admitted for a while: the tenant gets all of its 4 and
	// never more.
	sim.syncing.Store(true)
	last := time.Now()
	for time.Since(last) < 3*time.Second {
		for _, ns := range []string{"tq-a", "tq-b"} {
			if sim.admit(ns) {
				last = time.Now()
			}
		}
		ua, ub := sim.used("tq-a"), sim.used("tq-b")
		NewWithT(t).Expect(ua+ub).To(BeNumerically("<=", 4), "the tenant uses %d pods, over its total of 4", ua+ub)
		time.Sleep(20 * time.Millisecond)
	}
	ua, ub := sim.used("tq-a"), sim.used("tq-b")
	NewWithT(t).Expect(ua+ub).To(BeEquivalentTo(4), "the tenant could not use all of its total")
	NewWithT(t).Eventually(func(g Gomega) {
		got := getTenant(g, "tq")
		g.Expect(got.Status.TotalQuota).NotTo(BeNil())
		used := got.Status.TotalQuota.Used[corev1.ResourcePods]
		g.Expect(used.String()).To(Equal("4"))
		c := condition(got, tenancyv1alpha1.ConditionTotalQuotaAvailable)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(ReasonTotalQuotaReached))
		g.Expect(c.Message).To(ContainSubstring("pods 4/4"))
		g.Expect(testutil.ToFloat64(totalQuotaUsed.WithLabelValues("tq", "pods"))).To(Equal(4.0))
		g.Expect(testutil.ToFloat64(totalQuotaHard.WithLabelValues("tq", "pods"))).To(Equal(4.0))
		g.Expect(got.Status.Namespaces).To(HaveLen(2))
		want := map[string]int64{"tq-a": ua, "tq-b": ub}
		for _, ns := range got.Status.Namespaces {
			g.Expect(ns.Quota).NotTo(BeNil(), ns.Name)
			u, h := ns.Quota.Used[corev1.ResourcePods], ns.Quota.Hard[corev1.ResourcePods]
			g.Expect(u.Value()).To(Equal(want[ns.Name]), ns.Name)
			g.Expect(h.Value()).To(Equal(want[ns.Name]), "at the limit every namespace's limit is what it uses: %s", ns.Name)
		}
		g.Expect(eventReasons(g, "tq")).To(ContainElement(ReasonTotalQuotaReached))
		// At the limit is not a failure of the Tenant.
		g.Expect(condition(got, tenancyv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
	}, timeout, poll).Should(Succeed())

	// tq-a's pods go: its headroom is shared out again.
	sim.setUsed("tq-a", 0)
	left := 4 - ub
	expectPods(t, map[string]string{
		"tq-a": resource.NewQuantity((left+1)/2, resource.DecimalSI).String(),
		"tq-b": resource.NewQuantity(ub+left/2, resource.DecimalSI).String(),
	})
	NewWithT(t).Eventually(func(g Gomega) {
		c := condition(getTenant(g, "tq"), tenancyv1alpha1.ConditionTotalQuotaAvailable)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	}, timeout, poll).Should(Succeed())

	// A third namespace gets a share at once; the others are lowered to make room.
	updateTenant(t, "tq", func(tn *tenancyv1alpha1.Tenant) {
		tn.Spec.Namespaces = append(tn.Spec.Namespaces, tenancyv1alpha1.TenantNamespace{Name: "tq-c"})
	})
	NewWithT(t).Eventually(func(g Gomega) {
		var sum int64
		for _, ns := range []string{"tq-a", "tq-b", "tq-c"} {
			p := quotaPods(ns)
			g.Expect(p).NotTo(BeEmpty(), ns)
			v := resource.MustParse(p)
			sum += v.Value()
		}
		g.Expect(sum).To(BeEquivalentTo(4))
		g.Expect(quotaPods("tq-c")).NotTo(Equal("0"))
	}, timeout, poll).Should(Succeed())
}

func TestTenantTotalQuotaCombinesWithQuota(t *testing.T) {
	b := newTenant("tqc", "tqc-a", "tqc-b")
	b.t.Spec.Quota = &tenancyv1alpha1.TenantQuota{Hard: corev1.ResourceList{
		corev1.ResourcePods:        resource.MustParse("1"),
		corev1.ResourceRequestsCPU: resource.MustParse("2"),
	}}
	tn := b.totalQuota("pods", "10", "requests.memory", "3Gi")
	NewWithT(t).Expect(k.Create(context.Background(), tn)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), tn) })

	NewWithT(t).Eventually(func(g Gomega) {
		for _, ns := range []string{"tqc-a", "tqc-b"} {
			var q corev1.ResourceQuota
			g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: quotaName}, &q)).To(Succeed())
			pods, cpu, mem := q.Spec.Hard[corev1.ResourcePods], q.Spec.Hard[corev1.ResourceRequestsCPU], q.Spec.Hard[corev1.ResourceRequestsMemory]
			// pods: the smaller of quota.hard (1) and the share (5).
			g.Expect(pods.String()).To(Equal("1"), ns)
			g.Expect(cpu.String()).To(Equal("2"), ns)
			g.Expect(mem.Cmp(resource.MustParse("1536Mi"))).To(BeZero(), "%s requests.memory %s", ns, mem.String())
		}
	}, timeout, poll).Should(Succeed())

	// Removing totalQuota leaves quota.hard alone, and status forgets the total.
	updateTenant(t, "tqc", func(tn *tenancyv1alpha1.Tenant) { tn.Spec.TotalQuota = nil })
	NewWithT(t).Eventually(func(g Gomega) {
		var q corev1.ResourceQuota
		g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: "tqc-a", Name: quotaName}, &q)).To(Succeed())
		g.Expect(q.Spec.Hard).To(HaveLen(2))
		got := getTenant(g, "tqc")
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(got.Status.TotalQuota).To(BeNil())
		g.Expect(condition(got, tenancyv1alpha1.ConditionTotalQuotaAvailable)).To(BeNil())
		// The total's series go with it.
		g.Expect(tenantSeries(totalQuotaHard, "tqc")).To(BeZero())
	}, timeout, poll).Should(Succeed())
}

func TestTenantTotalQuotaValidation(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ hard, msg string }{
		{`{"pods": "-1"}`, "must not be negative"},
		{`{"pods": "four"}`, "spec.totalQuota.hard"},
		{`{}`, "spec.totalQuota.hard"},
	} {
		err := createRaw(ctx, `{"apiVersion":"tenancy.orderly.dev/v1alpha1","kind":"Tenant","metadata":{"name":"tq-invalid"},
			"spec":{"namespaces":[{"name":"tq-invalid"}],"totalQuota":{"hard":`+tc.hard+`}}}`)
		NewWithT(t).Expect(err).To(HaveOccurred(), tc.hard)
		NewWithT(t).Expect(err.Error()).To(ContainSubstring(tc.msg), tc.hard)
	}
	err := createRaw(ctx, `{"apiVersion":"tenancy.orderly.dev/v1alpha1","kind":"Tenant","metadata":{"name":"tq-valid"},
		"spec":{"namespaces":[{"name":"tq-valid"}],"totalQuota":{"hard":{"pods": 4, "requests.cpu": "1500m", "requests.memory": "8Gi"}}}}`)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_ = k.Delete(ctx, &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "tq-valid"}})
	})
}

// tenantSeries counts the series of vec labelled with tenant.
func tenantSeries(vec prometheus.Collector, tenant string) int {
	ch := make(chan prometheus.Metric, 64)
	go func() { vec.Collect(ch); close(ch) }()
	n := 0
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil {
			continue
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "tenant" && l.GetValue() == tenant {
				n++
			}
		}
	}
	return n
}
