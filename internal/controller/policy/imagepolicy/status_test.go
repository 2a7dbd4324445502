package imagepolicy

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/scheme"
)

// t0 is whole seconds: status dates go through JSON at that precision.
var t0 = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

func policyClient(t *testing.T) (*Reconciler, client.Client) {
	t.Helper()
	p := &policyv1alpha1.ImagePolicy{ObjectMeta: metav1.ObjectMeta{Name: "scanned", Generation: 1}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p).WithStatusSubresource(p).Build()
	return &Reconciler{Client: c, APIReader: c}, c
}

func getPolicy(t *testing.T, c client.Client) *policyv1alpha1.ImagePolicy {
	t.Helper()
	var p policyv1alpha1.ImagePolicy
	if err := c.Get(context.Background(), client.ObjectKey{Name: "scanned"}, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func evaluatedAt(now time.Time, running int32) observation {
	return observation{now: now, webhook: true, eval: &Evaluation{Coverage: policyv1alpha1.ImageCoverage{Running: running, Scanned: running}}}
}

func TestUpdateStatusWritesNoNewDateAlone(t *testing.T) {
	tests := []struct {
		name      string
		later     time.Duration
		running   int32
		wantWrite bool
	}{
		{"the same result 5 minutes later", 5 * time.Minute, 2, false},
		{"the same result 10 minutes later", reevaluatedAfter, 2, true},
		{"another result a minute later", time.Minute, 3, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			r, c := policyClient(t)
			if err := r.updateStatus(ctx, getPolicy(t, c), evaluatedAt(t0, 2)); err != nil {
				t.Fatal(err)
			}
			first := getPolicy(t, c)
			if first.Status.LastEvaluated == nil || !first.Status.LastEvaluated.Time.Equal(t0) {
				t.Fatalf("first evaluation not written: %+v", first.Status)
			}
			if err := r.updateStatus(ctx, first.DeepCopy(), evaluatedAt(t0.Add(tt.later), tt.running)); err != nil {
				t.Fatal(err)
			}
			after := getPolicy(t, c)
			if wrote := after.ResourceVersion != first.ResourceVersion; wrote != tt.wantWrite {
				t.Errorf("status written: %v, want %v", wrote, tt.wantWrite)
			}
			wantDate, wantRunning := t0, int32(2)
			if tt.wantWrite {
				wantDate, wantRunning = t0.Add(tt.later), tt.running
			}
			if !after.Status.LastEvaluated.Time.Equal(wantDate) || after.Status.Coverage.Running != wantRunning {
				t.Errorf("lastEvaluated %v, running %d; want %v, %d", after.Status.LastEvaluated, after.Status.Coverage.Running, wantDate, wantRunning)
			}
		})
	}
}

// TestUpdateStatusFromAStaleCopyComputesOnTheLatest: a reconcile that started from a
// copy older than the stored policy (the cache was behind) loses the optimistic lock
// and computes its status again on the latest version, so what was written in
// between is not overwritten by the merge patch of a stale list of conditions.
func TestUpdateStatusFromAStaleCopyComputesOnTheLatest(t *testing.T) {
	ctx := context.Background()
	r, c := policyClient(t)
	stale := getPolicy(t, c)
	latest := stale.DeepCopy()
	meta.SetStatusCondition(&latest.Status.Conditions, metav1.Condition{Type: "WrittenInBetween", Status: metav1.ConditionTrue, Reason: "Other", LastTransitionTime: metav1.NewTime(t0)})
	if err := c.Status().Update(ctx, latest); err != nil {
		t.Fatal(err)
	}
	if err := r.updateStatus(ctx, stale, evaluatedAt(t0, 2)); err != nil {
		t.Fatalf("a stale copy's status write: %v", err)
	}
	after := getPolicy(t, c)
	if meta.FindStatusCondition(after.Status.Conditions, "WrittenInBetween") == nil {
		t.Errorf("the condition written in between was lost: %+v", after.Status.Conditions)
	}
	if !meta.IsStatusConditionTrue(after.Status.Conditions, policyv1alpha1.ImagePolicyConditionCompliant) || after.Status.Coverage.Running != 2 {
		t.Errorf("the evaluation was not written: %+v", after.Status)
	}
}
