//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

func quotaTestPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "burst"}},
		Spec: corev1.PodSpec{
			Containers:  []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
			Tolerations: []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		},
	}
}

// livePods counts the pods of the test in the namespaces that are not being deleted.
func livePods(ctx context.Context, namespaces ...string) (int, error) {
	n := 0
	for _, ns := range namespaces {
		var pods corev1.PodList
		if err := k.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "burst"}); err != nil {
			return 0, err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				n++
			}
		}
	}
	return n, nil
}

// The user story of spec.totalQuota on the whole cluster (the real quota controller
// and quota admission, the manager as its own ServiceAccount): a tenant with
// totalQuota pods: 4 across 2 namespaces creates pods in both at once until it is
// refused; it runs 4 pods and never more, then any further pod is refused in either
// namespace, and a pod deleted in one namespace makes room in the other.
func TestTenantTotalQuotaCapsPodsAcrossNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	namespaces := []string{"tquota-a", "tquota-b"}
	tn := tenant("tquota", "Delete", namespaces...)
	tn.Spec.TotalQuota = &tenancyv1alpha1.TenantTotalQuota{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("4")}}
	g.Expect(k.Create(ctx, tn)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), tn) })
	waitTenantReady(g, tn.Name)

	// The quota controller has published the limits: quota admission enforces them.
	g.Eventually(func(g Gomega) {
		for _, ns := range namespaces {
			var q corev1.ResourceQuota
			g.Expect(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orderly-tenant-quota"}, &q)).To(Succeed())
			h := q.Status.Hard[corev1.ResourcePods]
			g.Expect(h.String()).To(Equal("2"), ns)
		}
	}, timeout, poll).Should(Succeed())

	// The burst: one writer per namespace, creating pods as fast as the API server
	// takes them, until neither has been admitted for 5 seconds (enough for Orderly
	// to move the headroom and the quota controller to publish it). A third goroutine
	// samples how many pods exist.
	var admitted, refused atomic.Int64
	var maxSeen atomic.Int64
	stop := make(chan struct{})
	var lastAdmit atomic.Int64
	lastAdmit.Store(time.Now().UnixNano())
	start := time.Now()
	var firstFour atomic.Int64
	var wg sync.WaitGroup
	for _, ns := range namespaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				err := k.Create(ctx, quotaTestPod(ns, fmt.Sprintf("burst-%d", i)))
				switch {
				case err == nil:
					lastAdmit.Store(time.Now().UnixNano())
					if admitted.Add(1) == 4 {
						firstFour.Store(int64(time.Since(start)))
					}
				case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota"):
					refused.Add(1)
					time.Sleep(20 * time.Millisecond)
				case apierrors.IsConflict(err):
					// Quota admission lost the race to update the namespace's
					// ResourceQuota (with the other writer, the quota controller or a
					// rebalance): the pod was not created, as kubectl users see too.
					time.Sleep(20 * time.Millisecond)
				default:
					t.Errorf("creating a pod in %s: %v", ns, err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if n, err := livePods(ctx, namespaces...); err == nil && int64(n) > maxSeen.Load() {
				maxSeen.Store(int64(n))
			}
		}
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Since(time.Unix(0, lastAdmit.Load())) < 5*time.Second && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	n, err := livePods(ctx, namespaces...)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("burst: %d pods admitted, %d refused; most pods seen at once %d; all 4 admitted after %v",
		admitted.Load(), refused.Load(), maxSeen.Load(), time.Duration(firstFour.Load()))
	g.Expect(admitted.Load()).To(BeEquivalentTo(4), "the tenant must get all of its total of 4 pods and no more")
	g.Expect(n).To(Equal(4))
	g.Expect(maxSeen.Load()).To(BeNumerically("<=", 4))

	// Status: the total is reached; each namespace's limit is what it uses.
	g.Eventually(func(g Gomega) {
		var got tenancyv1alpha1.Tenant
		g.Expect(k.Get(ctx, client.ObjectKey{Name: tn.Name}, &got)).To(Succeed())
		g.Expect(got.Status.TotalQuota).NotTo(BeNil())
		used := got.Status.TotalQuota.Used[corev1.ResourcePods]
		g.Expect(used.Value()).To(BeEquivalentTo(4))
		c := meta.FindStatusCondition(got.Status.Conditions, tenancyv1alpha1.ConditionTotalQuotaAvailable)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal("TotalQuotaReached"), c.Message)
		for _, ns := range got.Status.Namespaces {
			g.Expect(ns.Quota).NotTo(BeNil(), ns.Name)
			u, h := ns.Quota.Used[corev1.ResourcePods], ns.Quota.Hard[corev1.ResourcePods]
			g.Expect(h.Cmp(u)).To(BeZero(), "%s: limit %s, used %s", ns.Name, h.String(), u.String())
		}
	}, timeout, poll).Should(Succeed())

	// Nothing more, in either namespace, for a while.
	g.Consistently(func(g Gomega) {
		for _, ns := range namespaces {
			err := k.Create(ctx, quotaTestPod(ns, "one-more"), client.DryRunAll)
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a 5th pod in %s: %v", ns, err)
		}
	}, 5*time.Second, time.Second).Should(Succeed())

	// The pods of the namespace that runs more go: the headroom they free is shared
	// by both namespaces, so the other one may start a pod again.
	byNS := map[string][]corev1.Pod{}
	for _, ns := range namespaces {
		var pods corev1.PodList
		g.Expect(k.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "burst"})).To(Succeed())
		byNS[ns] = pods.Items
	}
	busy, other := "tquota-a", "tquota-b"
	if len(byNS[other]) > len(byNS[busy]) {
		busy, other = other, busy
	}
	for i := range byNS[busy] {
		g.Expect(k.Delete(ctx, &byNS[busy][i], client.GracePeriodSeconds(0))).To(Succeed())
	}
	freedAt := time.Now()
	g.Eventually(func() error {
		return k.Create(ctx, quotaTestPod(other, "after-delete"))
	}, timeout, poll).Should(Succeed())
	t.Logf("%d pod(s) deleted in %s: %s admitted a pod %v later", len(byNS[busy]), busy, other, time.Since(freedAt))
	n, err = livePods(ctx, namespaces...)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(BeNumerically("<=", 4))
}
