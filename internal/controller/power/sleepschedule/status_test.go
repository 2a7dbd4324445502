package sleepschedule

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

// countWorkloads: what the status counts each observed workload as.
func TestCountWorkloads(t *testing.T) {
	const schedule = "nights"
	rec := &sleepRecord{Replicas: ptr.To(int32(3)), SleepReplicas: ptr.To(int32(0))}
	deploy := func(mod func(w *workload)) *workload {
		w := &workload{kind: powerv1alpha1.KindDeployment, targeted: true, value: 3,
			obj: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}}
		mod(w)
		return w
	}
	type counts struct {
		workloads, sleeping, ready, wouldSleep, sleptBefore, heldBefore int32
		notReady, leftAlone, gitOps                                     int
	}
	tests := []struct {
		name string
		w    *workload
		want counts
	}{
		{"awake and ready", deploy(func(w *workload) { w.ready = true }), counts{workloads: 1, ready: 1}},
		{"awake, not ready", deploy(func(*workload) {}), counts{workloads: 1, notReady: 1}},
		{"a CronJob has no readiness", deploy(func(w *workload) { w.kind = powerv1alpha1.KindCronJob }), counts{workloads: 1}},
		{"an object of targets.kinds: its controller says whether it is ready", deploy(func(w *workload) { w.extra = &extraKind{mode: modeScale} }), counts{workloads: 1}},
		{"not targeted", deploy(func(w *workload) { w.targeted, w.ready = false, true }), counts{}},
		{"targeted, and the schedule wants it asleep", deploy(func(w *workload) { w.want, w.ready = true, true }), counts{workloads: 1, wouldSleep: 1, ready: 1}},
		{"managed by a GitOps tool", deploy(func(w *workload) { w.gitOps, w.ready = powerv1alpha1.GitOpsFlux, true }), counts{workloads: 1, ready: 1, gitOps: 1}},
		{"put to sleep by this reconcile", deploy(func(w *workload) { w.act = actSleep }), counts{workloads: 1, sleeping: 1}},
		{"a sleep that failed", deploy(func(w *workload) { w.act, w.err = actSleep, errors.New("conflict") }), counts{workloads: 1, notReady: 1}},
		{"asleep before this reconcile", deploy(func(w *workload) { w.asleepBy, w.record, w.value = schedule, rec, 0 }),
			counts{workloads: 1, sleeping: 1, sleptBefore: 1, heldBefore: 1}},
		{"asleep under another schedule", deploy(func(w *workload) { w.asleepBy, w.record, w.value = "other", rec, 0 }), counts{workloads: 1}},
		{"left alone earlier: its owner changed it while asleep", deploy(func(w *workload) { w.asleepBy, w.record, w.leftAlone = schedule, rec, true }),
			counts{workloads: 1, heldBefore: 1, leftAlone: 1}},
		{"left alone by this reconcile", deploy(func(w *workload) { w.asleepBy, w.record, w.act = schedule, rec, actLeftAlone }), counts{workloads: 1, heldBefore: 1, leftAlone: 1}},
		{"woken by this reconcile: its pods are starting", deploy(func(w *workload) { w.asleepBy, w.record, w.act, w.ready = schedule, rec, actWake, true }),
			counts{workloads: 1, heldBefore: 1, notReady: 1}},
		{"a wake that failed leaves it asleep", deploy(func(w *workload) { w.asleepBy, w.record, w.act, w.err = schedule, rec, actWake, errors.New("conflict") }),
			counts{workloads: 1, sleeping: 1, heldBefore: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := countWorkloads(schedule, &observation{workloads: []*workload{tt.w}})
			got := counts{tl.workloads, tl.sleeping, tl.ready, tl.wouldSleep, tl.sleptBefore, tl.heldBefore, len(tl.notReady), len(tl.leftAlone), len(tl.gitOps)}
			if got != tt.want {
				t.Errorf("counted %+v, want %+v", got, tt.want)
			}
		})
	}
}
