package sleepschedule

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// An object of a kind with a scale subresource is asleep once Orderly set its replicas,
// but its operator decides what runs: Strimzi, for one, keeps the brokers of a
// KafkaNodePool that still hold partition replicas, and its status goes on counting
// them. While the schedule holds such an object asleep, its own status (the scale
// subresource's status.replicas, read at every reconcile anyway) is compared with the
// replicas Orderly set; one that still runs more than that for SleepEffectiveAfter is
// reported in the WorkloadsStillRunning condition, Ready's message and a Warning Event.

// DefaultSleepEffectiveAfter is how long an object asleep may still run more replicas
// than it was scaled to before the schedule reports it: operators take a while to
// stop what they run (Strimzi moves no partitions, but rolls and reconciles every two
// minutes by default).
const DefaultSleepEffectiveAfter = 5 * time.Minute

// ConditionWorkloadsStillRunning is True when objects the schedule holds asleep still
// run more replicas than they were scaled to, by their own status, SleepEffectiveAfter
// after it was first seen; set only for schedules with targets.kinds.
const ConditionWorkloadsStillRunning = "WorkloadsStillRunning"

// Reasons of the WorkloadsStillRunning condition and its Event.
const (
	ReasonReplicasKept = "ReplicasKept"
	ReasonNoneRunning  = "NoneRunning"
)

// strimziGroup is Strimzi's API group, whose scale-down refusal has a known way out.
const strimziGroup = "kafka.strimzi.io"

// runningSince remembers, per schedule, since when each object the schedule holds
// asleep has been seen running more replicas than it was scaled to. It is memory
// only: after a restart the wait starts again, which delays a report and never
// makes a false one.
type runningSince struct {
	mu sync.Mutex
	m  map[types.NamespacedName]map[types.UID]time.Time
}

// update replaces what is remembered for schedule by the objects of seen, keeping
// the time each was first seen running; it returns those times.
func (rs *runningSince) update(schedule types.NamespacedName, seen []types.UID, now time.Time) map[types.UID]time.Time {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	prev := rs.m[schedule]
	next := make(map[types.UID]time.Time, len(seen))
	for _, uid := range seen {
		if t, ok := prev[uid]; ok {
			next[uid] = t
		} else {
			next[uid] = now
		}
	}
	if len(next) == 0 {
		delete(rs.m, schedule)
		return next
	}
	if rs.m == nil {
		rs.m = map[types.NamespacedName]map[types.UID]time.Time{}
	}
	rs.m[schedule] = next
	return next
}

func (rs *runningSince) forget(schedule types.NamespacedName) { rs.update(schedule, nil, time.Time{}) }

// sleepPending reports whether w is an object of a kind with a scale subresource
// that the schedule holds asleep and that may still run more replicas than it was
// scaled to: put to sleep by this reconcile (what runs was not read since), or
// running more by its own status as read at this one.
func (w *workload) sleepPending(schedule string) bool {
	if w.extra == nil || w.extra.mode != modeScale || !w.asleepNow(schedule) {
		return false
	}
	switch w.act {
	case actSleep, actFinishSleep:
		return true
	case actNone:
		return w.running > w.sleepValue()
	}
	return false
}

// checkSleepTookEffect marks the objects held asleep that still run more replicas
// than they were scaled to, SleepEffectiveAfter after they were put to sleep (or
// first seen so, after a restart); it returns when to look again (0 when nothing is
// pending).
func (r *Reconciler) checkSleepTookEffect(s *powerv1alpha1.SleepSchedule, obs *observation) time.Duration {
	after := r.SleepEffectiveAfter
	if after <= 0 {
		after = DefaultSleepEffectiveAfter
	}
	var pending []*workload
	var uids []types.UID
	for _, w := range obs.workloads {
		if w.sleepPending(s.Name) {
			pending = append(pending, w)
			uids = append(uids, w.obj.GetUID())
		}
	}
	since := r.running.update(client.ObjectKeyFromObject(s), uids, obs.now)
	var recheck time.Duration
	for _, w := range pending {
		if left := after - obs.now.Sub(since[w.obj.GetUID()]); left > 0 || w.act != actNone {
			if left > 0 && (recheck == 0 || left < recheck) {
				recheck = left
			}
			continue
		}
		// Looked at again, so that the report goes once the replicas do (a change of
		// the object's status alone does not bring the schedule back).
		if recheck == 0 || after < recheck {
			recheck = after
		}
		// The threshold, not the time elapsed: the message changes only with what runs.
		w.stillRunning = fmt.Sprintf("%d replica(s) run, more than %s after it was scaled to %d", w.running, after, w.sleepValue())
		if w.extra.gk.Group == strimziGroup {
			w.stillRunning += `; Strimzi keeps the brokers that hold partition replicas: move them first (Cruise Control), or annotate the Kafka strimzi.io/skip-broker-scaledown-check="true"`
		}
	}
	return recheck
}

// stillRunningSummary is the message of the WorkloadsStillRunning condition; "" when
// no object is reported.
func stillRunningSummary(obs *observation) (n int, msg string) {
	var names []string
	for _, w := range obs.workloads {
		if w.stillRunning != "" {
			names = append(names, fmt.Sprintf("%s (%s)", w.id(), w.stillRunning))
		}
	}
	if len(names) == 0 {
		return 0, ""
	}
	return len(names), kit.Truncate(fmt.Sprintf("%d workload(s) asleep still run pods by their own status, so their operator kept them: %s (docs/sleepschedule.md, Operators that refuse to scale down)",
		len(names), kit.FirstN(names, namesLimit)), 8192)
}
