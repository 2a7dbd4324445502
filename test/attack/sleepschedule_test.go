//go:build e2e

package attack

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

// SleepSchedule: a platform schedule that selects every namespace carrying a label
// (team-a's among them) and never has an awake window. Mallory tries to wake her
// namespace by editing the schedule, and to put team-b to sleep with one of her own;
// the schedule, which the platform pointed at kube-system and the manager's namespace
// too, must leave those two awake.
func TestAttackSleepSchedule(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const sel = "attack.orderly.dev/sleep"
	labelNS := func(ns string, on bool) {
		v := `"yes"`
		if !on {
			v = "null"
		}
		g.Expect(admin.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+sel+`":`+v+`}}}`)))).To(Succeed())
	}
	workloads := map[string]*appsv1.Deployment{}
	for _, ns := range []string{teamA, "kube-system", managerNamespace} {
		labelNS(ns, true)
		t.Cleanup(func() { labelNS(ns, false) })
		d := deployment(ns, "attack-sleeper")
		create(t, admin, d)
		workloads[ns] = d
	}
	s := &powerv1alpha1.SleepSchedule{ObjectMeta: metav1.ObjectMeta{Name: "attack-nights"}, Spec: powerv1alpha1.SleepScheduleSpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{sel: "yes"}},
	}}
	create(t, admin, s)

	// Control: team-a's workload is put to sleep.
	replicas := func(g Gomega, ns string) int32 {
		d := workloads[ns]
		get(g, d)
		return ptr.Deref(d.Spec.Replicas, 1)
	}
	g.Eventually(func(g Gomega) { g.Expect(replicas(g, teamA)).To(BeZero()) }, timeout, poll).Should(Succeed())
	// Contained: kube-system and the manager's namespace are selected, and excluded.
	g.Eventually(func(g Gomega) {
		get(g, s)
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		g.Expect(s.Status.ExcludedNamespaces).To(ConsistOf(
			powerv1alpha1.ExcludedNamespace{Name: "kube-system", Reason: powerv1alpha1.ExcludedSystemNamespace},
			powerv1alpha1.ExcludedNamespace{Name: managerNamespace, Reason: powerv1alpha1.ExcludedManagerNamespace},
		))
	}, timeout, poll).Should(Succeed())
	for _, ns := range []string{"kube-system", managerNamespace} {
		g.Expect(replicas(g, ns)).To(BeEquivalentTo(1), "%s was put to sleep", ns)
		g.Expect(workloads[ns].Annotations).NotTo(HaveKey(HavePrefix("power.orderly.dev/")))
	}

	// Mallory cannot wake her namespace by editing the schedule, nor write a schedule
	// of her own (that would put team-b to sleep).
	wake := []byte(`{"spec":{"wakeUntil":"` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `"}}`)
	forbiddenByRBAC(g, attacker.Patch(ctx, s.DeepCopy(), client.RawPatch(types.MergePatchType, wake)))
	forbiddenByRBAC(g, attacker.Patch(ctx, s.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`))))
	forbiddenByRBAC(g, attacker.Create(ctx, &powerv1alpha1.SleepSchedule{ObjectMeta: metav1.ObjectMeta{Name: "mallory-sleeps-b"},
		Spec: powerv1alpha1.SleepScheduleSpec{Namespaces: []string{teamB}}}, client.DryRunAll))

	// Control: the platform's on-demand wake works.
	g.Expect(admin.Patch(ctx, s, client.RawPatch(types.MergePatchType, wake))).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(replicas(g, teamA)).To(BeEquivalentTo(1)) }, timeout, poll).Should(Succeed())
}
