//go:build integration

package labelpolicy

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

// TestValuesFromALabelValueSet: a policy takes its values from a LabelValueSet. An
// active value is admitted; a retired one is refused with a message that says so, and
// reported as Retired on a workload that runs with it; a value that expires during the
// test is refused after its expiry; a value added to the list is admitted at once.
// The policy is never edited. Without its LabelValueSet the policy refuses and says why.
func TestValuesFromALabelValueSet(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNS(t, "vals-a", map[string]string{"test": "vals"})
	g.Expect(k.Create(ctx, deployment("vals-a", "running-retired", map[string]string{"cc-vals": "cc-old"}))).To(Succeed())

	p := newPolicy("vals", "cc-vals", policyv1alpha1.ActionDeny)
	p.Spec.AllowedValuesFrom = &policyv1alpha1.AllowedValuesSource{LabelValueSet: "vals-centers"}
	createPolicy(t, p)

	// No LabelValueSet yet: refused, and status says why.
	g.Eventually(func(g Gomega) {
		got := getPolicy(g, "vals")
		c := cond(got, policyv1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(ReasonValueSetNotFound))
	}, timeout, poll).Should(Succeed())
	_ = waitEnforced(t, func() client.Object { return deployment("vals-a", "probe", map[string]string{"cc-vals": "cc-1"}) })

	expires := metav1.NewTime(time.Now().Add(15 * time.Second).Truncate(time.Second))
	set := &policyv1alpha1.LabelValueSet{
		ObjectMeta: metav1.ObjectMeta{Name: "vals-centers"},
		Spec: policyv1alpha1.LabelValueSetSpec{Values: []policyv1alpha1.LabelValue{
			{Value: "cc-1", Description: "shop"},
			{Value: "cc-old", Active: ptr.To(false)},
			{Value: "cc-soon", Expires: &expires},
		}},
	}
	g.Expect(k.Create(ctx, set)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), set) })

	g.Eventually(func() error {
		d := deployment("vals-a", "probe-ok", map[string]string{"cc-vals": "cc-1"})
		err := k.Create(ctx, d)
		if err == nil {
			_ = k.Delete(ctx, d)
		}
		return err
	}, timeout, poll).Should(Succeed(), "an active value of the set is admitted")
	g.Expect(k.Create(ctx, deployment("vals-a", "soon", map[string]string{"cc-vals": "cc-soon"}))).To(Succeed(), "a value before its expiry is admitted")
	g.Expect(time.Now().Before(expires.Time)).To(BeTrue(), "the test was too slow to see cc-soon active")
	err := k.Create(ctx, deployment("vals-a", "retired", map[string]string{"cc-vals": "cc-old"}))
	g.Expect(err).To(MatchError(ContainSubstring("has label cc-vals=cc-old, which is retired in LabelValueSet vals-centers")))
	err = k.Create(ctx, deployment("vals-a", "unknown", map[string]string{"cc-vals": "cc-x"}))
	g.Expect(err).To(MatchError(ContainSubstring("which is not allowed")))

	g.Eventually(func(g Gomega) {
		got := getPolicy(g, "vals")
		g.Expect(cond(got, policyv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(got.Status.TopViolations).To(ContainElement(policyv1alpha1.Violation{
			Kind: "Deployment", Namespace: "vals-a", Name: "running-retired", Reason: policyv1alpha1.ViolationRetired, Value: "cc-old"}))
	}, timeout, poll).Should(Succeed())

	// A value added to the list: admitted, no policy edit.
	// Read again on a conflict: the set's status is written meanwhile.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k.Get(ctx, client.ObjectKeyFromObject(set), set); err != nil {
			return err
		}
		set.Spec.Values = append(set.Spec.Values, policyv1alpha1.LabelValue{Value: "cc-new"})
		return k.Update(ctx, set)
	})).To(Succeed())
	g.Eventually(func() error {
		d := deployment("vals-a", "probe-new", map[string]string{"cc-vals": "cc-new"})
		err := k.Create(ctx, d)
		if err == nil {
			_ = k.Delete(ctx, d)
		}
		return err
	}, timeout, poll).Should(Succeed(), "a value added to the set is admitted")

	// cc-soon expires: refused from then on, and the running one is reported.
	g.Eventually(func() error {
		d := deployment("vals-a", "probe-soon", map[string]string{"cc-vals": "cc-soon"})
		err := k.Create(ctx, d)
		if err == nil {
			_ = k.Delete(ctx, d)
		}
		return err
	}, timeout, poll).Should(MatchError(ContainSubstring("which is retired in LabelValueSet vals-centers")))
	g.Expect(time.Now().After(expires.Time)).To(BeTrue(), "refused before the value expired")
	g.Eventually(func(g Gomega) {
		got := getPolicy(g, "vals")
		g.Expect(got.Status.TopViolations).To(ContainElement(policyv1alpha1.Violation{
			Kind: "Deployment", Namespace: "vals-a", Name: "soon", Reason: policyv1alpha1.ViolationRetired, Value: "cc-soon"}))
		g.Expect(got.Generation).To(Equal(p.Generation), "nobody edited the policy")
	}, timeout, poll).Should(Succeed())
}
