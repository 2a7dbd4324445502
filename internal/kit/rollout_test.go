package kit

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// old is one of the four rollout definitions RolledOut replaced: what it answered on a
// case, or that it did not look at the kind.
type old int

const (
	na old = iota // the definition did not handle the kind
	no
	yes
)

func (o old) is(b bool) bool { return o == yes && b || o == no && !b }

// rolloutCase is a workload and what each old definition said of it, next to what
// each mode says:
//
//   - canary: delivery/canary deploymentReady (Deployments): observedGeneration
//     current and updated == available == status.replicas == spec.replicas;
//   - rotation: secrets/secretrotation rolledOut: observedGeneration current, every
//     wanted pod updated, ready and available, no pod of an older template;
//   - sleep: power/sleepschedule deploymentReady / statefulSetReady: observedGeneration
//     current and ready (and, for a Deployment, updated) >= spec.replicas;
//   - placement: fleet/placement readyOf: status.readyReplicas, counted against the
//     replicas placed (a cluster was ready when ready >= want).
//
// complete and readyAtCount are the answers of RolloutComplete and
// RolloutReadyAtCount; readyCount is Rollout.Ready in RolloutReadyAtCount.
type rolloutCase struct {
	name                             string
	obj                              client.Object
	canary, rotation, sleep, placing old
	complete, readyAtCount           bool
	readyCount                       int32
}

func deployment(replicas *int32, gen, observed int64, total, updated, ready, available int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "d", Generation: gen},
		Spec:       appsv1.DeploymentSpec{Replicas: replicas},
		Status: appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: total, UpdatedReplicas: updated,
			ReadyReplicas: ready, AvailableReplicas: available},
	}
}

// statefulSet's current revision is "a"; update is the revision being rolled out.
func statefulSet(replicas *int32, gen, observed int64, updated, ready int32, update string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: gen},
		Spec:       appsv1.StatefulSetSpec{Replicas: replicas},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: observed, UpdatedReplicas: updated, ReadyReplicas: ready,
			CurrentRevision: "a", UpdateRevision: update},
	}
}

// daemonSet has observed generation 1.
func daemonSet(gen int64, desired, updated, ready, unavailable int32) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "ds", Generation: gen},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: desired,
			UpdatedNumberScheduled: updated, NumberReady: ready, NumberUnavailable: unavailable},
	}
}

var rolloutCases = []rolloutCase{
	// Deployments: replicas, generation, observed, status.replicas, updated, ready, available.
	{name: "deployment rolled out", obj: deployment(ptr.To[int32](3), 2, 2, 3, 3, 3, 3),
		canary: yes, rotation: yes, sleep: yes, placing: yes, complete: true, readyAtCount: true, readyCount: 3},
	{name: "deployment nil replicas is one", obj: deployment(nil, 1, 1, 1, 1, 1, 1),
		canary: yes, rotation: yes, sleep: yes, placing: yes, complete: true, readyAtCount: true, readyCount: 1},
	{name: "deployment nil replicas, none running", obj: deployment(nil, 1, 1, 0, 0, 0, 0),
		canary: no, rotation: no, sleep: no, placing: no, complete: false, readyAtCount: false, readyCount: 0},
	{name: "deployment observedGeneration behind", obj: deployment(ptr.To[int32](3), 3, 2, 3, 3, 3, 3),
		canary: no, rotation: no, sleep: no, placing: yes, complete: false, readyAtCount: false, readyCount: 0},
	{name: "deployment rolling: one new pod, old ones ready", obj: deployment(ptr.To[int32](3), 2, 2, 4, 1, 3, 3),
		canary: no, rotation: no, sleep: no, placing: yes, complete: false, readyAtCount: false, readyCount: 1},
	{name: "deployment surplus old pod", obj: deployment(ptr.To[int32](3), 2, 2, 4, 3, 4, 4),
		canary: no, rotation: no, sleep: yes, placing: yes, complete: false, readyAtCount: true, readyCount: 3},
	{name: "deployment scaling down, all pods current", obj: deployment(ptr.To[int32](2), 2, 2, 3, 3, 3, 3),
		canary: no, rotation: yes, sleep: yes, placing: yes, complete: true, readyAtCount: true, readyCount: 3},
	{name: "deployment ready, not yet available (minReadySeconds)", obj: deployment(ptr.To[int32](3), 2, 2, 3, 3, 3, 2),
		canary: no, rotation: no, sleep: yes, placing: yes, complete: false, readyAtCount: true, readyCount: 3},
	{name: "deployment pods not ready", obj: deployment(ptr.To[int32](3), 2, 2, 3, 3, 1, 1),
		canary: no, rotation: no, sleep: no, placing: no, complete: false, readyAtCount: false, readyCount: 1},
	{name: "deployment zero replicas, none left", obj: deployment(ptr.To[int32](0), 2, 2, 0, 0, 0, 0),
		canary: yes, rotation: yes, sleep: yes, placing: yes, complete: true, readyAtCount: true, readyCount: 0},
	{name: "deployment zero replicas, old pods left", obj: deployment(ptr.To[int32](0), 2, 2, 2, 0, 2, 2),
		canary: no, rotation: no, sleep: yes, placing: yes, complete: false, readyAtCount: true, readyCount: 0},
	{name: "deployment woken from zero, pods starting", obj: deployment(ptr.To[int32](2), 3, 3, 2, 2, 0, 0),
		canary: no, rotation: no, sleep: no, placing: no, complete: false, readyAtCount: false, readyCount: 0},

	// StatefulSets: replicas, generation, observed, updated, ready, currentRevision, updateRevision.
	{name: "statefulset rolled out", obj: statefulSet(ptr.To[int32](2), 1, 1, 2, 2, "a"),
		canary: na, rotation: yes, sleep: yes, placing: yes, complete: true, readyAtCount: true, readyCount: 2},
	{name: "statefulset nil replicas is one", obj: statefulSet(nil, 1, 1, 1, 1, "a"),
		canary: na, rotation: yes, sleep: yes, placing: yes, complete: true, readyAtCount: true, readyCount: 1},
	{name: "statefulset observedGeneration behind", obj: statefulSet(ptr.To[int32](2), 2, 1, 2, 2, "a"),
		canary: na, rotation: no, sleep: no, placing: yes, complete: false, readyAtCount: false, readyCount: 0},
	{name: "statefulset rolling, old pods ready", obj: statefulSet(ptr.To[int32](2), 2, 2, 1, 2, "b"),
		canary: na, rotation: no, sleep: yes, placing: yes, complete: false, readyAtCount: true, readyCount: 2},
	{name: "statefulset updated, revision not yet current", obj: statefulSet(ptr.To[int32](2), 2, 2, 2, 2, "b"),
		canary: na, rotation: no, sleep: yes, placing: yes, complete: false, readyAtCount: true, readyCount: 2},
	{name: "statefulset OnDelete, nothing updated", obj: statefulSet(ptr.To[int32](2), 2, 2, 0, 2, "b"),
		canary: na, rotation: no, sleep: yes, placing: yes, complete: false, readyAtCount: true, readyCount: 2},
	{name: "statefulset pods not ready", obj: statefulSet(ptr.To[int32](2), 1, 1, 2, 1, "a"),
		canary: na, rotation: no, sleep: no, placing: no, complete: false, readyAtCount: false, readyCount: 1},
	{name: "statefulset zero replicas", obj: statefulSet(ptr.To[int32](0), 2, 2, 0, 0, "b"),
		canary: na, rotation: yes, sleep: yes, placing: yes, complete: true, readyAtCount: true, readyCount: 0},

	// DaemonSets: generation, observed, desired, updated, ready, unavailable.
	{name: "daemonset rolled out", obj: daemonSet(1, 3, 3, 3, 0),
		canary: na, rotation: yes, sleep: na, placing: na, complete: true, readyAtCount: true, readyCount: 3},
	{name: "daemonset observedGeneration behind", obj: daemonSet(2, 3, 3, 3, 0),
		canary: na, rotation: no, sleep: na, placing: na, complete: false, readyAtCount: false, readyCount: 0},
	{name: "daemonset updating", obj: daemonSet(1, 3, 1, 3, 0),
		canary: na, rotation: no, sleep: na, placing: na, complete: false, readyAtCount: false, readyCount: 1},
	{name: "daemonset ready, one unavailable", obj: daemonSet(1, 3, 3, 3, 1),
		canary: na, rotation: no, sleep: na, placing: na, complete: false, readyAtCount: true, readyCount: 3},
	{name: "daemonset on no node", obj: daemonSet(1, 0, 0, 0, 0),
		canary: na, rotation: yes, sleep: na, placing: na, complete: true, readyAtCount: true, readyCount: 0},
}

// changed lists the cases on which a controller's mode answers otherwise than its old
// definition did, each a bug of the old one (see the commit that made RolledOut).
var changed = map[string]map[string]bool{
	// deploymentReady wanted status.replicas == spec.replicas: a canary being scaled
	// down (the target's replicas lowered during an analysis), all its pods current and
	// available, counted as not ready, which took its traffic away and restarted the
	// step's analysis window.
	"canary": {"deployment scaling down, all pods current": true},
	// readyOf counted ready pods of any template, before the member's controller had
	// seen the new spec: a cluster was Ready straight after a new template was placed.
	"placement": {
		"deployment observedGeneration behind":            true,
		"deployment rolling: one new pod, old ones ready": true,
		"statefulset observedGeneration behind":           true,
	},
}

// Each controller's mode gives its old definition's answer on every case, but for the
// listed bugs.
func TestRolledOutKeepsEachControllersDefinition(t *testing.T) {
	for _, c := range rolloutCases {
		complete, _ := RolledOut(c.obj, RolloutComplete)
		readyAt, _ := RolledOut(c.obj, RolloutReadyAtCount)
		for _, ctl := range []struct {
			name string
			old  old
			got  bool
		}{
			{"canary", c.canary, complete},
			{"secretrotation", c.rotation, complete},
			{"sleepschedule", c.sleep, readyAt},
			{"placement", c.placing, readyAt},
		} {
			if ctl.old == na || ctl.old.is(ctl.got) {
				if changed[ctl.name][c.name] {
					t.Errorf("%s: %s is listed as changed but answers as before", c.name, ctl.name)
				}
				continue
			}
			if !changed[ctl.name][c.name] {
				t.Errorf("%s: %s's mode says %v, its old definition %v", c.name, ctl.name, ctl.got, ctl.old == yes)
			}
		}
	}
}

func TestRolledOut(t *testing.T) {
	for _, c := range rolloutCases {
		t.Run(c.name, func(t *testing.T) {
			for _, m := range []struct {
				mode RolloutMode
				want bool
			}{{RolloutComplete, c.complete}, {RolloutReadyAtCount, c.readyAtCount}} {
				r := RolloutOf(c.obj, m.mode)
				if r.Done != m.want {
					t.Errorf("%s: Done = %v (%q), want %v", m.mode, r.Done, r.Waiting, m.want)
				}
				if r.Done != (r.Waiting == "") {
					t.Errorf("%s: Done = %v with Waiting %q: a rollout not done says what it waits for", m.mode, r.Done, r.Waiting)
				}
				done, msg := RolledOut(c.obj, m.mode)
				if done != r.Done || msg != r.Waiting {
					t.Errorf("%s: RolledOut = %v, %q; RolloutOf = %v, %q", m.mode, done, msg, r.Done, r.Waiting)
				}
			}
			if r := RolloutOf(c.obj, RolloutReadyAtCount); r.Ready != c.readyCount {
				t.Errorf("Ready = %d, want %d", r.Ready, c.readyCount)
			}
			// A read through the API as unstructured (placement's apply responses)
			// says the same as the typed object.
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c.obj)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: m}
			u.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind(kindOf(c.obj)))
			for _, mode := range []RolloutMode{RolloutComplete, RolloutReadyAtCount} {
				if got, want := RolloutOf(u, mode), RolloutOf(c.obj, mode); got != want {
					t.Errorf("%s: unstructured %+v, typed %+v", mode, got, want)
				}
			}
		})
	}
}

func kindOf(o client.Object) string {
	switch o.(type) {
	case *appsv1.Deployment:
		return "Deployment"
	case *appsv1.StatefulSet:
		return "StatefulSet"
	case *appsv1.DaemonSet:
		return "DaemonSet"
	}
	return ""
}

func TestRolledOutOtherKinds(t *testing.T) {
	for _, o := range []client.Object{&corev1.ConfigMap{}, &metav1.PartialObjectMetadata{}} {
		if done, msg := RolledOut(o, RolloutComplete); done || msg == "" {
			t.Errorf("%T: RolledOut = %v, %q: a kind without a rollout is never rolled out", o, done, msg)
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	u.Object["status"] = "not an object"
	if done, msg := RolledOut(u, RolloutReadyAtCount); done || msg == "" {
		t.Errorf("malformed unstructured Deployment: RolledOut = %v, %q", done, msg)
	}
}
