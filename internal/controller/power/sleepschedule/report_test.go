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

func TestWriteNamespaceSavings(t *testing.T) {
	var b strings.Builder
	saved := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	err := writeNamespaceSavings(&b, []powerv1alpha1.SleepSchedule{
		{ObjectMeta: metav1.ObjectMeta{Name: "weekends"}, Status: powerv1alpha1.SleepScheduleStatus{SavedByNamespace: []powerv1alpha1.NamespaceSavings{
			{Namespace: "team-b", SleepingWorkloads: 2, SavedRequests: saved("500m", "1Gi")},
		}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "dev-nights"}, Status: powerv1alpha1.SleepScheduleStatus{SavedByNamespace: []powerv1alpha1.NamespaceSavings{
			{Namespace: "team-c", SleepingWorkloads: 9, SavedRequests: saved("3", "6Gi")},
			{Namespace: "team-a", SleepingWorkloads: 1},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "NAMESPACE  SCHEDULE    SLEEPING  SAVED CPU  SAVED MEMORY\n" +
		"team-a     dev-nights  1         0          0\n" +
		"team-b     weekends    2         500m       1Gi\n" +
		"team-c     dev-nights  9         3          6Gi\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
