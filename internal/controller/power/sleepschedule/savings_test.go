package sleepschedule

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

func TestWeekStart(t *testing.T) {
	s, err := Parse(&powerv1alpha1.SleepScheduleSpec{TimeZone: "Europe/Berlin"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ at, want string }{
		{"2026-12-02T12:00:00Z", "2026-11-29T23:00:00Z"}, // Wednesday: Monday 00:00 CET
		{"2026-11-29T23:30:00Z", "2026-11-29T23:00:00Z"}, // Monday 00:30 in Berlin, still Sunday in UTC
		{"2026-11-29T22:30:00Z", "2026-11-22T23:00:00Z"}, // Sunday 23:30 in Berlin
		{"2026-03-31T12:00:00Z", "2026-03-29T22:00:00Z"}, // the week DST began: Monday 00:00 CEST
	} {
		if got := s.WeekStart(utc(tt.at)); !got.Equal(utc(tt.want)) {
			t.Errorf("WeekStart(%s) = %s, want %s", tt.at, got.UTC(), tt.want)
		}
	}
}

func TestCountSavings(t *testing.T) {
	week := utc("2026-11-30T00:00:00Z")
	saved := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("2Gi")}
	asleep := func(until string, sv *powerv1alpha1.SleepSavings) *powerv1alpha1.SleepScheduleStatus {
		if sv != nil {
			sv.CountedUntil = metav1.NewTime(utc(until))
		}
		return &powerv1alpha1.SleepScheduleStatus{State: powerv1alpha1.StateAsleep, SleepingWorkloads: 3, SavedRequests: saved, Savings: sv}
	}

	// First count: nothing yet.
	got := countSavings(asleep("", nil), utc("2026-12-01T20:00:00Z"), week, false)
	if got.AsleepSeconds != 0 || !got.CountedUntil.Equal(&metav1.Time{Time: utc("2026-12-01T20:00:00Z")}) || got.CPUCoreHours != "0.0" {
		t.Errorf("first count = %+v", got)
	}

	// Two hours asleep at 1.5 cores and 2 GiB: 3 core-hours, 4 GiB-hours.
	sv := &powerv1alpha1.SleepSavings{WeekStart: metav1.NewTime(week)}
	got = countSavings(asleep("2026-12-01T20:00:00Z", sv), utc("2026-12-01T22:00:00Z"), week, true)
	if got.AsleepSeconds != 7200 || got.AsleepHours != "2.0" || got.CPUCoreHours != "3.0" || got.MemoryGiBHours != "4.0" {
		t.Errorf("two hours asleep = %+v", got)
	}

	// Less than savingsStep later, nothing changed: not counted (no status write).
	again := countSavings(asleep("2026-12-01T22:00:00Z", got.DeepCopy()), utc("2026-12-01T22:01:00Z"), week, false)
	if again.AsleepSeconds != 7200 || !again.CountedUntil.Equal(&got.CountedUntil) {
		t.Errorf("counted within the step: %+v", again)
	}

	// Awake time adds nothing, and is counted.
	awake := asleep("2026-12-01T22:00:00Z", got.DeepCopy())
	awake.State = powerv1alpha1.StateAwake
	later := countSavings(awake, utc("2026-12-02T08:00:00Z"), week, true)
	if later.AsleepSeconds != 7200 || !later.CountedUntil.Equal(&metav1.Time{Time: utc("2026-12-02T08:00:00Z")}) {
		t.Errorf("awake = %+v", later)
	}

	// A new week: only the time since Monday 00:00 counts.
	next := utc("2026-12-07T00:00:00Z")
	got = countSavings(asleep("2026-12-06T20:00:00Z", got.DeepCopy()), utc("2026-12-07T01:00:00Z"), next, false)
	if !got.WeekStart.Equal(&metav1.Time{Time: next}) || got.AsleepSeconds != 3600 || got.CPUCoreHours != "1.5" {
		t.Errorf("new week = %+v", got)
	}

	// A clock that went back counts nothing.
	back := countSavings(asleep("2026-12-07T01:00:00Z", got.DeepCopy()), utc("2026-12-07T00:30:00Z"), next, true)
	if back.AsleepSeconds != 3600 {
		t.Errorf("clock back = %+v", back)
	}
}

func TestSavingsByNamespace(t *testing.T) {
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	deploy := func(ns, name string, replicas int32, act action, asleepBy string) *workload {
		w := &workload{kind: powerv1alpha1.KindDeployment, obj: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
			podRequests: req, act: act, value: replicas, asleepBy: asleepBy}
		if act == actNone {
			w.record = &sleepRecord{Replicas: ptr.To(replicas), SleepReplicas: ptr.To(int32(0))}
		}
		return w
	}
	obs := &observation{workloads: []*workload{
		deploy("a", "web", 2, actSleep, ""),         // sleeps now: 2 pods saved
		deploy("b", "api", 4, actNone, "nights"),    // asleep since an earlier reconcile: 4 pods
		deploy("b", "worker", 1, actSleep, ""),      // 1 pod
		deploy("c", "other", 3, actNone, "another"), // held by another schedule: not counted
		deploy("d", "up", 3, actWake, "nights"),     // woken now: not counted
	}}
	got := savingsByNamespace("nights", obs)
	if len(got) != 2 {
		t.Fatalf("got %d namespaces, want 2 (a and b): %+v", len(got), got)
	}
	// b first: 5 pods x 250m = 1250m against a's 500m.
	for i, want := range []struct {
		ns       string
		sleeping int32
		cpu, mem string
	}{{"b", 2, "1250m", "640Mi"}, {"a", 1, "500m", "256Mi"}} {
		g := got[i]
		cpu, mem := g.SavedRequests[corev1.ResourceCPU], g.SavedRequests[corev1.ResourceMemory]
		if g.Namespace != want.ns || g.SleepingWorkloads != want.sleeping || cpu.Cmp(resource.MustParse(want.cpu)) != 0 || mem.Cmp(resource.MustParse(want.mem)) != 0 {
			t.Errorf("entry %d = %s: %d asleep, cpu %s, memory %s; want %s: %d, %s, %s", i, g.Namespace, g.SleepingWorkloads, cpu.String(), mem.String(), want.ns, want.sleeping, want.cpu, want.mem)
		}
	}
}
