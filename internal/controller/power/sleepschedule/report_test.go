package sleepschedule

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

func TestWriteSavings(t *testing.T) {
	var b strings.Builder
	err := writeSavings(&b, []powerv1alpha1.SleepSchedule{
		{ObjectMeta: metav1.ObjectMeta{Name: "weekends"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "dev-nights"}, Status: powerv1alpha1.SleepScheduleStatus{
			State: powerv1alpha1.StateAsleep, SleepingWorkloads: 14,
			SavedRequests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3500m"), corev1.ResourceMemory: resource.MustParse("7Gi")},
			Savings:       &powerv1alpha1.SleepSavings{AsleepHours: "62.5", CPUCoreHours: "218.8", MemoryGiBHours: "437.5"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "SCHEDULE    STATE   SLEEPING  SAVED CPU  SAVED MEMORY  ASLEEP THIS WEEK (h)  CORE-HOURS SAVED  GIB-HOURS SAVED\n" +
		"dev-nights  Asleep  14        3500m      7Gi           62.5                  218.8             437.5\n" +
		"weekends    -       0         0          0             -                     -                 -\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
