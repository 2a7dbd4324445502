package canary

import (
	"context"
	"errors"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	"orderly.dev/orderly/internal/scheme"
)

// A plan made from a status that was replaced meanwhile (a cached copy behind this
// controller's own last write) is not written over the newer status: the decisions
// and phase of the newer one stay, and the reconcile plans again.
func TestStatusPlannedFromAStaleStatusIsNotWritten(t *testing.T) {
	ctx := context.Background()
	c := newCanary(weightStep(10, 0))
	c.Status = deliveryv1alpha1.CanaryStatus{Phase: deliveryv1alpha1.PhaseProgressing, Revision: "r2", CurrentStep: 1}
	k := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(c).WithStatusSubresource(c).Build()
	var stale deliveryv1alpha1.Canary
	if err := k.Get(ctx, client.ObjectKeyFromObject(c), &stale); err != nil {
		t.Fatal(err)
	}
	// The newer status: promotion began, with a decision.
	var newer deliveryv1alpha1.Canary
	_ = k.Get(ctx, client.ObjectKeyFromObject(c), &newer)
	newer.Status.Phase = deliveryv1alpha1.PhasePromoting
	newer.Status.Decisions = []deliveryv1alpha1.StepDecision{{Revision: "r2", Step: 1, Verdict: deliveryv1alpha1.VerdictPass}}
	if err := k.Status().Update(ctx, &newer); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: k, APIReader: k}
	planned := result{status: deliveryv1alpha1.CanaryStatus{Phase: deliveryv1alpha1.PhaseSucceeded, Revision: "r2"}}
	err := r.writeStatus(ctx, &stale, &statusInput{res: &planned}, nil)
	if !errors.Is(err, errStaleStatus) {
		t.Fatalf("err = %v, want errStaleStatus", err)
	}
	var got deliveryv1alpha1.Canary
	_ = k.Get(ctx, client.ObjectKeyFromObject(c), &got)
	if got.Status.Phase != deliveryv1alpha1.PhasePromoting || len(got.Status.Decisions) != 1 {
		t.Fatalf("the newer status was overwritten: %+v", got.Status)
	}
	// From the latest status, the plan is written.
	if err := r.writeStatus(ctx, &got, &statusInput{res: &planned}, nil); err != nil {
		t.Fatal(err)
	}
	_ = k.Get(ctx, client.ObjectKeyFromObject(c), &got)
	if got.Status.Phase != deliveryv1alpha1.PhaseSucceeded {
		t.Fatalf("phase %s", got.Status.Phase)
	}
}
