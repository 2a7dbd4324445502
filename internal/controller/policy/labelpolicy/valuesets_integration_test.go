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

// A LabelValueSet counts its values and is Ready while one is allowed: the counts
// follow an edit and an expiry without any edit; with every value retired it is not
// Ready, naming why.
func TestValueSetStatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	expires := metav1.NewTime(time.Now().Add(6 * time.Second).Truncate(time.Second))
	set := &policyv1alpha1.LabelValueSet{
		ObjectMeta: metav1.ObjectMeta{Name: "status-centers"},
		Spec: policyv1alpha1.LabelValueSetSpec{Values: []policyv1alpha1.LabelValue{
			{Value: "cc-1"}, {Value: "cc-old", Active: ptr.To(false)}, {Value: "cc-soon", Expires: &expires},
		}},
	}
	g.Expect(k.Create(ctx, set)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), set) })
	status := func(active, retired int32, ready metav1.ConditionStatus, reason string) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			var got policyv1alpha1.LabelValueSet
			g.Expect(k.Get(ctx, client.ObjectKeyFromObject(set), &got)).To(Succeed())
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			g.Expect([]int32{got.Status.Active, got.Status.Retired}).To(Equal([]int32{active, retired}))
			c := findReady(got.Status.Conditions)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(ready), c.Message)
			g.Expect(c.Reason).To(Equal(reason))
		}, timeout, poll).Should(Succeed())
	}
	status(2, 1, metav1.ConditionTrue, ReasonValuesAllowed)
	status(1, 2, metav1.ConditionTrue, ReasonValuesAllowed) // cc-soon expired
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k.Get(ctx, client.ObjectKeyFromObject(set), set); err != nil {
			return err
		}
		set.Spec.Values[0].Active = ptr.To(false)
		return k.Update(ctx, set)
	})).To(Succeed())
	status(0, 3, metav1.ConditionFalse, ReasonNoActiveValue)
}
