package sleepschedule

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

// savingsStep is how much time must pass before a reconcile that changes nothing else
// counts it into status.savings: a workload's event then does not bring a status
// write for a few more seconds. A transition always counts.
const savingsStep = 5 * time.Minute

// WeekStart is Monday 00:00 of t's week, in the schedule's time zone.
func (s *Schedule) WeekStart(t time.Time) time.Time {
	d := dateOf(t.In(s.loc))
	return s.at(d.addDays(-((int(d.weekday()) + 6) % 7)), 0)
}

// countSavings returns the week's savings counted up to now: the time since the last
// count is added at the state and saved requests that the previous status (prev)
// reported, which held until this reconcile. A week that began since starts from
// zero. Pure.
func countSavings(prev *powerv1alpha1.SleepScheduleStatus, now, weekStart time.Time, stateChanged bool) *powerv1alpha1.SleepSavings {
	now, weekStart = now.Truncate(time.Second), weekStart.Truncate(time.Second)
	if prev.Savings == nil {
		return formatSavings(&powerv1alpha1.SleepSavings{WeekStart: metav1.NewTime(weekStart), CountedUntil: metav1.NewTime(now)})
	}
	sv := *prev.Savings
	from := sv.CountedUntil.Time
	newWeek := weekStart.After(sv.WeekStart.Time)
	if !now.After(from) || !stateChanged && !newWeek && now.Sub(from) < savingsStep {
		return &sv
	}
	if newWeek {
		sv = powerv1alpha1.SleepSavings{WeekStart: metav1.NewTime(weekStart)}
		if from.Before(weekStart) {
			from = weekStart
		}
	}
	if dt := int64(now.Sub(from) / time.Second); dt > 0 && prev.State == powerv1alpha1.StateAsleep && prev.SleepingWorkloads > 0 {
		sv.AsleepSeconds += dt
		if q, ok := prev.SavedRequests[corev1.ResourceCPU]; ok {
			sv.CPUMilliCoreSeconds += q.MilliValue() * dt
		}
		if q, ok := prev.SavedRequests[corev1.ResourceMemory]; ok {
			sv.MemoryMiBSeconds += q.Value() / (1 << 20) * dt
		}
	}
	sv.CountedUntil = metav1.NewTime(now)
	return formatSavings(&sv)
}

func formatSavings(sv *powerv1alpha1.SleepSavings) *powerv1alpha1.SleepSavings {
	sv.AsleepHours = fmt.Sprintf("%.1f", float64(sv.AsleepSeconds)/3600)
	sv.CPUCoreHours = fmt.Sprintf("%.1f", float64(sv.CPUMilliCoreSeconds)/1000/3600)
	sv.MemoryGiBHours = fmt.Sprintf("%.1f", float64(sv.MemoryMiBSeconds)/1024/3600)
	return sv
}

// namespaceSavingsLimit bounds status.savedByNamespace; the metrics have every
// namespace.
const namespaceSavingsLimit = 50

// savingsByNamespace is what the schedule named schedule saves now in each namespace
// of obs, the most CPU first (then memory, then by name). Pure.
func savingsByNamespace(schedule string, obs *observation) []powerv1alpha1.NamespaceSavings {
	type saving struct {
		sleeping int32
		sum      requestSum
	}
	byNS := map[string]*saving{}
	for _, w := range obs.workloads {
		if !w.asleepNow(schedule) {
			continue
		}
		ns := w.obj.GetNamespace()
		sv := byNS[ns]
		if sv == nil {
			sv = &saving{}
			byNS[ns] = sv
		}
		sv.sleeping++
		sv.sum.add(w.podRequests, w.savedPods(obs.sleepReplicas))
	}
	out := make([]powerv1alpha1.NamespaceSavings, 0, len(byNS))
	for ns, sv := range byNS {
		out = append(out, powerv1alpha1.NamespaceSavings{Namespace: ns, SleepingWorkloads: sv.sleeping, SavedRequests: sv.sum.list()})
	}
	slices.SortFunc(out, func(a, b powerv1alpha1.NamespaceSavings) int {
		ac, bc := a.SavedRequests[corev1.ResourceCPU], b.SavedRequests[corev1.ResourceCPU]
		am, bm := a.SavedRequests[corev1.ResourceMemory], b.SavedRequests[corev1.ResourceMemory]
		return cmp.Or(bc.Cmp(ac), bm.Cmp(am), cmp.Compare(a.Namespace, b.Namespace))
	})
	return out
}
