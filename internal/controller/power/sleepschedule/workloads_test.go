package sleepschedule

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

func TestDecide(t *testing.T) {
	rec := &sleepRecord{Replicas: ptr.To(int32(3)), SleepReplicas: ptr.To(int32(0))}
	cronRec := &sleepRecord{Suspend: ptr.To(false)}
	tests := []struct {
		name string
		w    workload
		want action
	}{
		{"awake and not asleep: nothing", workload{kind: "Deployment", value: 3}, actNone},
		{"should sleep: sleep", workload{kind: "Deployment", value: 3, want: true}, actSleep},
		{"already at zero still gets a record, so that a later change is seen", workload{kind: "Deployment", value: 0, want: true}, actSleep},
		{"asleep as recorded: nothing", workload{kind: "Deployment", value: 0, want: true, asleepBy: "me", record: rec}, actNone},
		{"scaled by hand while asleep: left alone", workload{kind: "Deployment", value: 2, want: true, asleepBy: "me", record: rec}, actLeftAlone},
		{"already marked left alone: nothing", workload{kind: "Deployment", value: 2, want: true, asleepBy: "me", record: rec, leftAlone: true}, actNone},
		{"wake: restore", workload{kind: "Deployment", value: 0, asleepBy: "me", record: rec}, actWake},
		{"wake after a change by hand: release only", workload{kind: "Deployment", value: 2, asleepBy: "me", record: rec}, actRelease},
		{"wake a left-alone workload: release only", workload{kind: "Deployment", value: 2, asleepBy: "me", record: rec, leftAlone: true}, actRelease},
		{"another schedule's workload: never touched", workload{kind: "Deployment", value: 0, want: true, asleepBy: "other", record: rec}, actNone},
		{"another schedule's workload while awake: never touched", workload{kind: "Deployment", value: 0, asleepBy: "other", record: rec}, actNone},
		{"unreadable record while awake: release", workload{kind: "Deployment", value: 0, asleepBy: "me"}, actRelease},
		{"cron job suspended as recorded: nothing", workload{kind: "CronJob", value: 1, want: true, asleepBy: "me", record: cronRec}, actNone},
		{"cron job resumed by hand: left alone", workload{kind: "CronJob", value: 0, want: true, asleepBy: "me", record: cronRec}, actLeftAlone},
		{"cron job wake", workload{kind: "CronJob", value: 1, asleepBy: "me", record: cronRec}, actWake},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decide(&tt.w, "me"); got != tt.want {
				t.Errorf("decide() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSavedRequests(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	tests := []struct {
		name    string
		w       workload
		sleep   int32
		wantCPU string
	}{
		{"being put to sleep now", workload{kind: "Deployment", obj: d, value: 4, act: actSleep, podRequests: req}, 0, "1"},
		{"asleep with a record", workload{kind: "Deployment", obj: d, record: &sleepRecord{Replicas: ptr.To(int32(3)), SleepReplicas: ptr.To(int32(1))}, podRequests: req}, 0, "500m"},
		{"was at zero", workload{kind: "Deployment", obj: d, record: &sleepRecord{Replicas: ptr.To(int32(0)), SleepReplicas: ptr.To(int32(0))}, podRequests: req}, 0, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.w.savedRequests(tt.sleep)
			if got.Cpu().String() != tt.wantCPU {
				t.Errorf("saved CPU = %s, want %s", got.Cpu(), tt.wantCPU)
			}
		})
	}
}

func TestComputeStatusHistoryIsBounded(t *testing.T) {
	s := &powerv1alpha1.SleepSchedule{}
	s.Status.State = powerv1alpha1.StateAwake
	for i := 0; i < historyLimit; i++ {
		s.Status.History = append(s.Status.History, powerv1alpha1.Transition{Action: powerv1alpha1.ActionWake})
	}
	st := computeStatus(s, &observation{state: powerv1alpha1.StateAsleep, slept: 3})
	if len(st.History) != historyLimit {
		t.Fatalf("history has %d entries, want %d", len(st.History), historyLimit)
	}
	if st.History[0].Action != powerv1alpha1.ActionSleep || st.History[0].Workloads != 3 {
		t.Errorf("newest entry = %+v, want Sleep of 3 workloads", st.History[0])
	}
	// The same period's later writes add to the newest entry instead of adding one.
	s.Status = st
	st = computeStatus(s, &observation{state: powerv1alpha1.StateAsleep, slept: 2})
	if len(st.History) != historyLimit || st.History[0].Workloads != 5 {
		t.Errorf("newest entry = %+v (of %d), want 5 workloads", st.History[0], len(st.History))
	}
}

// A leader killed half-way through a sleep leaves its writes on the workloads and
// none in the status. The next leader's history counts the whole transition (the
// records say what was put to sleep), and records it even when nothing was left to
// do; before, it counted only its own writes, and nothing at all in the latter case.
func TestComputeStatusCountsASleepAnEarlierLeaderBegan(t *testing.T) {
	const name = "nights"
	asleep := func(n int, act action) []*workload {
		var out []*workload
		for range n {
			w := &workload{kind: powerv1alpha1.KindDeployment, targeted: true, want: true, act: act, value: 0,
				obj:    &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"}},
				record: &sleepRecord{Replicas: ptr.To(int32(2)), SleepReplicas: ptr.To(int32(0))}}
			if act == actNone {
				w.asleepBy = name
			}
			out = append(out, w)
		}
		return out
	}
	tests := []struct {
		name          string
		prevState     powerv1alpha1.SleepState
		byEarlier     int // put to sleep by the killed leader
		byThis        int // put to sleep by this reconcile
		wantHistory   int
		wantWorkloads int32
	}{
		{"first reconcile of a new schedule, half done before", "", 10, 110, 1, 120},
		{"first reconcile of a new schedule, all done before", "", 120, 0, 1, 120},
		{"a scheduled sleep, half done before", powerv1alpha1.StateAwake, 10, 110, 1, 120},
		{"a scheduled sleep, all done before", powerv1alpha1.StateAwake, 120, 0, 1, 120},
		{"a scheduled sleep, nothing done before", powerv1alpha1.StateAwake, 0, 120, 1, 120},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &powerv1alpha1.SleepSchedule{}
			s.Name = name
			s.Status.State = tt.prevState
			obs := &observation{state: powerv1alpha1.StateAsleep, slept: tt.byThis,
				workloads: append(asleep(tt.byEarlier, actNone), asleep(tt.byThis, actSleep)...)}
			st := computeStatus(s, obs)
			if len(st.History) != tt.wantHistory {
				t.Fatalf("history = %+v, want %d entries", st.History, tt.wantHistory)
			}
			if got := st.History[0]; got.Action != powerv1alpha1.ActionSleep || got.Workloads != tt.wantWorkloads {
				t.Errorf("newest entry = %+v, want Sleep of %d workloads", got, tt.wantWorkloads)
			}
			// The next reconcile of the period adds only what it changed.
			s.Status = st
			st = computeStatus(s, &observation{state: powerv1alpha1.StateAsleep, workloads: asleep(tt.byEarlier+tt.byThis, actNone)})
			if len(st.History) != tt.wantHistory || st.History[0].Workloads != tt.wantWorkloads {
				t.Errorf("after a converged reconcile: %+v, want %d workloads", st.History, tt.wantWorkloads)
			}
		})
	}
}

// The same for a wake, which leaves no record on what it woke: the new leader counts
// what the schedule held at its last status write and holds no more.
func TestComputeStatusCountsAWakeAnEarlierLeaderBegan(t *testing.T) {
	const name = "nights"
	held := func(n int) []*workload {
		var out []*workload
		for i := range n {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: fmt.Sprintf("app-%03d", i)}}
			out = append(out, &workload{kind: powerv1alpha1.KindDeployment, obj: d, targeted: true, act: actWake, asleepBy: name,
				record: &sleepRecord{Replicas: ptr.To(int32(2)), SleepReplicas: ptr.To(int32(0))}})
		}
		return out
	}
	tests := []struct {
		name                string
		sleeping, leftAlone int32 // at the last status write, asleep
		heldNow             int   // still held, woken by this reconcile
		wantWorkloads       int32
	}{
		{"nothing woken before", 120, 0, 120, 120},
		{"woken half-way before", 120, 0, 30, 120},
		{"all woken before", 120, 0, 0, 120},
		{"left alone ones are released, and counted, once", 100, 20, 120, 120},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &powerv1alpha1.SleepSchedule{}
			s.Name = name
			s.Status.State = powerv1alpha1.StateAsleep
			s.Status.SleepingWorkloads, s.Status.LeftAloneCount = tt.sleeping, tt.leftAlone
			s.Status.History = []powerv1alpha1.Transition{{Action: powerv1alpha1.ActionSleep, Workloads: tt.sleeping + tt.leftAlone}}
			st := computeStatus(s, &observation{state: powerv1alpha1.StateAwake, woken: tt.heldNow, workloads: held(tt.heldNow)})
			if len(st.History) != 2 || st.History[0].Action != powerv1alpha1.ActionWake || st.History[0].Workloads != tt.wantWorkloads {
				t.Errorf("history = %+v, want a Wake of %d workloads first", st.History, tt.wantWorkloads)
			}
		})
	}
}
