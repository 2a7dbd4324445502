package canary

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	"orderly.dev/orderly/internal/scheme"
)

func TestPromoteAbortAndDescribe(t *testing.T) {
	ctx := context.Background()
	c := newCanary(weightStep(10, 0), deliveryv1alpha1.Step{Pause: true})
	c.Status = deliveryv1alpha1.CanaryStatus{
		Phase: deliveryv1alpha1.PhasePaused, Revision: "r2", PrimaryRevision: "r1", CurrentStep: 1, CanaryWeight: 10,
		Decisions: []deliveryv1alpha1.StepDecision{{
			Revision: "r2", Step: 0, Weight: 10, Time: metav1.NewTime(t0), Verdict: deliveryv1alpha1.VerdictPass, Reason: "all 1 metrics passed",
			Metrics: []deliveryv1alpha1.MetricDecision{{Name: "errors", Verdict: deliveryv1alpha1.VerdictPass, Statistic: "40", PValue: "0.61", Effect: "0.001", AllowedEffect: "0.02",
				Canary: &deliveryv1alpha1.SampleSummary{Count: 12, Median: "0.01"}, Baseline: &deliveryv1alpha1.SampleSummary{Count: 12, Median: "0.011"}}},
		}},
	}
	k := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(c).WithStatusSubresource(c).Build()
	key := client.ObjectKeyFromObject(c)

	text, err := Describe(ctx, k, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Paused", "step 1 of 2", "primary revision r1", "errors: Pass", "U=40 p=0.61", "primary n=12"} {
		if !strings.Contains(text, want) {
			t.Errorf("status lacks %q:\n%s", want, text)
		}
	}
	if _, err := Promote(ctx, k, key); err != nil {
		t.Fatal(err)
	}
	var got deliveryv1alpha1.Canary
	_ = k.Get(ctx, key, &got)
	if v := got.Annotations[deliveryv1alpha1.PromoteAnnotation]; v != "r2/1" {
		t.Errorf("promote annotation %q, want the revision and step seen: r2/1", v)
	}
	if _, err := Abort(ctx, k, key); err != nil {
		t.Fatal(err)
	}
	_ = k.Get(ctx, key, &got)
	if v := got.Annotations[deliveryv1alpha1.AbortAnnotation]; v != "r2" {
		t.Errorf("abort annotation %q", v)
	}
	// Nothing to promote or abort outside an analysis.
	got.Status.Phase = deliveryv1alpha1.PhaseSucceeded
	_ = k.Status().Update(ctx, &got)
	if _, err := Promote(ctx, k, key); err == nil || !strings.Contains(err.Error(), "Succeeded") {
		t.Errorf("promote of a Succeeded Canary: %v", err)
	}
	if _, err := Abort(ctx, k, client.ObjectKey{Namespace: "shop", Name: "nope"}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("abort of a missing Canary: %v", err)
	}
}
