//go:build integration

package labelpolicy

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/testing/testenv"
)

// laggingCache is a manager's cache that has not caught up yet: it returns an old
// copy of one policy, and goes to the API server for everything else.
type laggingCache struct {
	client.Client
	old *policyv1alpha1.LabelPolicy
}

func (c laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if p, ok := obj.(*policyv1alpha1.LabelPolicy); ok && key == client.ObjectKeyFromObject(c.old) {
		c.old.DeepCopyInto(p)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestStaleCopyNeverUndoesAnAudit: a reconcile that reads a cached policy older than
// the status the last audit wrote neither audits again nor writes a status computed
// from that copy (the e2e audit test once saw the results of an audit undone that way).
// It runs on an API server of its own, where no manager reconciles behind its back.
func TestStaleCopyNeverUndoesAnAudit(t *testing.T) {
	g := NewWithT(t)
	env := testenv.StartForTest(t)
	c, ctx := env.Client, context.Background()
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "stale-a", Labels: map[string]string{"test": "stale"}}})).To(Succeed())
	g.Expect(c.Create(ctx, deployment("stale-a", "missing", nil))).To(Succeed())
	p := newPolicy("stale", "cc-stale", policyv1alpha1.ActionAudit)
	g.Expect(c.Create(ctx, p)).To(Succeed())
	old := p.DeepCopy()

	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	r := &Reconciler{Client: c, APIReader: c, Clock: clocktesting.NewFakePassiveClock(at), Admission: admission.Config{Mode: admission.Auto}}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)}
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	audited := getPolicyFrom(g, c, "stale")
	g.Expect(audited.Status.Violations).To(Equal(int32(1)))
	g.Expect(audited.Status.LastAuditTime.Time).To(BeTemporally("==", at), "the audit is dated by the injected clock")
	g.Expect(cond(audited, policyv1alpha1.ConditionCompliant).Reason).To(Equal(ReasonViolationsFound))

	// A second violation, which only another audit would count.
	g.Expect(c.Create(ctx, deployment("stale-a", "missing-too", nil))).To(Succeed())
	// The next reconcile reads the copy from before the audit's status.
	r.Client = laggingCache{Client: c, old: old}
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	after := getPolicyFrom(g, c, "stale")
	g.Expect(after.Status.Violations).NotTo(Equal(int32(2)), "the stale copy made the controller audit again before the interval")
	g.Expect(after.Status).To(Equal(audited.Status), "a status computed from the stale copy was written")
}

func getPolicyFrom(g Gomega, c client.Client, name string) *policyv1alpha1.LabelPolicy {
	var p policyv1alpha1.LabelPolicy
	g.Expect(c.Get(context.Background(), client.ObjectKey{Name: name}, &p)).To(Succeed())
	return &p
}
