package sleepschedule

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

// The wait for a sleep to take effect starts at the sleep write; an object still
// running more than it was scaled to is reported once the wait is over and looked at
// again, and forgotten once it runs no more; a restart starts the wait again.
func TestCheckSleepTookEffect(t *testing.T) {
	pool := &extraKind{mode: modeScale, name: "KafkaNodePool.kafka.strimzi.io", gk: schema.GroupKind{Group: strimziGroup, Kind: "KafkaNodePool"}}
	widget := &extraKind{mode: modeScale, name: "Widget.example.com", gk: schema.GroupKind{Group: "example.com", Kind: "Widget"}}
	patched := &extraKind{mode: modePatch, name: "Redis.example.com"}
	s := &powerv1alpha1.SleepSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nights"}}
	rec := &sleepRecord{Replicas: ptr.To(int32(3)), SleepReplicas: ptr.To(int32(0))}
	obj := func(uid string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: uid, UID: types.UID(uid)}}
	}
	held := func(k *extraKind, uid string, act action, running int32) *workload {
		return &workload{kind: k.name, extra: k, obj: obj(uid), act: act, asleepBy: "nights", record: rec, running: running}
	}
	const after = 5 * time.Minute
	r := &Reconciler{SleepEffectiveAfter: after}
	t0 := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)

	// Put to sleep now: nothing is known of what runs; look again after the wait.
	obs := &observation{now: t0, workloads: []*workload{held(pool, "brokers", actSleep, 0), held(widget, "w", actSleep, 0), held(patched, "redis", actSleep, 0)}}
	if got := r.checkSleepTookEffect(s, obs); got != after {
		t.Fatalf("recheck after a sleep = %v, want %v", got, after)
	}
	// Still running three minutes later: not yet due.
	obs = &observation{now: t0.Add(3 * time.Minute), workloads: []*workload{held(pool, "brokers", actNone, 3), held(widget, "w", actNone, 0)}}
	if got := r.checkSleepTookEffect(s, obs); got != 2*time.Minute || obs.workloads[0].stillRunning != "" {
		t.Fatalf("3 minutes in: recheck %v, stillRunning %q; want 2m0s and nothing reported", got, obs.workloads[0].stillRunning)
	}
	// Past the wait: reported (with Strimzi's way out), and looked at again.
	obs = &observation{now: t0.Add(6 * time.Minute), workloads: []*workload{held(pool, "brokers", actNone, 3), held(widget, "w", actNone, 0)}}
	if got := r.checkSleepTookEffect(s, obs); got != after {
		t.Errorf("reported: recheck %v, want %v", got, after)
	}
	if msg := obs.workloads[0].stillRunning; !strings.Contains(msg, "3 replica(s) run, more than 5m0s after it was scaled to 0") || !strings.Contains(msg, "skip-broker-scaledown-check") {
		t.Errorf("stillRunning = %q", msg)
	}
	if n, msg := stillRunningSummary(obs); n != 1 || !strings.Contains(msg, "KafkaNodePool.kafka.strimzi.io kafka/brokers (3 replica(s)") {
		t.Errorf("summary = %d, %q", n, msg)
	}
	// A Widget that runs more is reported without Strimzi's advice.
	obs = &observation{now: t0.Add(7 * time.Minute), workloads: []*workload{held(widget, "w", actNone, 2)}}
	r.checkSleepTookEffect(s, obs)
	if msg := obs.workloads[0].stillRunning; msg != "" {
		t.Errorf("a Widget first seen running now is reported at once: %q", msg)
	}
	// The brokers went: nothing pending, nothing remembered.
	obs = &observation{now: t0.Add(8 * time.Minute), workloads: []*workload{held(pool, "brokers", actNone, 0)}}
	if got := r.checkSleepTookEffect(s, obs); got != 0 || obs.workloads[0].stillRunning != "" || len(r.running.m) != 0 {
		t.Errorf("nothing running: recheck %v, stillRunning %q, remembered %v", got, obs.workloads[0].stillRunning, r.running.m)
	}
	// After a restart the wait starts at the first reconcile.
	r2 := &Reconciler{SleepEffectiveAfter: after}
	obs = &observation{now: t0.Add(time.Hour), workloads: []*workload{held(pool, "brokers", actNone, 3)}}
	if got := r2.checkSleepTookEffect(s, obs); got != after || obs.workloads[0].stillRunning != "" {
		t.Errorf("after a restart: recheck %v, stillRunning %q", got, obs.workloads[0].stillRunning)
	}
	r2.running.forget(types.NamespacedName{Name: "nights"})
	if len(r2.running.m) != 0 {
		t.Errorf("forget left %v", r2.running.m)
	}
}
