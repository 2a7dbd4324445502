package kit

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RolloutMode is what "rolled out" means to the caller. The modes differ in whether
// pods of an older template may still run and whether ready is enough or available is
// wanted; every mode wants the workload's controller to have seen its current spec.
type RolloutMode int

const (
	// RolloutComplete: every wanted pod runs the current template and is ready and
	// available, and no pod of an older template is left (surplus pods of the current
	// one, a scale-down under way, may be). Whoever must know that nothing runs the
	// old template any more: Canary's variants, SecretRotation's consumers.
	RolloutComplete RolloutMode = iota + 1
	// RolloutReadyAtCount: at least the declared number of pods is ready and, for a
	// Deployment or DaemonSet, runs the current template; pods of an older template may
	// still be going, and a StatefulSet's pods count whatever their revision (one
	// updated OnDelete would never finish). Whoever waits for a workload to serve at
	// its declared size: SleepSchedule's wake, PlacementPolicy's members.
	RolloutReadyAtCount
)

func (m RolloutMode) String() string {
	switch m {
	case RolloutComplete:
		return "Complete"
	case RolloutReadyAtCount:
		return "ReadyAtCount"
	}
	return fmt.Sprintf("RolloutMode(%d)", int(m))
}

// Rollout is what a workload's status says of its rollout, in one mode.
type Rollout struct {
	// Done: rolled out, in the mode asked.
	Done bool
	// Want is how many pods the workload declares (spec.replicas, 1 when unset; a
	// DaemonSet's desired number scheduled).
	Want int32
	// Ready is how many pods count as ready in the mode, as far as the status tells:
	// 0 while the workload's controller has not seen the current spec; for a
	// Deployment or a DaemonSet no more than run the current template (the status
	// counts ready pods of every template). Done in RolloutReadyAtCount is Ready >= Want.
	Ready int32
	// Waiting says what the rollout waits for; "" when Done.
	Waiting string
}

// RolledOut reports whether obj (a Deployment, StatefulSet or DaemonSet, typed or
// unstructured) has rolled out its current spec in mode, and otherwise what it waits
// for. Any other kind is never rolled out.
func RolledOut(obj client.Object, mode RolloutMode) (bool, string) {
	r := RolloutOf(obj, mode)
	return r.Done, r.Waiting
}

// RolloutOf is RolledOut with the counts behind the answer.
func RolloutOf(obj client.Object, mode RolloutMode) Rollout {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		typed, err := typedWorkload(u)
		if err != nil {
			return Rollout{Waiting: fmt.Sprintf("reading the status of %s %s: %v", u.GetKind(), u.GetName(), err)}
		}
		obj = typed
	}
	switch w := obj.(type) {
	case *appsv1.Deployment:
		return deploymentRollout(w, mode)
	case *appsv1.StatefulSet:
		return statefulSetRollout(w, mode)
	case *appsv1.DaemonSet:
		return daemonSetRollout(w, mode)
	}
	return Rollout{Waiting: fmt.Sprintf("%T has no rollout", obj)}
}

// typedWorkload converts an apps/v1 workload read as unstructured; nil for other kinds.
func typedWorkload(u *unstructured.Unstructured) (client.Object, error) {
	var obj client.Object
	switch gvk := u.GroupVersionKind(); {
	case gvk.Group != appsv1.GroupName:
		return u, nil
	case gvk.Kind == "Deployment":
		obj = &appsv1.Deployment{}
	case gvk.Kind == "StatefulSet":
		obj = &appsv1.StatefulSet{}
	case gvk.Kind == "DaemonSet":
		obj = &appsv1.DaemonSet{}
	default:
		return u, nil
	}
	return obj, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj)
}

func notSeen(kind string) string {
	return "waiting for the " + kind + " controller to see the current spec"
}

func deploymentRollout(d *appsv1.Deployment, mode RolloutMode) Rollout {
	s := d.Status
	r := Rollout{Want: ptr.Deref(d.Spec.Replicas, 1)}
	if s.ObservedGeneration < d.Generation {
		r.Waiting = notSeen("Deployment")
		return r
	}
	r.Ready = min(s.ReadyReplicas, s.UpdatedReplicas)
	switch {
	case s.UpdatedReplicas < r.Want:
		r.Waiting = fmt.Sprintf("%d of %d pods updated, %d in all", s.UpdatedReplicas, r.Want, s.Replicas)
	case mode == RolloutComplete && s.Replicas > s.UpdatedReplicas:
		r.Waiting = fmt.Sprintf("%d pods of an older template left", s.Replicas-s.UpdatedReplicas)
	case s.ReadyReplicas < r.Want:
		r.Waiting = fmt.Sprintf("%d of %d pods ready", s.ReadyReplicas, r.Want)
	case mode == RolloutComplete && s.AvailableReplicas < r.Want:
		r.Waiting = fmt.Sprintf("%d of %d pods available", s.AvailableReplicas, r.Want)
	default:
		r.Done = true
	}
	return r
}

func statefulSetRollout(st *appsv1.StatefulSet, mode RolloutMode) Rollout {
	s := st.Status
	r := Rollout{Want: ptr.Deref(st.Spec.Replicas, 1)}
	if s.ObservedGeneration < st.Generation {
		r.Waiting = notSeen("StatefulSet")
		return r
	}
	r.Ready = s.ReadyReplicas
	switch {
	case mode == RolloutComplete && (s.UpdatedReplicas < r.Want || (r.Want > 0 && s.UpdateRevision != "" && s.CurrentRevision != s.UpdateRevision)):
		r.Waiting = fmt.Sprintf("%d of %d pods updated", s.UpdatedReplicas, r.Want)
	case s.ReadyReplicas < r.Want:
		r.Waiting = fmt.Sprintf("%d of %d pods ready", s.ReadyReplicas, r.Want)
	default:
		r.Done = true
	}
	return r
}

func daemonSetRollout(ds *appsv1.DaemonSet, mode RolloutMode) Rollout {
	s := ds.Status
	r := Rollout{Want: s.DesiredNumberScheduled}
	if s.ObservedGeneration < ds.Generation {
		r.Waiting = notSeen("DaemonSet")
		return r
	}
	r.Ready = min(s.NumberReady, s.UpdatedNumberScheduled)
	switch {
	case s.UpdatedNumberScheduled < r.Want:
		r.Waiting = fmt.Sprintf("%d of %d pods updated", s.UpdatedNumberScheduled, r.Want)
	case s.NumberReady < r.Want:
		r.Waiting = fmt.Sprintf("%d of %d pods ready", s.NumberReady, r.Want)
	case mode == RolloutComplete && s.NumberUnavailable > 0:
		r.Waiting = fmt.Sprintf("%d pods unavailable", s.NumberUnavailable)
	default:
		r.Done = true
	}
	return r
}
