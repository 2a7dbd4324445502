package sleepschedule

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/scheme"
)

func TestWakeForAndResume(t *testing.T) {
	ctx := context.Background()
	s := &powerv1alpha1.SleepSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nights"},
		Spec: powerv1alpha1.SleepScheduleSpec{Namespaces: []string{"dev"}, DryRun: true}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(s).Build()
	get := func() *powerv1alpha1.SleepSchedule {
		var got powerv1alpha1.SleepSchedule
		if err := c.Get(ctx, client.ObjectKey{Name: "nights"}, &got); err != nil {
			t.Fatal(err)
		}
		return &got
	}

	until, err := WakeFor(ctx, c, "nights", time.Date(2026, 12, 2, 20, 0, 0, 700_000_000, time.FixedZone("CET", 3600)), 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 12, 2, 21, 0, 0, 0, time.UTC)
	if !until.Equal(want) || until.Location() != time.UTC {
		t.Errorf("until = %v, want %v (whole seconds, UTC)", until, want)
	}
	got := get()
	if got.Spec.WakeUntil == nil || !got.Spec.WakeUntil.Time.Equal(want) {
		t.Errorf("spec.wakeUntil = %v, want %v", got.Spec.WakeUntil, want)
	}
	if !got.Spec.DryRun || len(got.Spec.Namespaces) != 1 {
		t.Errorf("the rest of the spec changed: %+v", got.Spec)
	}

	if err := Resume(ctx, c, "nights"); err != nil {
		t.Fatal(err)
	}
	if got := get(); got.Spec.WakeUntil != nil || !got.Spec.DryRun {
		t.Errorf("after Resume: spec = %+v, want no wakeUntil and the rest kept", got.Spec)
	}

	if _, err := WakeFor(ctx, c, "nights", time.Now(), 0); err == nil {
		t.Error("a wake of no duration was accepted")
	}
	if _, err := WakeFor(ctx, c, "missing", time.Now(), time.Hour); !apierrors.IsNotFound(err) {
		t.Errorf("waking a schedule that does not exist: err = %v, want NotFound", err)
	}
}
